"""ASGI middleware: request ids, security headers, body size limits, request metrics and an
access log that never holds a request body (submitted text is patient data)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .metrics import Metrics

log = logging.getLogger("mslm.access")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]


# The web page and everything else: our own origin only. Swagger UI at /docs (its assets are
# ours too) starts with an inline script and styles itself inline.
CSP_STRICT = (
    b"default-src 'self'; img-src 'self' blob: data:; script-src 'self'; style-src 'self'; "
    b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    b"frame-ancestors 'none'"
)
CSP_DOCS = (
    b"default-src 'self'; img-src 'self' data:; script-src 'self' 'unsafe-inline'; "
    b"style-src 'self' 'unsafe-inline'; object-src 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs",)


def content_security_policy(path: str) -> bytes:
    return CSP_DOCS if path.startswith(DOCS_PATHS) else CSP_STRICT


def _problem(
    request_id: str, path: str, status: int, detail: str, slug: str, title: str | None = None
) -> bytes:
    return json.dumps(
        {
            "type": f"urn:mslm:problem:{slug}",
            "title": title or HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
            "instance": path,
            "request_id": request_id,
        }
    ).encode()


class BodyTooLarge(Exception):
    pass


def _problem_413(request_id: str, path: str, limit: int) -> bytes:
    detail = f"the request body exceeds {limit} bytes"
    return _problem(request_id, path, 413, detail, "too-large", title="Content Too Large")


# A request that carries a body to the API is refused before its body is read when its key
# is missing or wrong (20 keyless 75 MB bodies took the API from 228 MB to 1.67 GB).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# → None when the key is good, else (status, detail, slug, headers) of the refusal
KeyCheck = Callable[[Scope], Awaitable[tuple[int, str, str, dict[str, str]] | None]]


class ServiceMiddleware:
    """One pass per request: id, limits, the key of a request with a body, headers, timing,
    access log."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        body_limit: Callable[[str], int],
        key_check: KeyCheck | None = None,
    ):
        self.app = app
        self.metrics = metrics
        self.body_limit = body_limit
        self.key_check = key_check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        path = scope.get("path", "")
        limit = self.body_limit(path)
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                extra = [
                    (b"x-request-id", request_id.encode()),
                    (b"content-security-policy", content_security_policy(path)),
                ]
                message["headers"] = list(message.get("headers", [])) + extra + SECURITY_HEADERS
            await send(message)

        async def reply_413() -> None:
            await answer(413, _problem_413(request_id, path, limit), {})

        async def refuse(status: int, detail: str, slug: str, extra: dict[str, str]) -> None:
            await answer(status, _problem(request_id, path, status, detail, slug), extra)

        async def answer(status: int, body: bytes, extra: dict[str, str]) -> None:
            await send_wrapper(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        (b"content-type", b"application/problem+json"),
                        (b"content-length", str(len(body)).encode()),
                        *((k.lower().encode(), v.encode()) for k, v in extra.items()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        try:
            length = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            length = 0
        try:
            if (
                self.key_check is not None
                and scope.get("method") in BODY_METHODS
                and path.startswith("/v1/")
            ):
                refusal = await self.key_check(scope)
                if refusal is not None:
                    await refuse(*refusal)
                    return
            if length > limit:
                await reply_413()
                return
            received = 0
            exceeded = False

            async def receive_limited() -> Message:
                nonlocal received, exceeded
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        exceeded = True
                        raise BodyTooLarge()
                return message

            async def app_send(message: Message) -> None:
                # the app's answer to a body cut short (a form parser turns the cut into a
                # 400) is replaced by the 413 below
                if not exceeded:
                    await send_wrapper(message)

            try:
                with contextlib.suppress(BodyTooLarge):
                    await self.app(scope, receive_limited, app_send)
            except asyncio.CancelledError:
                # the server stops and its grace (MSLM_SHUTDOWN_GRACE_SECONDS) is over: say so,
                # rather than the bare 500 the server would send
                if not response_started:
                    await refuse(
                        503,
                        "the service is stopping; send the request again",
                        "stopping",
                        {"Retry-After": "1", "Connection": "close"},
                    )
                raise
            if exceeded and not response_started:
                await reply_413()
        finally:
            elapsed = time.perf_counter() - started
            route = _route_template(scope)
            self.metrics.observe_request(scope.get("method", ""), route, status, elapsed)
            # who: the id of the request's API key (set by the key check; never the secret),
            # and the connecting address
            client = scope.get("client")
            log.info(
                "%s %s %d %.1fms id=%s key=%s client=%s",
                scope.get("method", ""),
                route,
                status,
                1000 * elapsed,
                request_id,
                scope.get("state", {}).get("key_id", "-"),
                client[0] if client else "-",
            )


def _route_template(scope: MutableMapping[str, Any]) -> str:
    """The matched route's path template (``/v1/jobs/{job_id}``), so metrics and logs carry
    no ids or other values from the URL."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template or ("unmatched" if scope.get("path") else "")
