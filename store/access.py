"""Who sees which rows, and pages of rows: the one definition every aggregate's listing and
lookup uses.

A train key sees what it created (its API key id is the rows' ``created_by``); an admin key,
or the service itself (``owner`` None), sees everything. A row another key owns is answered
as absent (its existence is not disclosed)."""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from .errors import NotFound
from .tables import AnnotationJob, Dataset, Evaluation, Job, Model, NoteInput, StoredVocabulary

#: The rows that have an owner.
OwnedRow = Dataset | Job | Evaluation | NoteInput | AnnotationJob
Owned = TypeVar("Owned", Dataset, Job, Evaluation, NoteInput, AnnotationJob)
#: The rows listed page by page, newest first.
Listed = TypeVar("Listed", Dataset, Job, Model, StoredVocabulary, NoteInput, AnnotationJob)


def owned(row: OwnedRow | None, owner: str | None) -> bool:
    """Whether ``row`` (a dataset, job, evaluation, notes file or annotation job) is visible
    to ``owner``: the API key id of a train key, which sees only what it created, or None
    (an admin key, or the service itself), which sees everything."""
    return row is not None and (owner is None or row.created_by == owner)


def owned_by(cls: type[Owned], owner: str | None) -> list[ColumnElement[bool]]:
    """The condition that restricts ``cls`` to the rows ``owner`` sees (see :func:`owned`):
    none for None."""
    return [] if owner is None else [cls.created_by == owner]


def get_owned(
    session: Session, cls: type[Owned], row_id: str, owner: str | None, what: str
) -> Owned:
    """The row, or NotFound — also when it exists but is not ``owner``'s (its existence is
    not disclosed)."""
    row = session.get(cls, row_id)
    if row is None or not owned(row, owner):
        raise NotFound(f"{what} {row_id}")
    return row


def page(
    session: Session,
    cls: type[Listed],
    limit: int,
    offset: int,
    where: list[ColumnElement[bool]] | None = None,
) -> tuple[list[Listed], int]:
    """One page of the rows of ``cls`` that meet ``where``, newest first, and how many meet
    it."""
    conditions = where or []
    rows = list(
        session.scalars(
            select(cls)
            .where(*conditions)
            .order_by(cls.created_at.desc())
            .limit(limit)
            .offset(offset)
        )
    )
    count = session.scalar(select(func.count()).select_from(cls).where(*conditions))
    return rows, count or 0
