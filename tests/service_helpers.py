"""Shared by the service tests: settings for a temporary install, keys, corpora, polling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import TOY_CONLL

ADMIN = "admin-key-0123456789abcdef"
ANNOTATE = "annotate-key-0123456789abc"
TRAIN = "train-key-0123456789abcdef"
TRAIN2 = "second-train-key-0123456789"  # another team's train key
KEYS = f"{ADMIN}:admin,{ANNOTATE}:annotate,{TRAIN}:train,{TRAIN2}:train"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def service_env(home: Path, encoder: Path, **extra: Any) -> dict[str, str]:
    """MSLM_ variables for an install in ``home`` whose jobs may use the tiny encoder."""
    env = {
        "MSLM_HOME": str(home),
        "MSLM_API_KEYS": KEYS,
        "MSLM_BASE_MODELS": f"tiny={encoder}",
        "MSLM_BASE_MODEL": "tiny",
        "MSLM_DEVICE": "cpu",
        "MSLM_MODEL_POLL_SECONDS": "0.5",
        "MSLM_BOOTSTRAP": "none",  # a test that wants a first model asks for one
        # no quotas: a test that is about them sets them (tests/test_live_attacks.py, round 3)
        "MSLM_QUOTA_QUEUED_JOBS": "0",
        "MSLM_QUOTA_RUNNING_JOBS": "0",
        "MSLM_QUOTA_UPLOADS_PER_HOUR": "0",
        "MSLM_MAX_QUEUED_JOBS": "0",
    }
    env.update({f"MSLM_{k.upper()}": str(v) for k, v in extra.items()})
    return env


def toy_files(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split in ("train", "dev", "test"):
        path = folder / f"{split}.tsv"
        path.write_text(TOY_CONLL, encoding="utf-8")
        out[split] = path
    return out


def upload_toy(client: Any, folder: Path, key: str = TRAIN) -> dict[str, Any]:
    files = toy_files(folder)
    response = client.post(
        "/v1/datasets",
        headers=auth(key),
        files={
            split: (path.name, path.read_bytes(), "text/tab-separated-values")
            for split, path in files.items()
        },
        data={"name": "toy"},
    )
    assert response.status_code == 201, response.text
    return response.json()


def upload_notes(client: Any, name: str, data: bytes) -> dict[str, Any]:
    """A notes file for annotation jobs, uploaded (201) → its description."""
    response = client.post(
        "/v1/annotation-jobs/inputs", headers=auth(ANNOTATE), files={"file": (name, data)}
    )
    assert response.status_code == 201, response.text
    return response.json()


# plain fine-tuning: these tests count epochs and steps of the service, which the default
# (auto: by the training set's size) would choose itself (test_deployment trains the default)
JOB = {
    "epochs": 25,
    "batch_size": 2,
    "learning_rate": 0.003,
    "max_length": 32,
    "seed": 3,
    "strategy": "vanilla",
    # the linear head on a tiny random encoder plateaus for a few epochs before it learns the
    # toy corpus: no early stopping there
    "patience": 0,
}


def wait_for(fetch: Any, done: Any, timeout: float = 120.0, every: float = 0.25) -> Any:
    """Call ``fetch()`` until ``done(result)``; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; last: {result}")
        time.sleep(every)


def make_settings(tmp_path: Path, encoder: Path, **extra: Any) -> Any:
    """Settings for an install in ``tmp_path`` (SQLite, the embedded broker) with the tiny
    encoder allowed."""
    from mslm_settings import Settings

    env = service_env(tmp_path / "home", encoder, **extra)
    return Settings(**{k.removeprefix("MSLM_").lower(): v for k, v in env.items()})


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """``app`` in uvicorn on a free localhost port, in a thread; yields its base URL.
    ``options``: more uvicorn settings (``api.cli.uvicorn_options``)."""
    import uvicorn

    options = {"log_level": "warning", "lifespan": "on", **options}
    config = uvicorn.Config(app, host="127.0.0.1", port=0, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name="uvicorn")
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def process_group(
    argv: list[str], env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` run with the environment ``env`` (all of it), its output appended to ``log``,
    in a process group of its own; the group stopped at the end (SIGTERM, then SIGKILL after
    20 s)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def serve_model_of(client: Any, job_id: str) -> str:
    """Activate the model a succeeded job made (an admin's act: a train key's model is not
    served unasked, not even on an install that serves nothing) → its id."""
    model_id = client.get(f"/v1/jobs/{job_id}", headers=auth(ADMIN)).json()["model_id"]
    response = client.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN))
    assert response.status_code == 200, response.text
    return str(model_id)


def import_and_serve(client: Any, settings: Any, bundle: Path) -> str:
    """A trained bundle exported to ONNX (a copy), imported into the store and served (an
    admin's act) → its model id."""
    import shutil
    import tempfile

    from mslm_core.export import export_bundle
    from store.db import session_factory
    from store.models import import_bundle

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "bundle"
        shutil.copytree(bundle, copy)
        export_bundle(copy)
        with session_factory(settings.sqlalchemy_url)() as session:
            model_id = import_bundle(settings, session, copy).id
    response = client.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN))
    assert response.status_code == 200, response.text
    return str(model_id)


@contextmanager
def cdm_warehouse() -> Iterator[str]:
    """A fresh PostgreSQL database whose ``cdm`` schema is the official CDM 5.4 DDL (its
    psycopg URL), dropped afterwards; skipped when PostgreSQL does not answer, a failure when
    MSLM_REQUIRE_SERVICES=1."""
    import omop_warehouse as w
    import psycopg
    import pytest

    admin = os.environ.get("MSLM_TEST_PG", w.ADMIN)
    try:
        url = w.create_database(admin)
    except psycopg.OperationalError as exc:
        if os.environ.get("MSLM_REQUIRE_SERVICES") == "1":
            pytest.fail(f"PostgreSQL is required (MSLM_REQUIRE_SERVICES=1): {exc}")
        pytest.skip(f"PostgreSQL not reachable: {exc}")
    try:
        w.build_cdm(url)
        yield url
    finally:
        w.drop_database(url, admin)
