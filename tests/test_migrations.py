"""Every migration keeps the rows it finds: each is run on a database holding rows as the
revision before it made them, on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from test_service_e2e import postgres_url

__all__ = ["postgres_url"]


def _old_insert(conn, orm_class):
    """An INSERT into ``orm_class``'s table as the database has it at an older revision: only
    the columns it has then, with the ORM's types and defaults (a column added by a later
    revision would be refused)."""
    from sqlalchemy import MetaData, Table, insert, inspect

    table = orm_class.__table__
    present = {c["name"] for c in inspect(conn).get_columns(table.name)}
    columns = [c._copy() for c in table.columns if c.name in present]
    return insert(Table(table.name, MetaData(), *columns))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0002_keeps_rows_and_makes_idempotency_keys_per_owner(backend, tmp_path, request):
    from sqlalchemy.exc import IntegrityError

    from store.db import engine_for
    from store.migrate import alembic_config, current_revision, upgrade
    from store.tables import Dataset, Job

    url = (
        f"sqlite:///{tmp_path / 'm.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    upgrade(url, "0001")
    engine = engine_for(url)
    with engine.begin() as conn:  # a row of the old schema
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, state, params, export, idempotency_key, created_by, "
            "created_at, attempts, cancel_requested, progress, history, metrics) VALUES "
            "('job-old', 'queued', '{}', '{}', 'k', 'key-a', '2026-01-01 00:00:00', 0, "
            "false, '{}', '[]', '{}')"
        )
    upgrade(url, "0002")
    assert current_revision(url) == "0002"
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT idempotency_key FROM jobs").scalar() == "k"
        row = {
            "state": "queued",
            "params": {},
            "export": {},
            "idempotency_key": "k",
            "attempts": 0,
            "cancel_requested": False,
            "progress": {},
            "history": [],
            "metrics": {},
        }
        conn.execute(_old_insert(conn, Job), [{**row, "id": "job-b", "created_by": "key-b"}])
        conn.execute(
            _old_insert(conn, Dataset), [{"id": "ds-1", "name": "x", "created_by": "key-a"}]
        )
    with pytest.raises(IntegrityError), engine.begin() as conn:  # same owner, same key
        conn.execute(_old_insert(conn, Job), [{**row, "id": "job-c", "created_by": "key-a"}])
    from alembic import command

    with engine.begin() as conn:  # 0001 holds one job per idempotency key, whoever's
        conn.exec_driver_sql("DELETE FROM jobs WHERE id = 'job-b'")
    command.downgrade(alembic_config(url), "0001")
    assert current_revision(url) == "0001"
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0003_adds_vocabularies_and_keeps_the_serving_state(backend, tmp_path, request):
    from alembic import command
    from sqlalchemy import insert

    from store.db import engine_for
    from store.migrate import alembic_config, current_revision, upgrade
    from store.tables import StoredVocabulary

    url = (
        f"sqlite:///{tmp_path / 'm.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    upgrade(url, "0002")
    engine = engine_for(url)
    with engine.begin() as conn:  # the served model, in the old schema
        conn.exec_driver_sql(
            "INSERT INTO serving_state (id, active_model_id, updated_at) "
            "VALUES (1, 'model-a', '2026-01-01 00:00:00')"
        )
    upgrade(url, "0003")
    assert current_revision(url) == "0003"
    with engine.begin() as conn:
        row = conn.exec_driver_sql(
            "SELECT active_model_id, active_vocabulary_id FROM serving_state"
        ).one()
        assert tuple(row) == ("model-a", None)  # null: the deployment's own vocabulary
        fields = {
            "id": "voc-1",
            "name": "Site",
            "filename": "site.tsv",
            "format": "tsv",
            "path": "vocabularies/voc-1",
            "sha256": "0" * 64,
            "bytes": 5_000_000_000,  # wider than 32 bits
            "concepts": 1,
            "names": 1,
            "url_pattern": "",
            "source": "",
        }
        conn.execute(insert(StoredVocabulary), [fields])
    command.downgrade(alembic_config(url), "0002")
    assert current_revision(url) == "0002"
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT active_model_id FROM serving_state").scalar() == (
            "model-a"
        )
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0004_gives_every_job_its_datasets(backend, tmp_path, request):
    """Issue 28: a job's datasets (with type maps and weights) are rows of job_datasets; a
    job made before it gets its one dataset as a row, and a downgrade drops the table."""
    from alembic import command
    from sqlalchemy import select

    from store.db import engine_for
    from store.migrate import alembic_config, current_revision, upgrade
    from store.tables import Evaluation, JobDataset

    url = (
        f"sqlite:///{tmp_path / 'm.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    upgrade(url, "0003")
    engine = engine_for(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO datasets (id, name, created_at, files, stats, types) VALUES "
            "('ds-1', 'x', '2026-01-01 00:00:00', '{}', '{}', '[]')"
        )
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, state, dataset_id, params, export, created_at, attempts, "
            "cancel_requested, progress, history, metrics) VALUES ('job-old', 'succeeded', "
            "'ds-1', '{}', '{}', '2026-01-01 00:00:00', 1, false, '{}', '[]', '{}')"
        )
        conn.exec_driver_sql(
            "INSERT INTO evaluations (id, state, model_id, dataset_id, split, created_at, "
            "attempts, metrics) VALUES ('ev-old', 'succeeded', 'm', 'ds-1', 'test', "
            "'2026-01-01 00:00:00', 1, '{}')"
        )
    upgrade(url, "0004")
    assert current_revision(url) == "0004"
    with engine.begin() as conn:
        rows = conn.execute(
            select(
                JobDataset.job_id,
                JobDataset.position,
                JobDataset.dataset_id,
                JobDataset.type_map,
                JobDataset.weight,
            )
        ).all()
        assert [(r.job_id, r.position, r.dataset_id, r.type_map, r.weight) for r in rows] == [
            ("job-old", 0, "ds-1", {}, 1.0)
        ]
        assert conn.execute(select(Evaluation.type_map)).scalar() == {}  # as uploaded
        # a dataset deleted later leaves the job's record (SET NULL), as jobs.dataset_id does
        if backend == "postgresql":
            conn.exec_driver_sql("DELETE FROM datasets WHERE id = 'ds-1'")
            assert conn.execute(select(JobDataset.dataset_id)).scalar() is None
    command.downgrade(alembic_config(url), "0003")
    assert current_revision(url) == "0003"
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0006_gives_every_dataset_its_first_version(backend, tmp_path, request):
    """Issue 33: a dataset uploaded before versions is its version 1 (its files, stats and
    types), with no pool; a job made before records no version (it trained on 1); a downgrade
    drops the versions and the columns."""
    from alembic import command
    from sqlalchemy import select

    from store.db import engine_for
    from store.migrate import alembic_config, current_revision, upgrade
    from store.tables import Dataset, DatasetVersion, JobDataset

    url = (
        f"sqlite:///{tmp_path / 'm.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    upgrade(url, "0005")
    engine = engine_for(url)
    files = '{"train": {"file": "train.tsv"}}'
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO datasets (id, name, created_by, created_at, files, stats, types) "
            f"VALUES ('ds-1', 'x', 'key-a', '2026-01-01 00:00:00', '{files}', "
            """'{"train": {"sentences": 3}}', '["Disease"]')"""
        )
        conn.exec_driver_sql(
            "INSERT INTO jobs (id, state, dataset_id, params, export, created_at, attempts, "
            "cancel_requested, progress, history, metrics) VALUES ('job-old', 'succeeded', "
            "'ds-1', '{}', '{}', '2026-01-01 00:00:00', 1, false, '{}', '[]', '{}')"
        )
        conn.exec_driver_sql(
            "INSERT INTO job_datasets (job_id, position, dataset_id, type_map, weight) "
            "VALUES ('job-old', 0, 'ds-1', '{}', 1.0)"
        )
    upgrade(url, "0006")
    assert current_revision(url) == "0006"
    with engine.begin() as conn:
        assert conn.execute(select(Dataset.version, Dataset.pool)).one() == (1, {})
        version = conn.execute(
            select(
                DatasetVersion.dataset_id,
                DatasetVersion.version,
                DatasetVersion.created_by,
                DatasetVersion.files,
                DatasetVersion.stats,
                DatasetVersion.types,
                DatasetVersion.change,
                DatasetVersion.kept,
            )
        ).one()
        assert tuple(version) == (
            "ds-1",
            1,
            "key-a",
            {"train": {"file": "train.tsv"}},
            {"train": {"sentences": 3}},
            ["Disease"],
            {"source": "upload"},
            True,
        )
        assert conn.execute(select(JobDataset.version)).scalar() is None
    command.downgrade(alembic_config(url), "0005")
    assert current_revision(url) == "0005"
    with engine.begin() as conn:
        assert conn.exec_driver_sql("SELECT name FROM datasets").scalar() == "x"
    engine.dispose()
