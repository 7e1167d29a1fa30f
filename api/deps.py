"""Dependencies as ``Annotated`` aliases: the app's state, a database session, and API keys
with a scope."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from celery import Celery
from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from mslm_settings import Settings

from .auth import BadKeyThrottle, KeyCache, Principal
from .metrics import Metrics
from .problems import Problem
from .schemas import NO_CONTROL
from .serving import ModelManager

# an id in a path: what the bodies' ids allow (schemas.Identifier), else 422 before any query
IdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=NO_CONTROL)]


@dataclass
class AppState:
    settings: Settings
    factory: sessionmaker[Session]
    celery: Celery
    models: ModelManager
    metrics: Metrics
    keys: KeyCache
    throttle: BadKeyThrottle


def app_state(request: Request) -> AppState:
    """The app's state, read directly: what a hot route takes instead of :data:`StateDep`
    (each dependency FastAPI solves costs a request about 20 µs)."""
    state: AppState = request.app.state.mslm
    return state


async def get_state(request: Request) -> AppState:
    """Async on purpose: a sync dependency would cost every request a thread hop."""
    return app_state(request)


StateDep = Annotated[AppState, Depends(get_state)]


def get_session(state: StateDep) -> Iterator[Session]:
    with state.factory() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]

bearer = HTTPBearer(auto_error=False, description="an API key: Authorization: Bearer <key>")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


# longer than any key we issue (48 hex characters) by far; longer is refused unlooked-up
MAX_KEY_CHARS = 512


async def authenticate(state: AppState, client: str, secret: str | None) -> Principal:
    """The key's principal, or a 401 Problem. Only wrong keys wait (the bad-key throttle):
    a client's valid requests are never slowed by its typos or by someone else's guesses
    from the same address."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if not secret:
        state.metrics.auth_failures.labels("missing").inc()
        raise Problem(
            401,
            "an API key is required: Authorization: Bearer <key>",
            slug="unauthorized",
            headers=challenge,
        )
    principal = await state.keys.lookup(secret) if len(secret) <= MAX_KEY_CHARS else None
    if principal is None:
        delay = state.throttle.delay(client)
        if delay:
            await asyncio.sleep(delay)
        state.throttle.failed(client)
        state.metrics.auth_failures.labels("invalid").inc()
        raise Problem(401, "the API key is not valid", slug="unauthorized", headers=challenge)
    return principal


def key_of_header(authorization: str, token: bool = False) -> str | None:
    """The key an ``Authorization`` header carries: ``Bearer KEY``, or ``Basic`` with the key
    as its password (a browser on /docs, Label Studio's ML backend connection); with
    ``token``, ``Token KEY`` too (Label Studio's own scheme, on /labelstudio)."""
    import base64
    import binascii

    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" or (token and scheme.lower() == "token"):
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


def require(scope: str) -> Callable[..., Coroutine[Any, Any, Principal]]:
    """A dependency that wants a key with ``scope``. The middleware reads ``required_scope``
    off a route's dependencies so that a request with a body is refused before it is read."""

    async def check(request: Request, creds: Credentials) -> Principal:
        # a request with a body was authenticated before its body was read (api.main)
        state = app_state(request)
        principal = getattr(request.state, "principal", None)
        if principal is None:
            client = request.client.host if request.client else "-"
            principal = await authenticate(state, client, creds.credentials if creds else None)
        if not principal.allows(scope):
            state.metrics.auth_failures.labels("scope").inc()
            raise Problem(403, f"this API key lacks the {scope!r} scope", slug="forbidden")
        request.state.key_id = principal.key_id
        return principal

    check.required_scope = scope  # type: ignore[attr-defined]
    return check


AnnotateKey = Annotated[Principal, Depends(require("annotate"))]
TrainKey = Annotated[Principal, Depends(require("train"))]
AdminKey = Annotated[Principal, Depends(require("admin"))]
