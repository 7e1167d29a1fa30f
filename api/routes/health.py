"""Liveness, readiness and metrics. No key needed, but: ``/readyz`` says why it is not ready,
which model it serves and which one is coming to replace it, only to a caller with a valid
key; with MSLM_PROTECT_METADATA ``/metrics`` wants a key (the middleware checks it)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from mslm_core.timeleft import left_text
from store.db import ping
from worker.celery_app import ping_broker

from ..deps import StateDep, authenticate
from ..problems import Problem

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={503: {"description": "not ready; with a valid key the body says why"}},
)
async def readyz(request: Request, state: StateDep) -> JSONResponse:
    """200 only when the store and the broker answer and a model is loaded. Without a valid
    key the body says only that (``status``); with one, also why not and what is served."""

    def store() -> str | None:
        try:
            ping(state.factory)
        except Exception as exc:
            return f"job store unreachable: {type(exc).__name__}"
        return None

    problems = [
        p
        for p in await asyncio.gather(
            asyncio.to_thread(store), asyncio.to_thread(ping_broker, state.celery)
        )
        if p
    ]
    active, coming = state.models.active, state.models.coming
    if active is None:
        why = state.models.last_error or "no model is loaded (none is active yet)"
        if coming is not None and state.models.last_error is None:
            left = left_text(coming.get("eta_s"))
            why += f"; the first model is being trained (job {coming['job_id']}"
            why += f", {left})" if left else ")"
        problems.append(why)
    code = 200 if not problems else 503
    status = "ready" if not problems else "not ready"
    # the key read by hand: the operation stays open in the API document (a probe needs none)
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return JSONResponse({"status": status}, status_code=code)
    try:
        client = request.client.host if request.client else "-"
        await authenticate(state, client, secret.strip())
    except Problem:
        return JSONResponse({"status": status}, status_code=code)  # a bad key learns no more
    body = {
        "status": status,
        "reasons": problems,
        "model": active.describe() if active else None,
        "model_error": state.models.last_error,
        # a better model on its way (the first start's full one): its job and time left
        "coming": coming,
    }
    return JSONResponse(body, status_code=code)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
        }
    },
)
async def metrics(state: StateDep) -> Response:
    """Prometheus text format."""
    body = await asyncio.to_thread(state.metrics.render)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
