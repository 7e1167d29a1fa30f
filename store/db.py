"""Database engine and sessions (SQLAlchemy 2). SQLite by default — WAL and a busy timeout so
that the API and a worker process can share the file — and PostgreSQL in deployments."""

from __future__ import annotations

import functools
from typing import TypeVarTuple, cast

from sqlalchemy import CursorResult, Engine, Result, create_engine, event, text
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

Ts = TypeVarTuple("Ts")


def make_engine(url: str) -> Engine:
    """``hide_parameters``: a database error names its statement, never the values bound to
    it (ids, names, keys a user sent: no submitted text in logs)."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            hide_parameters=True,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=5, max_overflow=10, hide_parameters=True
    )


@functools.lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    """One engine (connection pool) per URL per process."""
    return make_engine(url)


def session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(engine_for(url), expire_on_commit=False)


def ping(factory: sessionmaker[Session]) -> None:
    """Raise when the store does not answer a trivial query (readiness)."""
    with factory() as session:
        session.execute(text("SELECT 1"))


def rowcount(result: Result[*Ts]) -> int:
    """The rows an UPDATE or DELETE matched. ``Session.execute`` is annotated as returning a
    plain ``Result`` whatever the statement, while a DML statement's result is a
    ``CursorResult``, the class that has ``rowcount``; the cast says so (no runtime cost)."""
    return cast(CursorResult[*Ts], result).rowcount
