"""The serving state: one row naming the model every API replica serves and the vocabulary
answers link to (None: the deployment's own). Activating and deleting lock it first. And the
model coming to replace the served one (:func:`coming_model`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .tables import QUEUED, RUNNING, Job, Model, ServingState, utcnow


def active_model_id(session: Session) -> str | None:
    state = session.get(ServingState, 1)
    return state.active_model_id if state else None


def active_vocabulary_id(session: Session) -> str | None:
    """The stored vocabulary answers link to; None: the deployment's own (MSLM_VOCABULARY)."""
    state = session.get(ServingState, 1)
    return state.active_vocabulary_id if state else None


def lock_state(session: Session) -> ServingState:
    """The serving state's row, locked (created first in a fresh store, once, whoever wins)."""
    state = session.get(ServingState, 1, with_for_update=True)
    if state is None:
        try:
            with session.begin_nested():
                session.add(ServingState(id=1, active_model_id=None, updated_at=utcnow()))
        except IntegrityError:
            pass
        state = session.get(ServingState, 1, with_for_update=True, populate_existing=True)
    if state is None:  # a store that refuses to create it is broken
        raise RuntimeError("the serving state's row could not be created")
    return state


def coming_model(session: Session) -> dict[str, Any] | None:
    """The model that will replace what is served, while its job is queued or running: a job
    that ``replaces`` the served model's job (the first start's full model), or, when nothing
    is served, the first start's own job (no key: the first model is served unasked). Its
    job, state, phase and time left (the job's own estimate), or None."""
    active = active_model_id(session)
    pending = select(Job).where(Job.state.in_((QUEUED, RUNNING)))
    if active is not None:
        served_by = session.scalar(select(Model.job_id).where(Model.id == active))
        if served_by is None:
            return None
        pending = pending.where(Job.replaces == served_by)
    else:
        pending = pending.where(Job.created_by.is_(None))
    job = session.scalars(pending.order_by(Job.created_at).limit(1)).first()
    if job is None:
        return None
    progress = job.progress or {}
    return {
        "job_id": job.id,
        "state": job.state,
        "phase": progress.get("phase") or job.state,
        "eta_s": progress.get("eta_s"),
        "replaces": active,
    }
