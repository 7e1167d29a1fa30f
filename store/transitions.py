"""State transitions of jobs and evaluations, each one atomic SQL statement so that several
workers and API replicas never both win:

    queued ──claim──► running ──finish──► succeeded | failed | cancelled
       ▲                 │
       └──── reap ◄──────┘  (no heartbeat for MSLM_HEARTBEAT_TIMEOUT_SECONDS: the worker
                             died; re-queued to resume from its checkpoint, or failed with
                             the reason after MSLM_MAX_ATTEMPTS)

A task that receives a message for a row it cannot claim does nothing, so a message
delivered twice (broker redelivery, a re-publish) is harmless.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased

from .db import rowcount
from .tables import (
    CANCELLED,
    FAILED,
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


def release(session: Session, cls: TaskRow, row_id: str, worker: str) -> bool:
    """running → queued, given back by ``worker`` as it stops (a checkpoint kept for the next
    attempt); the attempt is not counted against ``max_attempts``. False when the row is no
    longer this worker's. ``published_at`` is now: the sweep publishes it again once no
    message for it is left in the broker."""
    result = session.execute(
        update(cls)
        .where(cls.id == row_id, cls.state == RUNNING, cls.worker == worker)
        .values(state=QUEUED, worker=None, published_at=utcnow(), attempts=cls.attempts - 1)
    )
    session.commit()
    return rowcount(result) == 1


def cancel_requested(session: Session, job_id: str) -> bool:
    """Whether a cancel of the training job was asked for (it reads this between steps)."""
    return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))


def claim(session: Session, cls: TaskRow, row_id: str, worker: str, running_quota: int = 0) -> bool:
    """queued → running for ``worker``; False when the row is not queued (taken, cancelled,
    finished, or unknown) or, with ``running_quota``, when its key has that many rows of its
    kind running already (the row stays queued; the reaper publishes it again)."""
    now = utcnow()
    condition = [cls.id == row_id, cls.state == QUEUED]
    if running_quota:
        running = aliased(cls)
        busy = (
            select(func.count())
            .select_from(running)
            .where(running.state == RUNNING, running.created_by == cls.created_by)
            .scalar_subquery()
        )
        condition.append(or_(cls.created_by.is_(None), busy < running_quota))
    result = session.execute(
        update(cls)
        .where(*condition)
        .values(
            state=RUNNING,
            worker=worker,
            heartbeat_at=now,
            started_at=now,
            attempts=cls.attempts + 1,
        )
    )
    session.commit()
    return rowcount(result) == 1


@dataclass(frozen=True)
class Beat:
    owner: bool  # the row is still running for this worker
    cancel_requested: bool


def heartbeat(session: Session, cls: TaskRow, row_id: str, worker: str, **fields: Any) -> Beat:
    """Refresh the heartbeat (and any progress ``fields``) while ``worker`` owns the row."""
    result = session.execute(
        update(cls)
        .where(cls.id == row_id, cls.state == RUNNING, cls.worker == worker)
        .values(heartbeat_at=utcnow(), **fields)
    )
    session.commit()
    cancel = False
    if cls is Job:
        cancel = bool(session.scalar(select(Job.cancel_requested).where(Job.id == row_id)))
    return Beat(rowcount(result) == 1, cancel)


def finish(
    session: Session,
    cls: TaskRow,
    row_id: str,
    worker: str,
    state: str,
    unless_cancelled: bool = False,
    **fields: Any,
) -> bool:
    """running → ``state`` (final) for the worker that owns the row; with
    ``unless_cancelled``, only while no cancel was asked for. Commits what the session holds
    with it (a job's model row and its success are one transaction) or, when the row is not
    this worker's to finish, rolls it all back."""
    where = [cls.id == row_id, cls.state == RUNNING, cls.worker == worker]
    if unless_cancelled and cls is Job:
        where.append(Job.cancel_requested.is_(False))
    result = session.execute(
        update(cls).where(*where).values(state=state, finished_at=utcnow(), **fields)
    )
    if rowcount(result) != 1:
        session.rollback()
        return False
    session.commit()
    return True


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


@dataclass
class Reaped:
    requeued: list[str]
    failed: list[str]


def reap(session: Session, cls: TaskRow, timeout_s: float, max_attempts: int) -> Reaped:
    """Running rows whose heartbeat is older than ``timeout_s`` lost their worker: re-queue
    them (the next attempt resumes from its checkpoint) or, after ``max_attempts``, fail
    them with the reason. Returns the ids; the caller re-publishes the re-queued ones."""
    now = utcnow()
    cutoff = now - dt.timedelta(seconds=timeout_s)
    stale = session.execute(
        select(cls.id, cls.attempts).where(cls.state == RUNNING, cls.heartbeat_at < cutoff)
    ).all()
    out = Reaped([], [])
    for row_id, attempts in stale:
        base = update(cls).where(cls.id == row_id, cls.state == RUNNING, cls.heartbeat_at < cutoff)
        if attempts >= max_attempts:
            reason = (
                f"worker lost: no heartbeat for {timeout_s:.0f} s, attempt {attempts} of "
                f"{max_attempts}; not retried"
            )
            won = session.execute(base.values(state=FAILED, finished_at=now, error=reason))
            target = out.failed
        else:
            won = session.execute(base.values(state=QUEUED, worker=None, published_at=now))
            target = out.requeued
        if rowcount(won) == 1:
            target.append(row_id)
    session.commit()
    return out


def unclaimed(session: Session, cls: TaskRow, older_than_s: float) -> list[str]:
    """Queued rows published more than ``older_than_s`` ago (their message may be lost)."""
    cutoff = utcnow() - dt.timedelta(seconds=older_than_s)
    return list(
        session.scalars(select(cls.id).where(cls.state == QUEUED, cls.published_at < cutoff))
    )


def mark_published(session: Session, cls: TaskRow, row_ids: list[str]) -> None:
    if row_ids:
        session.execute(update(cls).where(cls.id.in_(row_ids)).values(published_at=utcnow()))
        session.commit()


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
