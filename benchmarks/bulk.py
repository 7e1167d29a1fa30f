"""Bulk annotation through the whole job path (issue 34): an OMOP CDM v5.4 warehouse on this
machine's PostgreSQL with a synthetic NOTE table, the API (`mslm serve`) and `mslm worker
--queues annotate` processes on Redis and PostgreSQL, an annotation job reading the notes
with a SQL query and writing NOTE_NLP rows.

Measured, on the same notes and the same model: the offline engine alone (`EntityExtractor`
in this process, the same context and linking, one thread: notes per second per core); the
job path with 1 and with 2 workers, one ONNX Runtime thread each (the notes a job turns
into committed NOTE_NLP rows per second, from its start to its end, planning included);
the per-chunk overhead (a chunk's seconds beyond the engine's time for its notes); each
worker's peak RSS; and the kill test: a worker SIGKILLed mid-job, a new one started, the
job run to its end, the rows compared with a clean run's — duplicated and missing rows.

    python benchmarks/bulk.py --model BUNDLE [--notes 100000] [--job-notes 20000]
        [--offline-notes 5000] [--chunk 200] [--start-delay 25] [--admin URL] [--redis URL]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import omop_warehouse as wh
import psycopg
from common import emit, exit_on_sigterm, int8_bundle

KEY = "bench-admin-key-0123456789abcdef"
REDIS = "redis://127.0.0.1:6379"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mb(pid: int) -> float:
    """The process tree's largest VmHWM (a Celery worker in solo mode is one process)."""
    import psutil

    best = 0.0
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for proc in procs:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return round(best, 1)


class Stack:
    """The API, the reaper and annotate workers as real processes (a deployment's: the reaper
    queues again the chunks of a killed worker)."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home, self.env = home, env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.port = free_port()

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 (the process keeps it)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mslm_core.cli", *args],
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def api(self) -> httpx.Client:
        self._spawn("api", ["serve", "--host", "127.0.0.1", "--port", str(self.port)])
        self._spawn("reaper", ["reaper"])
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{self.port}",
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=60,
        )
        for _ in range(300):
            try:
                if client.get("/healthz").status_code == 200:
                    return client
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise SystemExit("the API did not start: " + (self.home / "api.log").read_text()[-2000:])

    def worker(self, name: str) -> subprocess.Popen[bytes]:
        proc = self._spawn(name, ["worker", "--queues", "annotate", "--name", f"{name}@bench"])
        log = self.home / f"{name}.log"
        for _ in range(600):
            if log.exists() and "ready." in log.read_text(errors="replace"):
                return proc
            time.sleep(0.1)
        raise SystemExit(f"worker {name} did not start: " + log.read_text()[-2000:])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, sig)
        proc.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            with contextlib.suppress(ProcessLookupError):
                self.kill(name, signal.SIGTERM)


def wait_job(client: httpx.Client, job_id: str, timeout: float = 3600.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = client.get(f"/v1/annotation-jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.5)
    raise SystemExit(f"annotation job {job_id} did not end in {timeout} s")


def submit(client: httpx.Client, first: int, last: int, chunk: int) -> dict:
    query = f"SELECT note_id, note_text FROM cdm.note WHERE note_id BETWEEN {first} AND {last}"
    r = client.post(
        "/v1/annotation-jobs",
        json={
            "source": {"kind": "sql", "warehouse": "omop", "query": query},
            "output": {"kind": "omop", "warehouse": "omop", "table": "cdm.note_nlp"},
            "chunk_size": chunk,
        },
    )
    if r.status_code != 202:
        raise SystemExit(f"submit: {r.status_code} {r.text}")
    return r.json()


def rows_of(url: str, job: dict) -> Counter:
    from mslm_core import __version__, omop

    system = omop.nlp_system(__version__, job["model_id"], job["id"])
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            'SELECT note_id, "offset", lexical_variant, term_exists, term_modifiers '
            "FROM cdm.note_nlp WHERE nlp_system = %s",
            (system,),
        ).fetchall()
    return Counter(rows)


def offline(bundle: Path, url: str, first: int, last: int, start_at: float | None = None) -> dict:
    """The engine alone on the job's notes: one ONNX Runtime thread, the same steps. With
    ``start_at`` (a wall-clock time), timed once from then (processes started together)."""
    from mslm_core.context import ContextEngine
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker
    from mslm_core.pipeline import AnnotationPipeline

    with psycopg.connect(url) as conn:
        texts = [
            t
            for (t,) in conn.execute(
                "SELECT note_text FROM cdm.note WHERE note_id BETWEEN %s AND %s ORDER BY note_id",
                (first, last),
            )
        ]
    pipeline = AnnotationPipeline.from_bundle(
        bundle,
        precision="int8",
        device="cpu",
        intra_op_threads=1,
        inter_op_threads=1,
        context=ContextEngine.default(),
        linker=load_linker(DEFAULT_VOCABULARY),
    )
    pipeline(texts[:32])  # warm
    seconds = []
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    for _ in range(1 if start_at is not None else 2):
        start = time.perf_counter()
        for i in range(0, len(texts), 32):
            pipeline(texts[i : i + 32])
        seconds.append(time.perf_counter() - start)
    best = min(seconds)
    return {"notes": len(texts), "seconds": round(best, 2), "notes_per_s": len(texts) / best}


def offline_together(
    bundle: Path, url: str, first: int, last: int, k: int, delay: float = 25.0
) -> dict:
    """``k`` engine processes at once, each on the same notes: what the machine gives k
    single-threaded workers when nothing else runs (its ceiling for k workers). They start
    timing together, ``delay`` seconds from now (after every process has loaded the model)."""
    start_at = time.time() + delay
    args = [str(bundle), url, str(first), str(last), str(start_at)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--offline-child", *args],
            stdout=subprocess.PIPE,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        for _ in range(k)
    ]
    results = [json.loads(p.communicate()[0].decode().strip().splitlines()[-1]) for p in procs]
    wall = max(r["seconds"] for r in results)
    return {"processes": k, "notes_per_s": round(sum(r["notes"] for r in results) / wall, 2)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--offline-child":
        bundle, url, first, last, start_at = sys.argv[2:7]
        result = offline(Path(bundle), url, int(first), int(last), float(start_at))
        print(json.dumps(result))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a model bundle (exported to int8 if needed)")
    p.add_argument("--notes", type=int, default=100_000, help="notes in the NOTE table")
    p.add_argument(
        "--job-notes", type=int, default=20_000, help="notes each measured job annotates"
    )
    p.add_argument(
        "--offline-notes", type=int, default=5000, help="notes the engine alone is timed on"
    )
    p.add_argument("--chunk", type=int, default=200, help="notes per chunk")
    p.add_argument("--admin", default=wh.ADMIN, help="PostgreSQL superuser URL")
    p.add_argument("--redis", default=REDIS, help="Redis server URL (one of its databases)")
    p.add_argument(
        "--start-delay",
        type=float,
        default=25.0,
        help="seconds the engine processes of the ceiling measurement get to load the model",
    )
    args = p.parse_args()
    exit_on_sigterm()

    tmp = Path(tempfile.mkdtemp(prefix="mslm-bulk-"))
    bundle = int8_bundle(args.model, tmp)
    warehouse = wh.create_database(args.admin)
    store_db = wh.create_database(args.admin)
    redis_db = 1 + uuid.uuid4().int % 15
    stack = None
    try:
        start = time.perf_counter()
        wh.build_cdm(warehouse)
        wh.fill_notes(warehouse, args.notes)
        fill_s = time.perf_counter() - start
        sa_url = warehouse.replace("postgresql://", "postgresql+psycopg://")
        env = {
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "MSLM_HOME": str(tmp / "home"),
            "MSLM_DATABASE_URL": store_db.replace("postgresql://", "postgresql+psycopg://"),
            "MSLM_BROKER_URL": f"{args.redis.rstrip('/')}/{redis_db}",
            "MSLM_API_KEYS": f"{KEY}:admin",
            "MSLM_WAREHOUSES": f"omop={sa_url}",
            "MSLM_BOOTSTRAP": "none",
            "MSLM_DEVICE": "cpu",
            "MSLM_PRECISION": "int8",
            "MSLM_INTRA_OP_THREADS": "1",
            "MSLM_INTER_OP_THREADS": "1",
            "MSLM_HEARTBEAT_SECONDS": "2",
            "MSLM_HEARTBEAT_TIMEOUT_SECONDS": "10",
            "MSLM_QUOTA_UPLOADS_PER_HOUR": "0",
        }
        os.environ.update({k: v for k, v in env.items() if k.startswith("HF_")})
        subprocess.run(
            [sys.executable, "-m", "mslm_core.cli", "import-model", str(bundle)],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
        )
        stack = Stack(tmp, env)
        client = stack.api()
        model_id = client.get("/v1/models").json()["data"][0]["id"]
        client.post(f"/v1/models/{model_id}/activate").raise_for_status()

        n = args.job_notes
        engine = offline(bundle, warehouse, 1, min(n, args.offline_notes))
        ceiling = {
            str(k): offline_together(
                bundle, warehouse, 1, min(n, args.offline_notes), k, args.start_delay
            )["notes_per_s"]
            for k in (1, 2)
        }
        per_note_s = engine["seconds"] / engine["notes"]
        runs: dict[str, dict] = {}
        clean: dict | None = None
        for workers in (1, 2):
            names = [f"w{workers}-{k}" for k in range(workers)]
            for name in names:
                stack.worker(name)
            warm = wait_job(client, submit(client, 1, 20 * workers, 10)["id"])
            assert warm["state"] == "succeeded", warm
            job = wait_job(client, submit(client, 1, n, args.chunk)["id"])
            assert job["state"] == "succeeded", job
            rate = job["progress"]["notes_per_second"]
            overhead = statistics.median(
                c["seconds"] - c["notes"] * per_note_s for c in _chunks(store_db, job["id"])
            )
            runs[str(workers)] = {
                "notes_per_s": round(rate, 2),
                "notes_per_s_per_worker": round(rate / workers, 2),
                "ratio_to_offline_per_worker": round(rate / workers / engine["notes_per_s"], 3),
                "seconds": job["progress"]["elapsed_seconds"],
                "chunk_overhead_ms_median": round(1000 * overhead, 1),
                "worker_peak_rss_mb": [peak_rss_mb(stack.procs[x].pid) for x in names],
                "entities": job["progress"]["entities"],
            }
            clean = job
            for name in names:
                stack.kill(name, signal.SIGTERM)
        assert clean is not None
        expected = rows_of(warehouse, clean)

        # the kill test: two workers, one SIGKILLed once a third of the notes are committed
        for name in ("k-0", "k-1"):
            stack.worker(name)
        job = submit(client, 1, n, args.chunk)
        while True:
            now = client.get(f"/v1/annotation-jobs/{job['id']}").json()
            if now["progress"]["committed"] >= n // 3:
                break
            time.sleep(0.2)
        stack.kill("k-0")
        killed_at = now["progress"]["committed"]
        stack.worker("k-2")
        done = wait_job(client, job["id"])
        got = rows_of(warehouse, done)
        duplicated = sum(max(0, got[r] - expected[r]) for r in got)  # extra copies
        missing = sum(max(0, expected[r] - got[r]) for r in expected)
        kill = {
            "state": done["state"],
            "killed_after_committed_notes": killed_at,
            "chunks_run_again": sum(1 for c in _chunks(store_db, job["id"]) if c["attempts"] > 1),
            "rows_expected": sum(expected.values()),
            "rows_written": sum(got.values()),
            "duplicated_rows": duplicated,
            "missing_rows": missing,
            "seconds": done["progress"]["elapsed_seconds"],
        }
        one, two = runs["1"], runs["2"]
        figures = {
            "note_table_rows": args.notes,
            "note_table_fill_s": round(fill_s, 1),
            "job_notes": n,
            "chunk_notes": args.chunk,
            "offline_notes_per_s_one_thread": round(engine["notes_per_s"], 2),
            "job_notes_per_s": {k: v["notes_per_s"] for k, v in runs.items()},
            "job_vs_offline_per_worker": {
                k: v["ratio_to_offline_per_worker"] for k, v in runs.items()
            },
            "scaling_1_to_2": round(two["notes_per_s"] / one["notes_per_s"], 3),
            # the same for the engine alone, 1 and 2 processes at once: the machine's ceiling
            "offline_processes_notes_per_s": ceiling,
            "offline_scaling_1_to_2": round(ceiling["2"] / ceiling["1"], 3),
            "job_scaling_vs_offline_scaling": round(
                (two["notes_per_s"] / one["notes_per_s"]) / (ceiling["2"] / ceiling["1"]), 3
            ),
            "ms_per_note_per_core": round(1000 / one["notes_per_s"], 2),
            "chunk_overhead_ms_median": {k: v["chunk_overhead_ms_median"] for k, v in runs.items()},
            "worker_peak_rss_mb": {k: v["worker_peak_rss_mb"] for k, v in runs.items()},
            "kill_test": kill,
        }
        emit("bulk/bulk", figures, {"runs": runs, "offline": engine, "model": model_id})
    finally:
        if stack is not None:
            stack.stop()
        wh.drop_database(warehouse, args.admin)
        wh.drop_database(store_db, args.admin)
        shutil.rmtree(tmp, ignore_errors=True)  # the install: logs, the imported model


def _chunks(store_db: str, job_id: str) -> list[dict]:
    with psycopg.connect(store_db) as conn:
        rows = conn.execute(
            "SELECT seq, seconds, attempts, notes FROM annotation_chunks WHERE job_id = %s "
            "ORDER BY seq",
            (job_id,),
        ).fetchall()
    return [{"seq": s, "seconds": sec, "attempts": a, "notes": n} for s, sec, a, n in rows]


if __name__ == "__main__":
    main()
