"""The Label Studio ML backend protocol (docs/labelstudio.md), under ``/labelstudio``: Label
Studio connects to ``http://HOST:8000/labelstudio`` with basic auth (any user, an API key with
the ``annotate`` and ``train`` scopes as the password; ``Bearer``/``Token`` work too).

- ``GET /health``, ``POST /setup`` (the project's labelling config read; options from the
  connection's extra params), ``GET /versions``;
- ``POST /predict``: the served model's entities as pre-annotations in the project's names
  and labels, each region with its score and clinical context as meta; each prediction's
  ``score`` puts the tasks in our active-learning order for Label Studio's uncertainty
  sampling (``mslm_core.labelstudio_ml.order_scores``);
- ``POST /webhook``: annotations created, updated or deleted change the project's dataset;
  every ``train_every`` new annotations, or ``START_TRAINING``, start a fine-tuning job whose
  model is served when it succeeds; ``POST /train`` does that on demand.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, status
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from mslm_core.active import rank
from mslm_core.corpus.labelstudio import predictions_to_labelstudio
from mslm_core.labelstudio_ml import (
    LabelConfig,
    annotation_entities,
    order_scores,
    parse_label_config,
    type_map,
)
from mslm_core.text import character_problem
from mslm_core.types import Entity
from store import labelstudio as store_ls
from store.documents import Document
from store.errors import NotFound
from store.tables import Job
from worker.celery_app import CeleryQueue

from ..admission import body
from ..auth import Principal
from ..deps import AppState, Credentials, SessionDep, StateDep, authenticate, key_of_header
from ..problems import Problem, problem_responses, refuse_bad_characters, refuse_long_texts
from ..schemas import NO_CONTROL

log = logging.getLogger(__name__)
router = APIRouter(
    prefix="/labelstudio",
    tags=["labelstudio"],
    responses=problem_responses(401, 403, 404, 422, 500),
)
basic = HTTPBasic(
    auto_error=False, description="Label Studio's basic auth: any user, the API key as password"
)
SCOPES = ("annotate", "train")


async def _labelstudio_key(
    request: Request,
    state: StateDep,
    _basic: Annotated[HTTPBasicCredentials | None, Depends(basic)],
    _bearer: Credentials,
) -> Principal:
    """A key with the ``annotate`` and ``train`` scopes, sent the way Label Studio sends it
    (basic auth) or as ``Bearer``/``Token``."""
    principal = getattr(request.state, "principal", None)  # checked before the body (main)
    if principal is None:
        client = request.client.host if request.client else "-"
        principal = await authenticate(
            state, client, key_of_header(request.headers.get("authorization", ""), token=True)
        )
    for scope in SCOPES:
        if not principal.allows(scope):
            state.metrics.auth_failures.labels("scope").inc()
            raise Problem(403, f"this API key lacks the {scope!r} scope", slug="forbidden")
    request.state.key_id = principal.key_id
    return principal


_labelstudio_key.required_scope = "train"  # type: ignore[attr-defined]
LabelStudioKey = Annotated[Principal, Depends(_labelstudio_key)]


class _Loose(BaseModel):
    """Label Studio's bodies: the fields read here, whatever else comes along ignored."""

    model_config = ConfigDict(extra="ignore")


class SetupRequest(_Loose):
    project: str = Field(max_length=100, pattern=NO_CONTROL, description="PROJECT_ID.CREATED_AT")
    schema_: str = Field(alias="schema", description="the labelling config (XML)")
    extra_params: dict[str, Any] | str | None = None


class Task(_Loose):
    id: int | str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class PredictRequest(_Loose):
    tasks: list[Task] = Field(max_length=10_000)
    project: str | None = Field(default=None, max_length=100, pattern=NO_CONTROL)
    label_config: str | None = None


class TrainRequest(_Loose):
    project: str = Field(
        min_length=1, max_length=100, pattern=NO_CONTROL, description="Label Studio's project id"
    )


#: The longest task or annotation id kept (a longer one is refused, never stored).
MAX_ID_CHARS = 200


def _project_id(uid: str) -> str:
    """``"3.1764000000"`` (id.created_at, what /setup and /predict send) → ``"3"``."""
    return uid.split(".", 1)[0]


@router.get("/health")
async def health(state: StateDep, key: LabelStudioKey) -> dict[str, Any]:
    active = state.models.active_id
    return {"status": "UP", "model_class": "mslm", "model_version": active}


@router.post("/setup")
def setup(
    body: SetupRequest, state: StateDep, session: SessionDep, key: LabelStudioKey
) -> dict[str, Any]:
    """Connect a project: its first ``<Labels>`` on a ``<Text>`` is what predictions fill
    and annotations teach; ``extra_params`` (``{"train_every", "serve", "params"}``) sets
    when it trains and with what."""
    config = parse_label_config(body.schema_)
    admin = "admin" in key.scopes  # only an admin key's projects serve what they train
    options = store_ls.Options.parse(state.settings, body.extra_params or None, admin)
    store_ls.connect(session, _project_id(body.project), key.key_id, config, options)
    return {"model_version": state.models.active_id or "none"}


@router.get("/versions")
async def versions(state: StateDep, key: LabelStudioKey) -> dict[str, Any]:
    return {"versions": [state.models.active_id] if state.models.active_id else []}


def _config_for(
    state: AppState, key_id: str, body: PredictRequest
) -> tuple[LabelConfig, store_ls.Options]:
    """The project's labelling config and its options (a project never connected but whose
    config comes with the request: the default options)."""
    if body.project:
        with state.factory() as session:
            try:
                row = store_ls.get_project(session, _project_id(body.project), key_id)
                return store_ls.config_of(row), store_ls.options_of(row)
            except NotFound:
                pass
    if not body.label_config:
        project = _project_id(body.project) if body.project else "(none given)"
        raise NotFound(f"Label Studio project {project} (connect it, or send its label_config)")
    return parse_label_config(body.label_config), store_ls.Options()


@router.post("/predict", responses=problem_responses(413, 422, 503), openapi_extra=body("texts"))
async def predict(body: PredictRequest, state: StateDep, key: LabelStudioKey) -> dict[str, Any]:
    """Pre-annotations of ``tasks`` by the served model, in the order Label Studio sent them:
    ``{"results": [{"model_version", "score", "result": [regions]}]}``."""
    config, options = await asyncio.to_thread(_config_for, state, key.key_id, body)
    values = [t.data.get(config.text_key) for t in body.tasks]
    texts = [v if isinstance(v, str) else "" for v in values]
    field = f"body.tasks.{{i}}.data.{config.text_key}"
    refuse_long_texts(texts, state.settings.max_text_chars, "task", field)
    refuse_bad_characters(texts, "task", field)
    loaded, found, uncertainty = await state.models.annotate_with_uncertainties(
        None, texts, options.strategy
    )
    mapping = type_map(loaded.pipeline.info.types, config.labels)
    kept = [[e for e in ents if e.type in mapping] for ents in found]
    state.metrics.count_annotated(loaded.id, texts, kept)
    entities: list[list[Entity]] = [
        [dataclasses.replace(e, type=mapping[e.type]) for e in ents] for ents in kept
    ]

    def render() -> tuple[list[float], list[dict[str, Any]]]:
        """Off the event loop: thousands of tasks take seconds to rank and render."""
        ranking = rank(texts, uncertainty, diversity=options.diversity)
        scores = order_scores(ranking, len(texts), options.diversity)
        tasks = predictions_to_labelstudio(
            texts, entities, loaded.id, config.text_key, config.from_name, config.to_name
        )
        return scores, tasks

    scores, tasks = await asyncio.to_thread(render)
    results = []
    for task, score in zip(tasks, scores, strict=True):
        prediction = task["predictions"][0]
        prediction["score"] = score
        results.append(prediction)
    return {"results": results}


def _annotations(config: LabelConfig, body: dict[str, Any]) -> list[store_ls.Annotation]:
    """The annotations of an ANNOTATION(S)_CREATED/UPDATED event, with their tasks' text."""
    given, tasks = body.get("annotation"), body.get("task")
    pairs = (
        list(zip(given, tasks, strict=False))
        if isinstance(given, list) and isinstance(tasks, list)
        else [(given, tasks)]
    )
    out = []
    for annotation, task in pairs:
        if not isinstance(annotation, dict) or not isinstance(task, dict):
            raise Problem(
                422, "an annotation event without its annotation and task", slug="validation"
            )
        data = task.get("data") if isinstance(task.get("data"), dict) else {}
        text = data.get(config.text_key) if data else None
        if not isinstance(text, str) or task.get("id") is None or annotation.get("id") is None:
            raise Problem(
                422, f"a task without id or data.{config.text_key} as a string", slug="validation"
            )
        result = annotation.get("result")
        labelled = (
            annotation_entities(text, result, config)
            if isinstance(result, list) and not annotation.get("was_cancelled")
            else None
        )
        task_id, annotation_id = str(task["id"]), str(annotation["id"])
        for name, value in (("task.id", task_id), ("annotation.id", annotation_id)):
            problem = character_problem(value) or (
                f"longer than {MAX_ID_CHARS} characters" if len(value) > MAX_ID_CHARS else None
            )
            if problem:
                raise Problem(
                    422,
                    f"{name}: {problem}",
                    slug="validation",
                    errors=[{"field": f"body.{name}", "message": problem}],
                )
        refuse_bad_characters([text], "task", f"body.task.data.{config.text_key}")
        document = Document(store_ls.document_id(task_id), text, labelled)
        out.append(store_ls.Annotation(annotation_id, task_id, document))
    return out


def _start(state: AppState, session: Session, row: Any) -> Job:
    job = store_ls.start_training(state.settings, session, CeleryQueue(state.celery), row)
    log.info("Label Studio project %s: job %s started", row.project, job.id)
    return job


@router.post("/webhook", responses=problem_responses(409, 413, 429), openapi_extra=body("texts"))
def webhook(
    body: dict[str, Any], state: StateDep, session: SessionDep, key: LabelStudioKey
) -> dict[str, Any]:
    """Label Studio's events: annotations created, updated, deleted (the project's dataset
    follows) and START_TRAINING; any other event is acknowledged and ignored."""
    action = body.get("action")
    project = body.get("project")
    if action not in EVENTS:
        return {"status": "ignored", "action": str(action)[:100]}
    if not isinstance(project, dict) or project.get("id") is None:
        raise Problem(422, "an event without its project", slug="validation")
    if not re.fullmatch(NO_CONTROL, str(project["id"])) or len(str(project["id"])) > 100:
        raise Problem(422, "project.id: at most 100 characters, none a control", slug="validation")
    row = store_ls.get_project(session, str(project["id"]), key.key_id, lock=True)
    job: Job | None = None
    if action == "START_TRAINING":
        job = _start(state, session, row)
    elif action == "ANNOTATIONS_DELETED":
        ids = body.get("annotations")
        gone = [str(a["id"]) for a in ids or [] if isinstance(a, dict) and "id" in a]
        store_ls.forget_annotations(state.settings, session, row, gone)
    else:
        given = _annotations(store_ls.config_of(row), body)
        new = action in ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED")
        if store_ls.record_annotations(state.settings, session, row, given, new):
            job = _start(state, session, row)
    out: dict[str, Any] = {"status": "ok", "dataset_id": row.dataset_id}
    if job is not None:
        out["job"] = job.id
    return out


EVENTS = (
    "ANNOTATION_CREATED",
    "ANNOTATIONS_CREATED",
    "ANNOTATION_UPDATED",
    "ANNOTATIONS_DELETED",
    "START_TRAINING",
)


@router.post("/train", status_code=status.HTTP_202_ACCEPTED, responses=problem_responses(409, 429))
def train(
    body: TrainRequest, state: StateDep, session: SessionDep, key: LabelStudioKey
) -> dict[str, Any]:
    """A fine-tuning job on the project's dataset now (``{"project": "3"}``)."""
    row = store_ls.get_project(session, body.project, key.key_id, lock=True)
    job = _start(state, session, row)
    return {"job": job.id, "dataset_id": row.dataset_id}
