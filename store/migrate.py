"""Schema migrations (Alembic), run programmatically: ``mslm migrate`` in deployments (a
step before the API starts), automatically at start-up when ``MSLM_AUTO_MIGRATE`` is on."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from .db import engine_for

log = logging.getLogger("mslm.migrate")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    with engine_for(url).connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def schema_behind(url: str) -> str | None:
    """Why this version cannot use the database at ``url`` yet (its schema revision, or that
    it does not answer), or None when the schema is at head."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    want = head_revision()
    try:
        have: str | None = current_revision(url)
    except (OperationalError, ProgrammingError) as exc:  # not up yet, or no such database
        have = f"unreachable ({type(exc).__name__})"
    if have == want:
        return None
    return f"the database schema is at {have}, this version needs {want}: run mslm migrate"


def wait_for_schema(url: str, timeout_s: float = 300.0, every_s: float = 1.0) -> None:
    """Block until the database answers with the schema this version needs: a worker started
    beside the API (compose, ``mslm serve`` + ``mslm worker``) must not touch the tables before
    the API (``MSLM_AUTO_MIGRATE``) or ``mslm migrate`` has made them. Raises ``SystemExit``
    with the reason when it does not come within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    said = False
    while (why := schema_behind(url)) is not None:
        if time.monotonic() > deadline:
            raise SystemExit(why + " (or start the API with MSLM_AUTO_MIGRATE on)")
        if not said:
            log.info("waiting for the database schema: %s", why)
            said = True
        time.sleep(every_s)
