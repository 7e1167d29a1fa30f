"""Evaluations: score a model on a dataset split, on the worker (queue ``eval``)."""

from __future__ import annotations

from fastapi import APIRouter, status
from fastapi.responses import FileResponse

from mslm_core.calibration import CALIBRATION_PNG
from store import evaluations as store_evaluations
from store.errors import NotFound
from store.paths import evaluation_dir
from store.quotas import check_work_quota
from store.tables import Evaluation
from worker.celery_app import CeleryQueue

from ..deps import IdPath, SessionDep, StateDep, TrainKey
from ..problems import V1_PROBLEMS, problem_responses
from ..schemas import EvaluationCreate, EvaluationOut

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"], responses=V1_PROBLEMS)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=EvaluationOut,
    responses=problem_responses(404),
)
def submit(
    body: EvaluationCreate, state: StateDep, session: SessionDep, key: TrainKey
) -> EvaluationOut:
    """Queue an evaluation: strict P/R/F1 (micro and per type), exact match, token macro-F1 —
    honest, on unmasked text, with the engine that serves the model — and the expected
    calibration error of its confidences before and after the model's temperature scaling."""
    check_work_quota(state.settings, session, key.key_id, Evaluation)
    ev = store_evaluations.create_evaluation(
        session,
        CeleryQueue(state.celery),
        body.model_id,
        body.dataset_id,
        body.split,
        key.key_id,
        key.owner,
        type_map=body.type_map,
    )
    return EvaluationOut.model_validate(ev)


@router.get("/{evaluation_id}", response_model=EvaluationOut, responses=problem_responses(404))
def get_evaluation(evaluation_id: IdPath, session: SessionDep, key: TrainKey) -> EvaluationOut:
    return EvaluationOut.model_validate(
        store_evaluations.get_evaluation(session, evaluation_id, key.owner)
    )


@router.get(
    "/{evaluation_id}/calibration.png",
    response_class=FileResponse,
    responses={
        200: {"content": {"image/png": {}}, "description": "reliability diagram"},
        **problem_responses(404),
    },
)
def calibration_diagram(
    evaluation_id: IdPath, state: StateDep, session: SessionDep, key: TrainKey
) -> FileResponse:
    """The evaluation's reliability diagram (figures in its ``metrics.calibration``)."""
    ev = store_evaluations.get_evaluation(session, evaluation_id, key.owner)
    path = evaluation_dir(state.settings, evaluation_id) / CALIBRATION_PNG
    if not path.is_file():
        raise NotFound(f"calibration diagram of evaluation {evaluation_id} (state {ev.state})")
    return FileResponse(path, media_type="image/png")
