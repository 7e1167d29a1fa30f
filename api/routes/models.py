"""Models: list, manifest, calibration diagram, activate (hot swap in every replica), delete."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, status
from fastapi.responses import FileResponse

from mslm_core.bundle import predictor_options, readable_styles
from mslm_core.calibration import CALIBRATION_PNG
from mslm_core.errors import MSLMError
from store import datasets
from store import models as stored_models
from store.errors import NotFound
from store.serving import active_model_id
from store.tables import Model

from ..deps import AdminKey, AnnotateKey, IdPath, SessionDep, StateDep
from ..problems import V1_PROBLEMS, Problem, problem_responses
from ..schemas import ModelDetail, ModelList, ModelOut

router = APIRouter(prefix="/v1/models", tags=["models"], responses=V1_PROBLEMS)


def model_out(model: Model, manifest: dict[str, Any], active: str | None) -> ModelOut:
    """The model as listed: its row, whether it is the served one, and from its bundle's
    manifest the styles a request may read text as and the one it reads in by default."""
    return ModelOut.model_validate(model).model_copy(
        update={
            "active": model.id == active,
            "styles": readable_styles(manifest),
            "style": predictor_options(manifest)["style"],
        }
    )


@router.get("", response_model=ModelList)
def list_models(
    state: StateDep,
    session: SessionDep,
    key: AnnotateKey,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> ModelList:
    active = active_model_id(session)
    rows, count = stored_models.list_models(session, limit, offset)
    data = [model_out(m, stored_models.model_manifest(state.settings, m), active) for m in rows]
    return ModelList(data=data, count=count)


@router.get("/{model_id}", response_model=ModelDetail, responses=problem_responses(404))
def get_model(
    model_id: IdPath, state: StateDep, session: SessionDep, key: AnnotateKey
) -> ModelDetail:
    """The model and its bundle manifest (configuration, metrics, per-epoch history); to a
    key without the admin scope, without the server's paths (file names only) and the ids of
    datasets that are not its own."""
    model = stored_models.get_model(session, model_id)
    manifest = stored_models.model_manifest(state.settings, model)
    out = model_out(model, manifest, active_model_id(session)).model_dump()
    if key.owner is not None:
        mine = set(datasets.owned_ids(session, key.owner, _dataset_ids(manifest)))
        manifest = _shown(manifest, mine)
    return ModelDetail(**out, manifest=manifest)


def _dataset_ids(manifest: dict[str, Any]) -> list[str]:
    sources = (manifest.get("config") or {}).get("sources") or []
    return [str(s.get("name")) for s in sources if isinstance(s, dict) and s.get("name")]


def _shown(value: Any, mine: set[str], key: str | None = None) -> Any:
    """``value`` with every absolute path cut to its file name, and a source's dataset id
    that is not in ``mine`` replaced (a manifest shown to a key that is not an admin's)."""
    if isinstance(value, dict):
        return {k: _shown(v, mine, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v, mine, key) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        return value.rsplit("/", 1)[-1]
    if key == "name" and isinstance(value, str) and value.startswith("ds-") and value not in mine:
        return "(another key's dataset)"
    return value


@router.get(
    "/{model_id}/calibration.png",
    response_class=FileResponse,
    responses={
        200: {"content": {"image/png": {}}, "description": "reliability diagram"},
        **problem_responses(404),
    },
)
def calibration_diagram(
    model_id: IdPath, state: StateDep, session: SessionDep, key: AnnotateKey
) -> FileResponse:
    """The model's reliability diagram: share of entities exactly right against their
    confidence, before and after the temperature scaling fitted on dev (figures in the
    manifest's ``calibration``)."""
    model = stored_models.get_model(session, model_id)
    path = state.settings.artifacts / model.path / CALIBRATION_PNG
    if not path.is_file():
        raise NotFound(f"calibration diagram of model {model_id}")
    return FileResponse(path, media_type="image/png")


@router.post("/{model_id}/activate", response_model=ModelOut, responses=problem_responses(404, 409))
async def activate(
    model_id: IdPath,
    state: StateDep,
    key: AdminKey,
    force: Annotated[
        bool,
        Query(description="serve it even though it is below its job's floor (its `warnings`)"),
    ] = False,
) -> ModelOut:
    """Serve this model: it is loaded (every checksum verified) before the swap, so a bad
    bundle is refused and the current model keeps serving; other replicas follow. A model
    below its job's floor (it predicts nothing on dev, or scores under ``min_dev_f1``) is
    refused (409) unless ``force=true``."""

    def warnings() -> list[str]:
        with state.factory() as session:
            return list(stored_models.get_model(session, model_id).warnings or [])

    below = await asyncio.to_thread(warnings)
    if below and not force:
        raise Problem(
            409,
            f"model {model_id} is below its job's floor: {'; '.join(below)}; serve it anyway "
            "with force=true",
            slug="model-below-floor",
        )
    try:
        await state.models.activate(model_id)
    except (KeyError, NotFound):  # unknown, or deleted while it was being loaded
        await state.models.drop(model_id)
        raise NotFound(f"model {model_id}") from None
    except MSLMError as exc:
        raise Problem(
            409, f"model {model_id} cannot be served: {exc}", slug="model-unservable"
        ) from None
    with state.factory() as session:
        model = stored_models.find_model(session, model_id)
        assert model is not None
        return model_out(model, stored_models.model_manifest(state.settings, model), model_id)


@router.delete(
    "/{model_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409),
)
async def remove(model_id: IdPath, state: StateDep, key: AdminKey) -> None:
    """Delete a model that is not being served (this replica forgets it at once, the others
    at their next refresh)."""

    def delete() -> None:
        with state.factory() as session:
            stored_models.delete_model(state.settings, session, model_id)

    await asyncio.to_thread(delete)
    await state.models.drop(model_id)
