"""The serving state: one row naming the model every API replica serves and the vocabulary
answers link to (None: the deployment's own). Activating and deleting lock it first."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .tables import ServingState, utcnow


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
