"""Leases: how a worker holds a row of work — a training job, an evaluation, an annotation job
while its notes are counted, an annotation chunk — so that several workers and reapers never
both win. Each transition is one conditional ``UPDATE``:

    queued ──claim──► running ──finish──► succeeded | failed | cancelled
       ▲                 │ ▲
       │                 └─┘ beat (heartbeat_at, progress)
       ├──── release ◄───┤   (the worker stops: given back, the attempt not counted)
       └──── reap ◄──────┘   (no heartbeat for MSLM_HEARTBEAT_TIMEOUT_SECONDS: the worker
                              died; queued again, or failed after MSLM_MAX_ATTEMPTS)

A queued row carries when its broker message was sent (``published_at``); the reaper sends it
again when it has waited too long (:func:`unpublished`). A task that receives a message for a
row it cannot claim does nothing, so a message delivered twice is harmless.

The columns are ``store.tables.Leased``, a mixin of the four tables; what differs between the
kinds of work is a :class:`Lease` (its key, who holds it, which of the table's rows it covers):
:data:`TRAINING`, :data:`EVALUATION`, :data:`PLANNING`, :data:`CHUNK`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.orm import Session

from .db import rowcount
from .tables import (
    FAILED,
    QUEUED,
    RUNNING,
    AnnotationChunk,
    AnnotationJob,
    Evaluation,
    Job,
    utcnow,
)


@dataclass(frozen=True)
class Lease:
    """One kind of leased work: its table, the columns that name a row (``key``), who holds it
    (``holder``, in a reaped row's error) and the condition that picks this kind's rows out of
    the table (``scope``: an annotation job is planned while its ``planned_at`` is empty)."""

    table: Any  # a mapped class with the Leased columns (store.tables.Leased)
    key: tuple[str, ...] = ("id",)
    holder: str = "worker"
    scope: tuple[ColumnElement[bool], ...] = field(default=())

    def row(self, key: Any) -> list[ColumnElement[bool]]:
        """The condition on the row named ``key`` (a value, or a tuple for a composite key)."""
        values = key if isinstance(key, tuple) else (key,)
        return [
            getattr(self.table, name) == value for name, value in zip(self.key, values, strict=True)
        ]

    def key_of(self, values: Iterable[Any]) -> Any:
        values = tuple(values)
        return values if len(values) > 1 else values[0]

    def held(self, key: Any, worker: str) -> list[ColumnElement[bool]]:
        """The row is running for ``worker``: its lease is still that worker's."""
        t = self.table
        return [*self.row(key), t.state == RUNNING, t.worker == worker, *self.scope]


TRAINING = Lease(Job)
EVALUATION = Lease(Evaluation)
#: an annotation job is held while its notes are counted and its chunks recorded (until
#: ``planned_at``); its ``attempts`` and ``worker`` are its planner's
PLANNING = Lease(AnnotationJob, holder="planner", scope=(AnnotationJob.planned_at.is_(None),))
CHUNK = Lease(AnnotationChunk, key=("job_id", "seq"))


def claim(
    session: Session,
    lease: Lease,
    key: Any,
    worker: str,
    *where: ColumnElement[bool],
    **values: Any,
) -> bool:
    """queued → running for ``worker`` (under the further conditions ``where``); False when
    the row is not queued (taken, cancelled, finished, unknown) or a condition fails."""
    t, now = lease.table, utcnow()
    fields = {
        "state": RUNNING,
        "worker": worker,
        "heartbeat_at": now,
        "started_at": now,
        "attempts": t.attempts + 1,
        **values,
    }
    result = session.execute(
        update(t).where(*lease.row(key), t.state == QUEUED, *where).values(**fields)
    )
    session.commit()
    return rowcount(result) == 1


def beat(session: Session, lease: Lease, key: Any, worker: str, **fields: Any) -> bool:
    """Refresh the heartbeat (and any progress ``fields``) while ``worker`` holds the row;
    False when it no longer does."""
    result = session.execute(
        update(lease.table).where(*lease.held(key, worker)).values(heartbeat_at=utcnow(), **fields)
    )
    session.commit()
    return rowcount(result) == 1


def finish(
    session: Session,
    lease: Lease,
    key: Any,
    worker: str,
    state: str,
    *where: ColumnElement[bool],
    **fields: Any,
) -> bool:
    """running → ``state`` for the worker that holds the row. Commits what the session holds
    with it (a job's model row and its success are one transaction) or, when the row is not
    this worker's to finish, rolls it all back."""
    result = session.execute(
        update(lease.table)
        .where(*lease.held(key, worker), *where)
        .values(state=state, finished_at=utcnow(), **fields)
    )
    if rowcount(result) != 1:
        session.rollback()
        return False
    session.commit()
    return True


def release(session: Session, lease: Lease, key: Any, worker: str) -> bool:
    """running → queued, given back by ``worker`` as it stops (its checkpoint kept for the next
    attempt); the attempt is not counted. ``published_at`` is now: the reaper publishes it
    again once it has waited :func:`unpublished`'s while."""
    t = lease.table
    result = session.execute(
        update(t)
        .where(*lease.held(key, worker))
        .values(state=QUEUED, worker=None, published_at=utcnow(), attempts=t.attempts - 1)
    )
    session.commit()
    return rowcount(result) == 1


@dataclass
class Reaped:
    requeued: list[Any]  # keys queued again: publish each
    failed: list[Any]


def reap(session: Session, lease: Lease, timeout_s: float, max_attempts: int) -> Reaped:
    """Running rows whose heartbeat is older than ``timeout_s`` lost their holder: queued
    again (the next attempt resumes where the last one kept its work) or, after
    ``max_attempts``, failed with the reason."""
    t, now = lease.table, utcnow()
    cutoff = now - dt.timedelta(seconds=timeout_s)
    stale = (t.state == RUNNING, t.heartbeat_at < cutoff, *lease.scope)
    columns = [getattr(t, name) for name in lease.key]
    out = Reaped([], [])
    for *values, attempts in session.execute(select(*columns, t.attempts).where(*stale)).all():
        key = lease.key_of(values)
        base = update(t).where(*lease.row(key), *stale)
        if attempts >= max_attempts:
            reason = (
                f"{lease.holder} lost: no heartbeat for {timeout_s:.0f} s, attempt {attempts} "
                f"of {max_attempts}; not retried"
            )
            won = session.execute(base.values(state=FAILED, finished_at=now, error=reason))
            target = out.failed
        else:
            won = session.execute(base.values(state=QUEUED, worker=None, published_at=now))
            target = out.requeued
        if rowcount(won) == 1:
            target.append(key)
    session.commit()
    return out


def unpublished(session: Session, lease: Lease, older_than_s: float) -> list[Any]:
    """Queued rows whose message was sent more than ``older_than_s`` ago (it may be lost)."""
    t = lease.table
    cutoff = utcnow() - dt.timedelta(seconds=older_than_s)
    columns = [getattr(t, name) for name in lease.key]
    rows = session.execute(
        select(*columns).where(t.state == QUEUED, t.published_at < cutoff, *lease.scope)
    ).all()
    return [lease.key_of(row) for row in rows]


def mark_published(session: Session, lease: Lease, keys: Iterable[Any]) -> None:
    """The rows ``keys`` were published now."""
    keys = list(keys)
    if keys:
        named = or_(*(and_(*lease.row(key)) for key in keys))
        session.execute(update(lease.table).where(named).values(published_at=utcnow()))
        session.commit()
