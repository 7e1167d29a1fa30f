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


# A JSON body's shape, checked on its bytes before it is parsed into Python objects (parsed,
# a 70 MB body of 4.5 M tiny entries takes gigabytes): strings and
# structural characters are counted by a regular expression that skips each string whole in C,
# and the scan stops at the first value past the limit, so a refusal costs at most that many
# steps. Commas and colons bound the numbers and literals, which are not matched themselves.
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')
MAX_JSON_VALUES = 50_000
MAX_JSON_DEPTH = 32


def json_shape_problem(
    body: bytes, max_values: int = MAX_JSON_VALUES, max_depth: int = MAX_JSON_DEPTH
) -> str | None:
    """What is wrong with the shape of a JSON body — more than ``max_values`` strings,
    separators and brackets, or nested deeper than ``max_depth`` — else None. Looks at no more
    than ``max_values`` tokens."""
    depth = 0
    for count, match in enumerate(_JSON_TOKEN.finditer(body), start=1):
        if count > max_values:
            return f"the JSON body holds more than {max_values:,} values"
        first = match.group()[:1]
        if first in b"[{":
            depth += 1
            if depth > max_depth:
                return f"the JSON body is nested deeper than {max_depth} levels"
        elif first in b"]}":
            depth -= 1
    return None


def _problem_413(request_id: str, path: str, limit: int) -> bytes:
    detail = f"the request body exceeds {limit} bytes"
    return _problem(request_id, path, 413, detail, "too-large", title="Content Too Large")


# A request that carries a body to the API is refused before its body is read when its key
# is missing or wrong (20 keyless 75 MB bodies took the API from 228 MB to 1.67 GB), lacks the
# route's scope, or is over a quota.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# → None when the request may go on, else (status, detail, slug, headers) of the refusal
Gate = Callable[[Scope], Awaitable[tuple[int, str, str, dict[str, str]] | None]]


def _is_json(content_type: bytes | None) -> bool:
    """Whether the route parses the body as JSON: FastAPI does for a JSON media type, and
    for a request that names none."""
    if content_type is None:
        return True
    kind = content_type.split(b";")[0].strip().lower()
    return kind == b"application/json" or kind.endswith(b"+json")


class ServiceMiddleware:
    """One pass per request: id, limits, the key of a request with a body, headers, timing,
    access log."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        body_limit: Callable[[str], int],
        gate: Gate | None = None,
    ):
        """``body_limit(path)``: the bytes a route's body may have; ``gate(scope)``: the
        checks a request passes before its body is read (the key, its scope, quotas)."""
        self.app = app
        self.metrics = metrics
        self.body_limit = body_limit
        self.gate = gate

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
        # the media type the route reads is the first Content-Type (Starlette's): one header
        # that says otherwise after it must not skip the shape check below — two are refused
        kinds = [v for k, v in scope.get("headers") or [] if k == b"content-type"]
        try:
            if len(kinds) > 1:
                detail = "more than one Content-Type header: send one"
                await refuse(400, detail, "bad-request", {})
                return
            if self.gate is not None:
                refusal = await self.gate(scope)
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

            downstream: Receive = receive_limited
            if scope.get("method") in BODY_METHODS and _is_json(kinds[0] if kinds else None):
                # the whole body (within its limit), its shape checked before the route
                # parses it; then handed to the route as it came
                parts = []
                while True:
                    try:
                        message = await receive_limited()
                    except BodyTooLarge:
                        await reply_413()
                        return
                    if message["type"] != "http.request":
                        break  # the client left
                    parts.append(message.get("body", b""))
                    if not message.get("more_body", False):
                        break
                body = b"".join(parts)
                problem = json_shape_problem(body)
                if problem is not None:
                    await refuse(413, problem, "too-large", {})
                    return
                replayed = False

                async def replay() -> Message:
                    nonlocal replayed
                    if not replayed:
                        replayed = True
                        return {"type": "http.request", "body": body, "more_body": False}
                    return await receive()

                downstream = replay

            async def app_send(message: Message) -> None:
                # the app's answer to a body cut short (a form parser turns the cut into a
                # 400) is replaced by the 413 below
                if not exceeded:
                    await send_wrapper(message)

            try:
                with contextlib.suppress(BodyTooLarge):
                    await self.app(scope, downstream, app_send)
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
