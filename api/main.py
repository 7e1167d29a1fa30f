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
from store.migrate import current_revision, head_revision, upgrade
from store.paths import sweep_orphans
from worker.celery_app import celery_for

from . import problems, web
from .auth import (
    BadKeyThrottle,
    KeyCache,
    announce_admin_key,
    configured_keys,
    ensure_admin_key,
    sync_configured_keys,
)
from .background import counts, follow_active_model, reaper
from .deps import AppState, authenticate
from .metrics import Metrics
from .middleware import ServiceMiddleware
from .problems import Problem
from .routes import annotate, datasets, evaluations, health, jobs, models, vocabularies
from .serving import ModelManager

log = logging.getLogger(__name__)


def prepare_store(settings: Settings) -> None:
    """Directories, schema (migrated, or checked when MSLM_AUTO_MIGRATE is off) and keys."""
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    url = settings.sqlalchemy_url
    if settings.auto_migrate:
        upgrade(url)
    else:
        have, want = current_revision(url), head_revision()
        if have != want:
            raise RuntimeError(
                f"the database schema is at {have}, this version needs {want}: run mslm migrate"
            )
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


#: Paths whose bodies are files (MSLM_MAX_UPLOAD_MB); others are JSON.
UPLOADS = ("/v1/datasets", "/v1/vocabularies")


def _body_limit(settings: Settings) -> int:
    # JSON worst case: every character escaped as a surrogate pair (12 bytes)
    return settings.max_texts * settings.max_text_chars * 12 + (1 << 20)


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
    )
    metrics = Metrics()
    app.state.settings = settings
    app.state.metrics = metrics
    problems.install(app)
    problems.install_openapi(app, list(settings.base_model_map()))
    for router in (
        health.router,
        annotate.router,
        datasets.router,
        jobs.router,
        models.router,
        vocabularies.router,
        evaluations.router,
    ):
        app.include_router(router)
    web.install(app)
    upload_limit = int(settings.max_upload_mb * (1 << 20))
    json_limit = _body_limit(settings)

    async def key_check(scope: Any) -> tuple[int, str, str, dict[str, str]] | None:
        """The key of a request with a body, checked before the body is read."""
        headers = dict(scope.get("headers") or [])
        scheme, _, secret = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        client = scope["client"][0] if scope.get("client") else "-"
        given = secret.strip() if scheme.lower() == "bearer" else None
        try:
            principal = await authenticate(app.state.mslm, client, given)
        except Problem as refusal:
            return (
                refusal.status,
                refusal.detail,
                refusal.slug or "unauthorized",
                dict(refusal.headers or {}),
            )
        scope.setdefault("state", {})["principal"] = principal  # the route's check reuses it
        return None

    app.add_middleware(
        ServiceMiddleware,
        metrics=metrics,
        body_limit=lambda path: upload_limit if path.startswith(UPLOADS) else json_limit,
        key_check=key_check,
    )
    return app
