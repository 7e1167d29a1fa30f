"""The model registry: the bundles the service can serve — one a job trained or one imported
(``mslm import-model``) — recorded from their manifests, listed, looked up, made the served
one, and deleted when not served. (``store.tables.Model`` is the row; the bundle's files live
under ``paths.model_dir``.)"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mslm_core.bundle import MANIFEST, verify_bundle
from mslm_settings import Settings

from .access import page
from .errors import Conflict, NotFound
from .paths import model_dir
from .serving import lock_state
from .tables import QUEUED, RUNNING, AnnotationJob, Model, ServingState, utcnow


def model_row_from_manifest(
    settings: Settings,
    manifest: dict[str, Any],
    path: Path,
    job_id: str | None = None,
    base_model: str | None = None,
    created_by: str | None = None,
) -> Model:
    """The store's row for the bundle at ``path`` (inside the artifact store), from its
    manifest: one definition for a job's model and an imported one. ``base_model``: the
    name the job asked for (MSLM_BASE_MODELS), else the manifest's encoder."""
    return Model(
        id=manifest["id"],
        job_id=job_id,
        created_by=created_by,
        path=str(path.relative_to(settings.artifacts)),
        base_model=base_model or str(manifest.get("base_model", "")),
        strategy=str(manifest.get("strategy", "")),
        types=manifest["types"],
        metrics=manifest.get("metrics", {}),
        precisions=sorted((manifest.get("onnx") or {}).get("precisions", {})),
    )


def import_bundle(settings: Settings, session: Session, source: Path) -> Model:
    """Copy a bundle (``mslm train`` output, exported or not) into the model store and
    record it; every checksum is verified first. A bundle already imported is a Conflict."""
    manifest = verify_bundle(source)
    model_id = manifest["id"]
    if session.get(Model, model_id) is not None:
        raise Conflict(f"model {model_id} is already in the store")
    target = model_dir(settings, model_id)
    staging = target.with_name(f".staging-{uuid.uuid4().hex}")
    shutil.copytree(source, staging)
    try:
        verify_bundle(staging)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    model = model_row_from_manifest(settings, manifest, target)
    session.add(model)
    session.commit()
    return model


def find_model(session: Session, model_id: str) -> Model | None:
    return session.get(Model, model_id)


def model_manifest(settings: Settings, model: Model) -> dict[str, Any]:
    """The manifest of a stored model's bundle; ``{}`` when it cannot be read."""
    try:
        manifest = json.loads((settings.artifacts / model.path / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def add_model(session: Session, row: Model) -> None:
    """A trained model's row, in the session's transaction (the caller commits it with the
    job's success: ``transitions.finish``)."""
    session.add(row)


def get_model(session: Session, model_id: str) -> Model:
    """The model (every key sees every model), or NotFound."""
    model = session.get(Model, model_id)
    if model is None:
        raise NotFound(f"model {model_id}")
    return model


def list_models(session: Session, limit: int, offset: int) -> tuple[list[Model], int]:
    """One page of the models, newest first, and their count."""
    return page(session, Model, limit, offset)


def existing_models(session: Session, model_ids: list[str]) -> set[str]:
    """Those of ``model_ids`` the store still has."""
    return set(session.scalars(select(Model.id).where(Model.id.in_(model_ids))))


def any_model(session: Session) -> bool:
    """Whether the store holds a model at all."""
    return bool(session.scalar(select(Model.id).limit(1)))


def _lock_serving(session: Session, model_id: str | None) -> tuple[ServingState, Model | None]:
    """Lock the serving state's row, then the model's (always in this order, so activating
    and deleting the same model run one after the other and never deadlock)."""
    state = lock_state(session)
    model = session.get(Model, model_id, with_for_update=True) if model_id else None
    return state, model


def set_active_model(session: Session, model_id: str | None) -> None:
    """Make ``model_id`` the served model (None: none). A model deleted meanwhile is
    NotFound: the store never points at a model that is gone."""
    state, model = _lock_serving(session, model_id)
    if model_id is not None and model is None:
        session.rollback()
        raise NotFound(f"model {model_id}")
    state.active_model_id, state.updated_at = model_id, utcnow()
    session.commit()


def delete_model(settings: Settings, session: Session, model_id: str) -> None:
    """Delete a model that is not being served (checked under the lock that activation
    takes: a concurrent activation either went first — Conflict — or finds it gone)."""
    state, model = _lock_serving(session, model_id)
    if model is None:
        raise NotFound(f"model {model_id}")
    if state.active_model_id == model_id:
        raise Conflict(f"model {model_id} is being served; activate another one first")
    waiting = session.scalar(
        select(AnnotationJob.id).where(
            AnnotationJob.model_id == model_id, AnnotationJob.state.in_((QUEUED, RUNNING))
        )
    )
    if waiting is not None:
        raise Conflict(
            f"model {model_id} is the model of annotation job {waiting}, queued or running; "
            "cancel it or let it end first"
        )
    session.delete(model)
    session.commit()
    shutil.rmtree(settings.artifacts / model.path, ignore_errors=True)
