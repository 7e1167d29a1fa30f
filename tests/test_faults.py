"""Faults during a job (issue 7), with real processes, Redis and PostgreSQL: Redis restarted
while a job is queued and while it runs, PostgreSQL restarted mid-job, the artifact disk
filling up during export (a real, small tmpfs). After each, the job ends ``succeeded``
(resumed) or ``failed`` with the reason — never ``running`` forever — no half-written bundle is
listed or served, and the served model answers throughout (a prober annotates all along).

These restart the machine's Redis and PostgreSQL (and mount a tmpfs), as root; without those
rights the tests are skipped, unless MSLM_REQUIRE_SERVICES=1."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from service_helpers import ANNOTATE, JOB, TRAIN, auth, service_env, wait_for
from test_service_e2e import api_client, free_port, postgres_url, process, redis_url, upload

pytestmark = pytest.mark.reliability
__all__ = ["postgres_url", "redis_url"]

REDIS_START = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    "6379",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    "/var/lib/redis",
    "--logfile",
    "/var/log/redis/ci.log",
]


def _cannot(what: str, why: str):
    if os.environ.get("MSLM_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{what}: {why}")
    pytest.skip(f"{what}: {why}")


def restart_redis() -> float:
    """Stop Redis (it keeps nothing on disk: every queued message is lost) and start it again;
    returns the seconds it was down."""
    if os.geteuid() != 0 or not shutil.which("redis-server"):
        _cannot("restarting Redis", "needs root and redis-server")
    started = time.monotonic()
    subprocess.run(["redis-cli", "-p", "6379", "shutdown", "nosave"], capture_output=True)
    wait_for(
        lambda: subprocess.run(["redis-cli", "ping"], capture_output=True).returncode,
        lambda rc: rc != 0,
        timeout=20,
    )
    subprocess.run(REDIS_START, check=True, capture_output=True)
    wait_for(
        lambda: subprocess.run(["redis-cli", "ping"], capture_output=True).stdout,
        lambda out: b"PONG" in out,
        timeout=20,
    )
    return time.monotonic() - started


def restart_postgres() -> float:
    if os.geteuid() != 0 or not shutil.which("pg_ctlcluster"):
        _cannot("restarting PostgreSQL", "needs root and pg_ctlcluster")
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    started = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    wait_for(
        lambda: subprocess.run(["pg_isready", "-h", "127.0.0.1"], capture_output=True).returncode,
        lambda rc: rc == 0,
        timeout=60,
    )
    return time.monotonic() - started


class Prober:
    """Annotates through the API every 100 ms, from start to stop; counts what failed."""

    def __init__(self, client: httpx.Client):
        self.client, self.ok, self.failed = client, 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                r = self.client.post(
                    "/v1/annotate",
                    headers=auth(ANNOTATE),
                    json={"texts": ["The patient has breast cancer."]},
                )
                if r.status_code == 200:
                    self.ok += 1
                else:
                    self.failed.append(r.status_code)
            except httpx.HTTPError as exc:
                self.failed.append(type(exc).__name__)
            time.sleep(0.1)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def install(home: Path, encoder: Path, bundle: Path, **settings) -> dict[str, str]:
    """An install's environment, with ``bundle`` imported and active (served from the start)."""
    env = service_env(
        home,
        encoder,
        heartbeat_seconds=0.5,
        heartbeat_timeout_seconds=10,
        requeue_after_seconds=3,
        **settings,
    )
    full = {**os.environ, **env, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mslm_core.cli", "import-model", str(bundle), "--activate"],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"import-model: exit {done.returncode}: {done.stderr[-2000:]}"
    return env


def check_store(client: httpx.Client, artifacts: Path, served_id: str) -> dict:
    """No half-written bundle listed or lying in the model store; the served model unchanged."""
    listed = [m["id"] for m in client.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]]
    on_disk = sorted(p.name for p in (artifacts / "models").iterdir())
    stray = [
        str(p.relative_to(artifacts))
        for p in artifacts.rglob("*")
        if p.name.startswith(".") and ("tmp" in p.name or "staging" in p.name)
    ]
    assert sorted(listed) == on_disk, (listed, on_disk)
    assert stray == []
    ready = client.get("/readyz", headers=auth(ANNOTATE)).json()
    assert ready["model"]["id"] == served_id
    return {"models_listed": len(listed), "stray_staging_dirs": len(stray)}


def _job(client: httpx.Client, dataset_id: str, **extra) -> str:
    r = client.post(
        "/v1/jobs",
        headers=auth(TRAIN),
        json={"dataset_id": dataset_id, **JOB, "patience": 0, **extra},
    )
    assert r.status_code == 202, r.text
    return r.json()["id"]


def _fetch(client: httpx.Client, job_id: str):
    return lambda: client.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()


def final(job: dict) -> bool:
    return job["state"] in ("succeeded", "failed", "cancelled")


def test_redis_restart_while_queued_and_while_running(
    tmp_path, tiny_encoder, toy_onnx_bundle, postgres_url, redis_url, record
):
    env = install(
        tmp_path / "home",
        tiny_encoder,
        toy_onnx_bundle,
        database_url=postgres_url,
        broker_url=redis_url,
    )
    port, log = free_port(), tmp_path / "service.log"
    measured = {}
    with process(["serve", "--port", str(port)], env, log), process(["reaper"], env, log):
        client = api_client(port, log)
        served = client.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"]
        dataset = upload(client, tmp_path / "corpus")
        with Prober(client) as prober:
            # queued: no worker yet; the restart loses the message
            job = _job(client, dataset["id"], epochs=3)
            measured["redis_down_queued_s"] = round(restart_redis(), 1)
            started = time.monotonic()
            with process(["worker"], env, log):
                done = wait_for(_fetch(client, job), final, timeout=180)
                measured["queued_job"] = done["state"]
                measured["queued_recovered_s"] = round(time.monotonic() - started, 1)
                # running: restart under it
                job2 = _job(client, dataset["id"], epochs=60)
                wait_for(_fetch(client, job2), lambda j: len(j["history"]) >= 3, timeout=120)
                measured["redis_down_running_s"] = round(restart_redis(), 1)
                done2 = wait_for(_fetch(client, job2), final, timeout=300)
        measured["running_job"] = done2["state"]
        measured["running_job_attempts"] = done2["attempts"]
        measured["probe_requests"] = prober.ok + len(prober.failed)
        measured["probe_failures"] = len(prober.failed)
        measured.update(check_store(client, tmp_path / "home" / "artifacts", served))
    assert done["state"] == "succeeded", done
    assert done2["state"] == "succeeded", done2
    assert len(done2["history"]) == 60
    assert prober.failed == []
    assert "republished" in log.read_text()
    record(
        "faults: Redis restart",
        "Redis (nothing persisted) restarted while a job was "
        "queued with no worker up, then while another job trained",
        measured,
        "both succeeded; the lost message was re-published by the reaper; the served model "
        "answered throughout",
    )


def test_postgres_restart_while_running(
    tmp_path, tiny_encoder, toy_onnx_bundle, postgres_url, redis_url, record
):
    env = install(
        tmp_path / "home",
        tiny_encoder,
        toy_onnx_bundle,
        database_url=postgres_url,
        broker_url=redis_url,
    )
    port, log = free_port(), tmp_path / "service.log"
    measured = {}
    with (
        process(["serve", "--port", str(port)], env, log),
        process(["reaper"], env, log),
        process(["worker"], env, log),
    ):
        client = api_client(port, log)
        served = client.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"]
        dataset = upload(client, tmp_path / "corpus")
        with Prober(client) as prober:
            job = _job(client, dataset["id"], epochs=60)
            wait_for(_fetch(client, job), lambda j: len(j["history"]) >= 3, timeout=120)
            measured["postgres_down_s"] = round(restart_postgres(), 1)
            done = wait_for(_fetch(client, job), final, timeout=300, every=0.5)
        measured.update(
            job=done["state"],
            attempts=done["attempts"],
            probe_requests=prober.ok + len(prober.failed),
            probe_failures=len(prober.failed),
        )
        measured.update(check_store(client, tmp_path / "home" / "artifacts", served))
    assert done["state"] == "succeeded", done
    assert prober.failed == []
    record(
        "faults: PostgreSQL restart",
        "PostgreSQL restarted while a job trained",
        measured,
        "the job succeeded; annotation never failed",
    )


@contextlib.contextmanager
def small_disk(path: Path, size_mb: int):
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode:
        _cannot("a small tmpfs for the artifact store", mounted.stderr.strip() or "mount failed")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> int:
    """Fill the file system of ``path``; returns the bytes written."""
    written = 0
    with contextlib.suppress(OSError), open(path / "filler", "wb") as fh:
        while True:
            fh.write(b"\0" * (1 << 20))
            fh.flush()
            written += 1 << 20
    return written


def test_disk_full_during_export(tmp_path, tiny_encoder, toy_onnx_bundle, record):
    with small_disk(tmp_path / "artifacts", 64) as artifacts:
        env = install(
            tmp_path / "home",
            tiny_encoder,
            toy_onnx_bundle,
            artifacts_dir=artifacts,
            database_url="",
            broker_url="",
        )
        port, log = free_port(), tmp_path / "service.log"
        measured = {}
        with (
            process(["serve", "--port", str(port)], env, log),
            process(["reaper"], env, log),
            process(["worker"], env, log),
        ):
            client = api_client(port, log)
            served = client.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"]
            dataset = upload(client, tmp_path / "corpus")
            with Prober(client) as prober:
                job = _job(
                    client, dataset["id"], epochs=5, export={"onnx": True, "quantize": "int8"}
                )
                manifest = artifacts / "work" / job / "bundle" / "manifest.json"
                wait_for(manifest.exists, bool, timeout=180, every=0.02)  # training is done
                measured["filled_mb"] = fill(artifacts) >> 20
                done = wait_for(_fetch(client, job), final, timeout=180)
                (artifacts / "filler").unlink()
                measured.update(check_store(client, artifacts, served))
                again = _job(client, dataset["id"], epochs=3)  # space back: it works again
                recovered = wait_for(_fetch(client, again), final, timeout=180)
            measured.update(
                job=done["state"],
                error=done["error"],
                after_freeing_space=recovered["state"],
                probe_requests=prober.ok + len(prober.failed),
                probe_failures=len(prober.failed),
            )
    assert done["state"] == "failed" and "artifact store is full" in done["error"]
    assert recovered["state"] == "succeeded"
    assert prober.failed == []
    record(
        "faults: artifact disk full",
        "the artifact store on a 64 MB tmpfs, filled once "
        "training had written its bundle (export then needs space)",
        measured,
        "failed with the reason; nothing half-written listed; served model answered; the "
        "next job succeeded once space was freed",
    )
