"""The files a row stands for (a dataset's corpora, a vocabulary and its index, a notes
file): staged in a folder that is moved into place whole, named as the client named them
only for showing, and removed again when their row cannot be committed."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.orm import Session

from .tables import Base


def shown_name(filename: str, default: str) -> str:
    """A client's file name as the store keeps and shows it: its last part, without control
    characters (PostgreSQL refuses a NUL in text), at most 200
    characters; ``default`` when nothing is left."""
    name = "".join(c for c in Path(filename).name if c.isprintable())
    return name[:200] or default


@contextlib.contextmanager
def staged(parent: Path) -> Iterator[Path]:
    """A new staging folder under ``parent`` (swept as an orphan if the process dies), removed
    when the block raises; the block moves it into place when it succeeds."""
    staging = parent / f".staging-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def record(session: Session, row: Base, folder: Path) -> None:
    """Commit ``row``; when that fails, the folder stored for it goes too."""
    session.add(row)
    try:
        session.commit()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


class IdSet:
    """The ids seen so far while reading an upload, in bounded memory: a set up to
    :attr:`IN_MEMORY` ids, then a SQLite table at ``path`` (an upload of millions of notes
    kept millions of ids in RAM)."""

    IN_MEMORY = 100_000

    def __init__(self, path: Path):
        self.path = path
        self._ids: set[str] = set()
        self._db: sqlite3.Connection | None = None

    def add(self, value: str) -> bool:
        """True when ``value`` is new (and is now in the set)."""
        if self._db is None:
            if value in self._ids:
                return False
            self._ids.add(value)
            if len(self._ids) > self.IN_MEMORY:
                self._spill()
            return True
        cursor = self._db.execute("INSERT OR IGNORE INTO ids VALUES (?)", (value,))
        return cursor.rowcount == 1

    def _spill(self) -> None:
        self._db = sqlite3.connect(self.path)
        self._db.executescript(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
            "CREATE TABLE ids (id TEXT PRIMARY KEY) WITHOUT ROWID;"
        )
        self._db.executemany("INSERT INTO ids VALUES (?)", ((i,) for i in self._ids))
        self._ids = set()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
