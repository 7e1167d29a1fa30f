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

from . import middleware, problems, web
from .admission import RoutePolicies
from .auth import (
    BadKeyThrottle,
    KeyCache,
    announce_admin_key,
    configured_keys,
    sync_configured_keys,
)
from .background import counts, follow_active_model
from .deps import AppState, authenticate, key_of_header
from .metrics import Metrics
from .middleware import BODY_METHODS
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

#: What MSLM_PROTECT_METADATA puts behind a key (the app's own routes, not the routers').
METADATA = ("/metrics", "/docs", "/openapi.json")


def _bearer_or_basic(scope: Any) -> str | None:
    """The key a request carries (``deps.key_of_header``)."""
    headers = dict(scope.get("headers") or [])
    token = str(scope.get("path", "")).startswith("/labelstudio/")
    return key_of_header(headers.get(b"authorization", b"").decode("latin-1"), token)


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
    policies = RoutePolicies(ROUTERS, settings)

    def refusal(exc: Problem) -> tuple[int, str, str, dict[str, str]]:
        return exc.status, exc.detail, exc.slug or "unauthorized", dict(exc.headers or {})

    async def gate(scope: Any) -> tuple[int, str, str, dict[str, str]] | None:
        """Before a request's body is read: a request with a body needs a valid key, with
        the scope its route wants (a route that wants none is open), and an upload needs the
        key's upload quota; with MSLM_PROTECT_METADATA, /metrics and the API document need a
        valid key."""
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
        if method not in BODY_METHODS:
            return None
        policy = policies(scope)
        if policy is not None and policy.scope is None:
            return None
        try:
            principal = await authenticate(state, client, _bearer_or_basic(scope))
        except Problem as exc:
            return refusal(exc)
        scope.setdefault("state", {})["principal"] = principal  # the route's check reuses it
        scope["state"]["key_id"] = principal.key_id  # the access log names who was refused
        if policy is None or policy.scope is None:
            return None  # a valid key, and no route: the router's 404 or 405
        if not principal.allows(policy.scope):
            state.metrics.auth_failures.labels("scope").inc()
            return 403, f"this API key lacks the {policy.scope!r} scope", "forbidden", {}
        if policy.upload_quota:
            try:
                await asyncio.to_thread(_upload_quota, state, principal.key_id)
            except QuotaExceeded as exc:
                return 429, str(exc.args[0]), "quota", {"Retry-After": str(exc.retry_after)}
        return None

    middleware.install(app, metrics, policies.body_limit, gate)
    return app
