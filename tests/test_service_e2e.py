"""End to end, with real processes: the API (``mslm serve``) and Celery workers (``mslm
worker``) against the real Redis and PostgreSQL of this machine, and the embedded default
(``mslm up``: SQLite and the filesystem broker). Nothing is faked here.

Redis and PostgreSQL must answer on localhost (``.ci/run`` starts them); without them these
tests are skipped, unless ``MSLM_REQUIRE_SERVICES=1`` (set by CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from service_helpers import (
    ADMIN,
    ANNOTATE,
    JOB,
    TRAIN,
    auth,
    free_port,
    process_group,
    service_env,
    toy_files,
    wait_for,
)

PG_ADMIN = os.environ.get("MSLM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("MSLM_TEST_REDIS", "redis://127.0.0.1:6379")


def _unavailable(what: str, exc: Exception):
    if os.environ.get("MSLM_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{what} is required (MSLM_REQUIRE_SERVICES=1) but unreachable: {exc}")
    pytest.skip(f"{what} not reachable: {exc}")


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database on this machine's server, dropped at the end; yields
    its SQLAlchemy URL."""
    import psycopg

    name = f"mslm_test_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        _unavailable("PostgreSQL", exc)
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def redis_database() -> Iterator[str]:
    """One of this machine's Redis databases 1-15, flushed before and after; yields its URL."""
    import redis

    db = 1 + uuid.uuid4().int % 15
    url = f"{REDIS}/{db}"
    client = redis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        client.flushdb()
    except redis.ConnectionError as exc:
        _unavailable("Redis", exc)
    try:
        yield url
    finally:
        client.flushdb()


@pytest.fixture()
def postgres_url():
    with postgres_database() as url:
        yield url


@pytest.fixture()
def redis_url():
    with redis_database() as url:
        yield url


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path):
    """A ``mslm`` subprocess with ``env`` added; killed (group) at the end."""
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **env}
    with process_group([sys.executable, "-m", "mslm_core.cli", *args], full, log) as proc:
        yield proc


def api_client(port: int, log: Path) -> httpx.Client:
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def up() -> bool:
        try:
            return client.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(up, bool, timeout=60, every=0.3)
    except AssertionError:
        raise AssertionError("the API did not start:\n" + log.read_text()[-3000:]) from None
    return client


def upload(client: httpx.Client, folder: Path) -> dict:
    files = toy_files(folder)
    r = client.post(
        "/v1/datasets",
        headers=auth(TRAIN),
        files={s: (p.name, p.read_bytes()) for s, p in files.items()},
    )
    assert r.status_code == 201, r.text
    return r.json()


def fine_tune_then_annotate(client: httpx.Client, tmp: Path) -> dict:
    """The whole user story over HTTP; returns the finished job."""
    dataset = upload(client, tmp / "corpus")
    r = client.post(
        "/v1/jobs",
        headers=auth(TRAIN),
        json={
            "dataset_id": dataset["id"],
            **JOB,
            "patience": 0,
            "export": {"onnx": True, "quantize": "int8"},
        },
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    seen = []

    def fetch() -> dict:
        job = client.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()
        seen.append((job["state"], job["progress"].get("epoch"), job["progress"].get("dev_f1")))
        return job

    job = wait_for(
        fetch, lambda j: j["state"] in ("succeeded", "failed", "cancelled"), timeout=240, every=0.1
    )
    assert job["state"] == "succeeded", job
    running = [s for s in seen if s[0] == "running" and s[1]]
    assert running, f"no progress seen while running: {seen[:5]}"
    assert len({s[1] for s in running}) > 1  # several epochs were reported on the way
    assert any(s[2] is not None for s in running)  # with their dev F1
    model_id = job["model_id"]
    assert client.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN)).status_code == 200
    text = "Cisplatin caused renal failure in the patient ."
    body = client.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
    ents = body["results"][0]["entities"]
    assert body["model"]["id"] == model_id and ents
    for e in ents:
        assert text[e["start"] : e["end"]] == e["text"]
        assert 0 < e["confidence"] <= 1 and e["type"] in ("Chemical", "Disease")
    assert ("renal failure", "Disease") in {(e["text"], e["type"]) for e in ents}
    ev = client.post(
        "/v1/evaluations",
        headers=auth(TRAIN),
        json={"model_id": model_id, "dataset_id": dataset["id"], "split": "test"},
    )
    assert ev.status_code == 202
    done = wait_for(
        lambda: client.get(f"/v1/evaluations/{ev.json()['id']}", headers=auth(TRAIN)).json(),
        lambda e: e["state"] in ("succeeded", "failed"),
        timeout=120,
    )
    assert done["state"] == "succeeded" and done["metrics"]["strict"]["f1"] > 0.5
    ready = client.get("/readyz", headers=auth(ANNOTATE))
    assert ready.status_code == 200 and ready.json()["model"]["id"] == model_id
    return job


def bulk_round_trip(client: httpx.Client) -> dict:
    """An annotation job through a real annotate worker: its output equals /v1/annotate's."""
    texts = ["Cisplatin caused renal failure in the patient .", "No renal failure ."]
    notes = "".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    r = client.post(
        "/v1/annotation-jobs/inputs",
        headers=auth(ANNOTATE),
        files={"file": ("notes.jsonl", notes.encode())},
    )
    assert r.status_code == 201, r.text
    r = client.post(
        "/v1/annotation-jobs",
        headers=auth(ANNOTATE),
        json={"source": {"kind": "file", "input": r.json()["id"]}, "chunk_size": 1},
    )
    assert r.status_code == 202, r.text
    job = wait_for(
        lambda: client.get(f"/v1/annotation-jobs/{r.json()['id']}", headers=auth(ANNOTATE)).json(),
        lambda j: j["state"] in ("succeeded", "failed", "cancelled"),
        timeout=120,
    )
    assert job["state"] == "succeeded", job
    assert job["progress"]["committed"] == 2 and job["progress"]["chunks"]["succeeded"] == 2
    out = client.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
    rows = [json.loads(line) for line in out.text.splitlines()]
    direct = client.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": texts}).json()
    assert [r["entities"] for r in rows] == [d["entities"] for d in direct["results"]]
    return job


def test_redis_and_postgresql(tmp_path, tiny_encoder, postgres_url, redis_url):
    env = service_env(
        tmp_path / "home",
        tiny_encoder,
        database_url=postgres_url,
        broker_url=redis_url,
        heartbeat_seconds=1,
        heartbeat_timeout_seconds=5,
    )
    port = free_port()
    log = tmp_path / "service.log"
    with (
        process(["serve", "--port", str(port)], env, log),
        process(["worker"], env, log),
        process(["worker", "--queues", "annotate"], env, log),
        process(["reaper"], env, log),
    ):
        client = api_client(port, log)
        job = fine_tune_then_annotate(client, tmp_path)
        assert job["attempts"] == 1
        bulk_round_trip(client)  # on its own queue and worker
        metrics = client.get("/metrics").text
        assert 'mslm_jobs{state="succeeded"} 1.0' in metrics
        assert 'mslm_annotation_jobs{state="succeeded"} 1.0' in metrics
    # the schema in PostgreSQL is exactly the models' (the migration is complete)
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from store.db import engine_for
    from store.tables import Base

    with engine_for(postgres_url).connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []


def test_embedded_default_mslm_up(tmp_path, tiny_encoder):
    """One command, no Redis, no PostgreSQL."""
    env = service_env(tmp_path / "home", tiny_encoder, heartbeat_seconds=1)
    for var in ("MSLM_BROKER_URL", "MSLM_DATABASE_URL"):
        env[var] = ""
    port = free_port()
    log = tmp_path / "up.log"
    with process(["up", "--port", str(port)], env, log):
        client = api_client(port, log)
        fine_tune_then_annotate(client, tmp_path)
        bulk_round_trip(client)  # mslm up runs an annotate worker too
    assert (tmp_path / "home" / "mslm.db").exists()
    assert (tmp_path / "home" / "broker" / "queue").is_dir()
    assert (tmp_path / "home" / "broker" / "control").is_dir()  # kombu's exchange table here,
    assert not (Path.cwd() / "control").exists()  # not in whatever directory it was run from


def test_replicas_adding_the_same_configured_key_at_once_keep_one_row(postgres_url):
    """Two API replicas (separate deployments of one store) start together: the second's
    commit of MSLM_API_KEYS' new key meets the first's row, reads again and keeps it."""
    from sqlalchemy import event, select

    from store.db import session_factory
    from store.keys import sync_configured
    from store.migrate import upgrade
    from store.tables import ApiKey

    upgrade(postgres_url)
    factory = session_factory(postgres_url)
    configured = [("0123456789abcdefgh", frozenset({"annotate", "train"}))]
    with factory() as first, factory() as other:
        flushes = []

        def the_other_replica_commits_first(session, context, instances):
            flushes.append(1)
            if len(flushes) == 1:
                sync_configured(other, configured)

        event.listen(first, "before_flush", the_other_replica_commits_first)
        sync_configured(first, configured)  # read no row, then met the other's at its flush
        assert len(flushes) == 2  # it did meet it, and flushed again
    with factory() as session:
        rows = session.scalars(select(ApiKey)).all()
    assert [(r.scopes, r.revoked_at) for r in rows] == [("annotate+train", None)]


def test_metrics_count_the_requests_of_every_api_process(tmp_path, tiny_encoder):
    """``mslm serve --workers 2``: a scrape reaching either process counts both processes'
    requests (one process's own count would differ from scrape to scrape)."""
    env = service_env(tmp_path / "home", tiny_encoder)
    for var in ("MSLM_BROKER_URL", "MSLM_DATABASE_URL"):
        env[var] = ""
    env["TMPDIR"] = str(tmp_path / "tmp")  # where mslm serve makes the shared folder
    (tmp_path / "tmp").mkdir()
    port = free_port()
    log = tmp_path / "api.log"
    refused = 24
    with process(["serve", "--port", str(port), "--workers", "2"], env, log):
        api_client(port, log).close()
        (shared,) = (tmp_path / "tmp").glob("mslm-metrics-*")
        wait_for(
            lambda: {f.stem.rsplit("_", 1)[-1] for f in shared.iterdir()}, lambda p: len(p) == 2
        )
        for _ in range(refused):  # a connection each: the kernel hands them to either process
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as one:
                assert one.get("/v1/models").status_code == 401
        counts = set()
        for _ in range(12):
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as one:
                text = one.get("/metrics").text
            counts.add(
                sum(
                    float(line.rsplit(" ", 1)[1])
                    for line in text.splitlines()
                    if line.startswith("mslm_auth_failures_total{")
                )
            )
        assert counts == {refused}
    assert not shared.exists()  # the folder goes with the processes


@pytest.mark.reliability
def test_killed_worker_job_is_resumed_by_another(
    tmp_path, tiny_encoder, postgres_url, redis_url, record
):
    """kill -9 of the worker mid-training: the reaper re-queues the job, a new worker resumes
    it from its last checkpoint, and it succeeds — never left running."""
    env = service_env(
        tmp_path / "home",
        tiny_encoder,
        database_url=postgres_url,
        broker_url=redis_url,
        heartbeat_seconds=0.5,
        heartbeat_timeout_seconds=3,
    )
    port = free_port()
    log = tmp_path / "service.log"
    epochs = 120
    with process(["serve", "--port", str(port)], env, log), process(["reaper"], env, log):
        client = api_client(port, log)
        dataset = upload(client, tmp_path / "corpus")
        job_id = client.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={
                "dataset_id": dataset["id"],
                **JOB,
                "epochs": epochs,
                "patience": 0,
                "export": {"onnx": False},
            },
        ).json()["id"]

        def fetch() -> dict:
            return client.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()

        with process(["worker"], env, log) as worker:
            wait_for(
                fetch,
                lambda j: j["state"] == "running" and len(j["history"]) >= 3,
                timeout=120,
                every=0.1,
            )
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        killed_at = fetch()
        assert killed_at["state"] == "running"  # as far as the store knows
        with process(["worker"], env, log):
            job = wait_for(fetch, lambda j: j["state"] in ("succeeded", "failed"), timeout=240)
    assert job["state"] == "succeeded", job
    assert job["attempts"] == 2
    epochs_done = [h["epoch"] for h in job["history"]]
    assert epochs_done == list(range(1, epochs + 1))  # resumed, not restarted or duplicated
    assert "resumed from ckpt" in log.read_text()
    record(
        "faults: worker kill -9",
        f"SIGKILL of the worker after {len(killed_at['history'])} "
        f"of {epochs} epochs; a new worker started",
        {
            "killed_after_epochs": len(killed_at["history"]),
            "attempts": job["attempts"],
            "epochs_in_history": len(epochs_done),
            "final": job["state"],
        },
        "re-queued by the reaper, resumed from its last checkpoint, succeeded",
    )
