"""Alembic environment: the URL comes from the config the caller built (store.migrate)."""

from __future__ import annotations

from alembic import context

from store.db import engine_for
from store.tables import Base

config = context.config


def run() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url is required"
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    with engine_for(url).connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


run()
