"""Evaluations: score a model on a dataset split, on the worker (queue ``eval``)."""

from __future__ import annotations

from fastapi import APIRouter, status

from worker.models import Evaluation
from worker.service import NotFound, create_evaluation

from ..deps import SessionDep, StateDep, TrainKey
from ..schemas import EvaluationCreate, EvaluationOut

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=EvaluationOut)
def submit(
    body: EvaluationCreate, state: StateDep, session: SessionDep, key: TrainKey
) -> EvaluationOut:
    """Queue an evaluation: strict P/R/F1 (micro and per type), exact match, token macro-F1 —
    honest, on unmasked text, with the engine that serves the model."""
    ev = create_evaluation(
        session, state.celery, body.model_id, body.dataset_id, body.split, key.key_id
    )
    return EvaluationOut.model_validate(ev)


@router.get("/{evaluation_id}", response_model=EvaluationOut)
def get_evaluation(evaluation_id: str, session: SessionDep, key: TrainKey) -> EvaluationOut:
    ev = session.get(Evaluation, evaluation_id)
    if ev is None:
        raise NotFound(f"evaluation {evaluation_id}")
    return EvaluationOut.model_validate(ev)
