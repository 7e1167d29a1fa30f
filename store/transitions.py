"""What a training job or an evaluation does beyond its lease (``store.leases``): a key's quota
of running jobs, a job's cancel, and the served model a job's success may set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from . import leases
from .db import rowcount
from .leases import EVALUATION, TRAINING
from .tables import (
    CANCELLED,
    QUEUED,
    RUNNING,
    AnnotationJob,
    Evaluation,
    Job,
    Model,
    ServingState,
    utcnow,
)

TaskRow = type[Job] | type[Evaluation]
LEASES: dict[TaskRow, leases.Lease] = {Job: TRAINING, Evaluation: EVALUATION}


def release(session: Session, cls: TaskRow, row_id: str, worker: str) -> bool:
    """Given back by ``worker`` as it stops: :func:`store.leases.release`."""
    return leases.release(session, LEASES[cls], row_id, worker)


def cancel_requested(session: Session, job_id: str) -> bool:
    """Whether a cancel of the training job was asked for (it reads this between steps)."""
    return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))


def claim(session: Session, cls: TaskRow, row_id: str, worker: str, running_quota: int = 0) -> bool:
    """queued → running for ``worker``; False when the row is not queued (taken, cancelled,
    finished, or unknown) or, with ``running_quota``, when its key has that many rows of its
    kind running already (the row stays queued; the reaper publishes it again)."""
    where: list[ColumnElement[bool]] = []
    if running_quota:
        running = aliased(cls)
        busy = (
            select(func.count())
            .select_from(running)
            .where(running.state == RUNNING, running.created_by == cls.created_by)
            .scalar_subquery()
        )
        where.append(or_(cls.created_by.is_(None), busy < running_quota))
    return leases.claim(session, LEASES[cls], row_id, worker, *where)


@dataclass(frozen=True)
class Beat:
    owner: bool  # the row is still running for this worker
    cancel_requested: bool


def heartbeat(session: Session, cls: TaskRow, row_id: str, worker: str, **fields: Any) -> Beat:
    """Refresh the heartbeat (and any progress ``fields``) while ``worker`` holds the row."""
    owner = leases.beat(session, LEASES[cls], row_id, worker, **fields)
    cancel = cls is Job and cancel_requested(session, row_id)
    return Beat(owner, cancel)


def finish(
    session: Session,
    cls: TaskRow,
    row_id: str,
    worker: str,
    state: str,
    unless_cancelled: bool = False,
    **fields: Any,
) -> bool:
    """running → ``state`` (:func:`store.leases.finish`); with ``unless_cancelled``, only
    while no cancel of the job was asked for."""
    where = [Job.cancel_requested.is_(False)] if unless_cancelled and cls is Job else []
    return leases.finish(session, LEASES[cls], row_id, worker, state, *where, **fields)


def request_cancel(session: Session, job_id: str) -> str | None:
    """Cancel a queued job at once; ask a running one to stop at its next step. Returns the
    job's state afterwards, or None when there is no such job."""
    now = utcnow()
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == QUEUED)
        .values(state=CANCELLED, finished_at=now, cancel_requested=True)
    )
    session.execute(
        update(Job).where(Job.id == job_id, Job.state == RUNNING).values(cancel_requested=True)
    )
    session.commit()
    return session.scalar(select(Job.state).where(Job.id == job_id))


def activate_if_none(session: Session, model_id: str, replaces: str | None = None) -> bool:
    """Make ``model_id`` the served model when nothing is served yet (a fresh install
    serves its first fine-tuned model without an admin step), or when what is served is the
    model of job ``replaces`` (the first start's full model replacing its early one; a model
    an admin chose meanwhile stays). True when it did."""
    state = session.get(ServingState, 1)
    if state is None:
        session.add(ServingState(id=1, active_model_id=model_id, updated_at=utcnow()))
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            return False
        return True
    served: ColumnElement[bool] = ServingState.active_model_id.is_(None)
    if replaces is not None:
        replaced = select(Model.id).where(Model.job_id == replaces).scalar_subquery()
        served = or_(served, ServingState.active_model_id.in_(replaced))
    result = session.execute(
        update(ServingState)
        .where(ServingState.id == 1, served)
        .values(active_model_id=model_id, updated_at=utcnow())
    )
    session.commit()
    return rowcount(result) == 1


def count_by_state(
    session: Session, cls: type[Job] | type[Evaluation] | type[AnnotationJob]
) -> dict[str, int]:
    """How many rows of ``cls`` are in each state (a state with none is absent)."""
    return dict(session.execute(select(cls.state, func.count()).group_by(cls.state)).all())
