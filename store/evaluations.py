"""Evaluations: a model scored on a dataset's split by the worker (queue ``eval``), created
and announced here, looked up for the keys that own them. Their state changes are
``store.transitions``."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mslm_core.errors import ConfigError

from .access import get_owned
from .datasets import checked_type_map
from .errors import NotFound
from .queue import TaskQueue
from .tables import Dataset, Evaluation, Model, new_id, utcnow


def create_evaluation(
    session: Session,
    queue: TaskQueue,
    model_id: str,
    dataset_id: str,
    split: str,
    created_by: str | None = None,
    owner: str | None = None,
    type_map: dict[str, Any] | None = None,
) -> Evaluation:
    """A queued evaluation of a model (every key sees every model) on a dataset ``owner``
    sees (``store.access.owned``); ``type_map``: the dataset's types mapped onto the
    model's."""
    if session.get(Model, model_id) is None:
        raise NotFound(f"model {model_id}")
    dataset = get_owned(session, Dataset, dataset_id, owner, "dataset")
    if split not in dataset.files:
        raise ConfigError(
            f"split: dataset {dataset_id} has no {split!r} split (has {', '.join(dataset.files)})"
        )
    checked = checked_type_map(type_map or {}, dataset, "type_map")
    ev = Evaluation(
        id=new_id("ev"),
        model_id=model_id,
        dataset_id=dataset_id,
        split=split,
        type_map=checked,
        created_by=created_by,
        published_at=utcnow(),
    )
    session.add(ev)
    session.commit()
    queue.evaluate(ev.id)
    return ev


def claimed_evaluation(
    session: Session, evaluation_id: str
) -> tuple[Evaluation, Model | None, Dataset | None]:
    """The evaluation a worker has just claimed, its model and its dataset (None: deleted
    since)."""
    ev = session.get(Evaluation, evaluation_id)
    if ev is None:
        raise NotFound(f"evaluation {evaluation_id}")
    dataset = None if ev.dataset_id is None else session.get(Dataset, ev.dataset_id)
    return ev, session.get(Model, ev.model_id), dataset


def get_evaluation(session: Session, evaluation_id: str, owner: str | None) -> Evaluation:
    """The evaluation, or NotFound (also when it is another key's: see ``store.access``)."""
    return get_owned(session, Evaluation, evaluation_id, owner, "evaluation")
