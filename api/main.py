"""The FastAPI application: ``create_app()`` builds it; models and keys are set up in the
lifespan, never at import.

    uvicorn --factory api.main:create_app        (or: mslm serve)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from mslm_core import __version__
from mslm_settings import Settings, get_settings
from store.db import session_factory
from store.errors import QuotaExceeded
from store.keys import ensure_admin_key
from store.migrate import schema_behind, upgrade
from store.paths import sweep_orphans
from store.quotas import check_upload_quota
from worker.celery_app import celery_for

from . import problems, web
from .auth import (
    BadKeyThrottle,
    KeyCache,
    announce_admin_key,
    configured_keys,
    sync_configured_keys,
)
from .background import counts, follow_active_model, reaper
from .deps import AppState, authenticate, key_of_header
from .metrics import Metrics
from .middleware import BODY_METHODS, ServiceMiddleware
from .problems import Problem
from .routes import (
    annotate,
    annotation_jobs,
    datasets,
    evaluations,
    health,
    jobs,
    labelstudio,
    models,
    vocabularies,
)
from .serving import ModelManager

log = logging.getLogger(__name__)


def _upload_quota(state: Any, key_id: str) -> None:
    with state.factory() as session:
        check_upload_quota(state.settings, session, key_id)


def prepare_store(settings: Settings) -> None:
    """Directories, schema (migrated, or checked when MSLM_AUTO_MIGRATE is off) and keys."""
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    url = settings.sqlalchemy_url
    if settings.auto_migrate:
        upgrade(url)
    elif why := schema_behind(url):
        raise RuntimeError(why)
    sweep_orphans(settings)
    with session_factory(url)() as session:
        sync_configured_keys(session, settings)
        secret = ensure_admin_key(session)
    if secret:
        announce_admin_key(secret)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    metrics: Metrics = app.state.metrics
    await asyncio.to_thread(prepare_store, settings)
    factory = session_factory(settings.sqlalchemy_url)
    state = AppState(
        settings=settings,
        factory=factory,
        celery=celery_for(settings),
        models=ModelManager(settings, factory, metrics),
        metrics=metrics,
        keys=KeyCache(factory),
        throttle=BadKeyThrottle(),
    )
    app.state.mslm = state
    metrics.watch_store(lambda: counts(state))
    await state.models.refresh()
    loops = [
        asyncio.create_task(follow_active_model(state), name="follow-active-model"),
        asyncio.create_task(reaper(state), name="reaper"),
    ]
    log.info("mslm %s API ready (store %s)", __version__, settings.sqlalchemy_url.split("@")[-1])
    try:
        yield
    finally:
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        await state.models.close()


ROUTERS = (
    health.router,
    annotate.router,
    datasets.router,
    jobs.router,
    models.router,
    vocabularies.router,
    evaluations.router,
    annotation_jobs.router,
    labelstudio.router,
)

#: Paths whose bodies are files (MSLM_MAX_UPLOAD_MB); others are JSON.
UPLOADS = ("/v1/datasets", "/v1/vocabularies", "/v1/annotation-jobs/inputs")
#: Paths whose JSON bodies carry texts (MSLM_MAX_TEXTS × MSLM_MAX_TEXT_CHARS); other JSON
#: bodies are small settings (a job, an evaluation).
TEXTS = ("/v1/annotate", "/labelstudio/predict", "/labelstudio/webhook")
SETTINGS_BODY_LIMIT = 4 << 20
#: Paths whose requests with a body need a key with the route's scope before it is read.
KEYED = ("/v1/", "/labelstudio/")
#: What MSLM_PROTECT_METADATA puts behind a key.
METADATA = ("/metrics", "/docs", "/openapi.json")


def _body_limit(settings: Settings) -> int:
    # JSON worst case: every character escaped as a surrogate pair (12 bytes)
    return settings.max_texts * settings.max_text_chars * 12 + (1 << 20)


def body_limits(settings: Settings) -> Any:
    """The bytes a route's body may have: uploads, bodies of texts, and settings."""
    upload, texts = int(settings.max_upload_mb * (1 << 20)), _body_limit(settings)

    def limit(path: str) -> int:
        if path.startswith(UPLOADS):
            return upload
        return texts if path.startswith(TEXTS) else SETTINGS_BODY_LIMIT

    return limit


def _bearer_or_basic(scope: Any) -> str | None:
    """The key a request carries (``deps.key_of_header``)."""
    headers = dict(scope.get("headers") or [])
    token = str(scope.get("path", "")).startswith("/labelstudio/")
    return key_of_header(headers.get(b"authorization", b"").decode("latin-1"), token)


def _route_scopes(routers: list[Any]) -> Any:
    """``scope → the key scope its route wants`` (None: none or no route), read off the
    routes' ``require(...)`` dependencies once."""
    from fastapi.routing import APIRoute
    from starlette.routing import Match

    table: list[tuple[APIRoute, str]] = []

    def wanted(dependant: Any) -> str | None:
        for dep in dependant.dependencies:
            found = getattr(dep.call, "required_scope", None) or wanted(dep)
            if found:
                return str(found)
        return None

    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute) and (need := wanted(route.dependant)):
                table.append((route, need))

    def scope_of(scope: Any) -> str | None:
        for route, need in table:
            if route.matches(scope)[0] == Match.FULL:
                return need
        return None

    return scope_of


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    configured_keys(settings)  # a bad MSLM_API_KEYS entry stops the API before it serves
    app = FastAPI(
        title="mslm",
        version=__version__,
        summary="Self-hosted biomedical entity extraction with MSLM fine-tuning",
        lifespan=lifespan,
        docs_url=None,  # served by web.install from local assets
        redoc_url=None,
        # no 307 to the path with(out) its slash: its Location was built from the Host header
        redirect_slashes=False,
    )
    metrics = Metrics()
    app.state.settings = settings
    app.state.metrics = metrics
    problems.install(app)
    problems.install_openapi(app, list(settings.base_model_map()))
    for router in ROUTERS:
        app.include_router(router)
    web.install(app)
    scope_of = _route_scopes(list(ROUTERS))

    def refusal(exc: Problem) -> tuple[int, str, str, dict[str, str]]:
        return exc.status, exc.detail, exc.slug or "unauthorized", dict(exc.headers or {})

    async def gate(scope: Any) -> tuple[int, str, str, dict[str, str]] | None:
        """Before a request's body is read: a request with a body to /v1 needs a valid key
        with its route's scope, and an upload needs the key's upload quota; with
        MSLM_PROTECT_METADATA, /metrics and the API document need a valid key."""
        path, method = scope.get("path", ""), scope.get("method", "")
        client = scope["client"][0] if scope.get("client") else "-"
        state = app.state.mslm
        if settings.protect_metadata and path.startswith(METADATA):
            try:
                await authenticate(state, client, _bearer_or_basic(scope))
            except Problem as exc:
                status, detail, slug, _ = refusal(exc)
                return status, detail, slug, {"WWW-Authenticate": 'Bearer, Basic realm="mslm"'}
            return None
        if method not in BODY_METHODS or not path.startswith(KEYED):
            return None
        try:
            principal = await authenticate(state, client, _bearer_or_basic(scope))
        except Problem as exc:
            return refusal(exc)
        scope.setdefault("state", {})["principal"] = principal  # the route's check reuses it
        scope["state"]["key_id"] = principal.key_id  # the access log names who was refused
        need = scope_of(scope)
        if need is not None and not principal.allows(need):
            state.metrics.auth_failures.labels("scope").inc()
            return 403, f"this API key lacks the {need!r} scope", "forbidden", {}
        if method == "POST" and path in UPLOADS:
            try:
                await asyncio.to_thread(_upload_quota, state, principal.key_id)
            except QuotaExceeded as exc:
                return 429, str(exc.args[0]), "quota", {"Retry-After": str(exc.retry_after)}
        return None

    app.add_middleware(
        ServiceMiddleware, metrics=metrics, body_limit=body_limits(settings), gate=gate
    )
    return app
