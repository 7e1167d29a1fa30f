"""ASGI middleware, one job a piece (:func:`install` puts them in order): the access log and
request metrics (:class:`AccessLog`, which never holds a request body: submitted text is
patient data), request ids and security headers (:class:`RequestContext`), what is decided
before a body is read (:class:`Admission`) and the body's size and shape
(:class:`BodyLimit`)."""

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


async def send_problem(
    send: Send,
    scope: Scope,
    status: int,
    detail: str,
    slug: str,
    headers: dict[str, str] | None = None,
    title: str | None = None,
) -> None:
    """A problem details answer (RFC 9457) to the request of ``scope``, with its request id."""
    body = json.dumps(
        {
            "type": f"urn:mslm:problem:{slug}",
            "title": title or HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
            "instance": scope.get("path", ""),
            "request_id": scope.get("state", {}).get("request_id", ""),
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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


def utf8_problem(body: bytes) -> str | None:
    """Where a JSON body meant as UTF-8 (no UTF-16 or UTF-32 pattern of zero bytes: JSON's
    own detection) stops being UTF-8, else None."""
    if body.isascii() or json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
        return None  # ASCII (most JSON: escapes) is UTF-8, and is told at C speed
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        return (
            f"the body is not UTF-8 at byte {exc.start:,} (line {line}): JSON is sent as "
            "UTF-8; encode the text as UTF-8 (Latin-1 or cp1252 text is not)"
        )
    return None


async def _send_413(send: Send, scope: Scope, limit: int) -> None:
    detail = f"the request body exceeds {limit} bytes"
    await send_problem(send, scope, 413, detail, "too-large", title="Content Too Large")


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: → None when the request may go on, else (status, detail, slug, headers) of the refusal
Gate = Callable[[Scope], Awaitable[tuple[int, str, str, dict[str, str]] | None]]


def _is_json(content_type: bytes | None) -> bool:
    """Whether the route parses the body as JSON: FastAPI does for a JSON media type, and
    for a request that names none."""
    if content_type is None:
        return True
    kind = content_type.split(b";")[0].strip().lower()
    return kind == b"application/json" or kind.endswith(b"+json")


def _content_types(scope: Scope) -> list[bytes]:
    return [v for k, v in scope.get("headers") or [] if k == b"content-type"]


class AccessLog:
    """Outermost: the request's duration and status into the metrics, and one access-log
    line — method, route template, status, time, request id, the key's id, the client's
    address; never a body, a query value or an id from the URL."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            elapsed = time.perf_counter() - started
            route = _route_template(scope)
            self.metrics.observe_request(scope.get("method", ""), route, status, elapsed)
            state = scope.get("state", {})
            client = scope.get("client")
            log.info(
                "%s %s %d %.1fms id=%s key=%s client=%s",
                scope.get("method", ""),
                route,
                status,
                1000 * elapsed,
                state.get("request_id", "-"),
                state.get("key_id", "-"),  # set by the key check; never the secret
                client[0] if client else "-",
            )


class RequestContext:
    """The request's id (a client's ``X-Request-ID`` when well formed, else a new one), the
    security headers on every answer, and a 503 rather than the server's bare 500 for a
    request still unanswered when the server stops and its grace is over."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        extra = [
            (b"x-request-id", request_id.encode()),
            (b"content-security-policy", content_security_policy(scope.get("path", ""))),
            *SECURITY_HEADERS,
        ]
        started = False

        async def with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        try:
            await self.app(scope, receive, with_headers)
        except asyncio.CancelledError:
            if not started:
                await send_problem(
                    with_headers,
                    scope,
                    503,
                    "the service is stopping; send the request again",
                    "stopping",
                    {"Retry-After": "1", "Connection": "close"},
                )
            raise


class Admission:
    """Before a body is read: one Content-Type at most (the route reads the first, and a
    second that says otherwise must not skip the body's shape check), the gate's checks (the
    key, its scope and quotas: a request is refused before its body costs anything), and a
    declared length within the route's limit."""

    def __init__(self, app: ASGIApp, body_limit: Callable[[Scope], int], gate: Gate | None = None):
        self.app = app
        self.body_limit = body_limit
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if len(_content_types(scope)) > 1:
            detail = "more than one Content-Type header: send one"
            await send_problem(send, scope, 400, detail, "bad-request")
            return
        if self.gate is not None and (refusal := await self.gate(scope)) is not None:
            status, detail, slug, headers = refusal
            await send_problem(send, scope, status, detail, slug, headers)
            return
        try:
            length = int(dict(scope.get("headers") or []).get(b"content-length", b"0") or 0)
        except ValueError:
            length = 0
        limit = self.body_limit(scope)
        if length > limit:
            await _send_413(send, scope, limit)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """The body as it arrives, within the route's limit (chunked bodies counted too: past
    it, a 413 and the route's own answer dropped); a JSON body read whole and its shape
    checked (:func:`json_shape_problem`) before the route parses it, then handed on as it
    came."""

    def __init__(self, app: ASGIApp, body_limit: Callable[[Scope], int]):
        self.app = app
        self.body_limit = body_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.body_limit(scope)
        received = 0
        exceeded = started = False

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
        kinds = _content_types(scope)
        if scope.get("method") in BODY_METHODS and _is_json(kinds[0] if kinds else None):
            parts = []
            while True:
                try:
                    message = await receive_limited()
                except BodyTooLarge:
                    await _send_413(send, scope, limit)
                    return
                if message["type"] != "http.request":
                    break  # the client left
                parts.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            body = b"".join(parts)
            problem = json_shape_problem(body)
            if problem is not None:
                await send_problem(send, scope, 413, problem, "too-large")
                return
            problem = utf8_problem(body)
            if problem is not None:
                await send_problem(send, scope, 400, problem, "bad-request")
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
            # the app's answer to a body cut short (a form parser turns the cut into a 400)
            # is replaced by the 413 below
            nonlocal started
            if not exceeded:
                started = started or message["type"] == "http.response.start"
                await send(message)

        with contextlib.suppress(BodyTooLarge):
            await self.app(scope, downstream, app_send)
        if exceeded and not started:
            await _send_413(send, scope, limit)


def _route_template(scope: MutableMapping[str, Any]) -> str:
    """The matched route's path template (``/v1/jobs/{job_id}``), so metrics and logs carry
    no ids or other values from the URL."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    return template or ("unmatched" if scope.get("path") else "")


def install(
    app: Any, metrics: Metrics, body_limit: Callable[[Scope], int], gate: Gate | None
) -> None:
    """The pieces in their order, outermost first: access log, request context, admission,
    body limit (Starlette runs the last added first)."""
    app.add_middleware(BodyLimit, body_limit=body_limit)
    app.add_middleware(Admission, body_limit=body_limit, gate=gate)
    app.add_middleware(RequestContext)
    app.add_middleware(AccessLog, metrics=metrics)
