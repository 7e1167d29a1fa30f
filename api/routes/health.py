"""Liveness, readiness and metrics (no key needed)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text

from worker.celery_app import ping_broker

from ..deps import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "not ready; the body says why"}})
async def readyz(state: StateDep) -> JSONResponse:
    """200 only when the store and the broker answer and a model is loaded."""

    def store() -> str | None:
        try:
            with state.factory() as session:
                session.execute(text("SELECT 1"))
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
    active = state.models.active
    if active is None:
        problems.append(state.models.last_error or "no model is loaded (none is active yet)")
    body = {
        "status": "ready" if not problems else "not ready",
        "reasons": problems,
        "model": active.describe() if active else None,
        "model_error": state.models.last_error,
    }
    return JSONResponse(body, status_code=200 if not problems else 503)


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
