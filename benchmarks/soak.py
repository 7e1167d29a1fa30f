"""Load and soak: ``--clients`` concurrent clients against POST /v1/annotate for
``--minutes`` while a fine-tuning job runs on the worker, on loopback: errors, latency
percentiles, and the API process's RSS at the start, every 30 s, and at the end.

    python benchmarks/soak.py --model BUNDLE [--minutes 10] [--clients 32]
        [--warmup 5] [--base-model ENCODER]   # CI: a fraction of a minute, a tiny encoder

A fresh install (``mslm up``-style: SQLite, filesystem broker) in a temporary MSLM_HOME imports
the bundle and serves it; the job fine-tunes MiniLM on NCBI-disease meanwhile (cancelled at
the end). Clients and server share the machine's cores with the training job.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from api_load import KEY, free_port, load, rss_mb
from common import DATA, emit, exit_on_sigterm, int8_bundle

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a trained bundle (exported or not)")
    ap.add_argument("--data", default=str(DATA / "NCBI-disease-IOB"))
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of load before the soak")
    ap.add_argument(
        "--base-model", help="the training job's encoder (an alias or a directory; default: minilm)"
    )
    args = ap.parse_args()
    exit_on_sigterm()

    import httpx

    from mslm_core.corpus import read_corpus

    texts = [" ".join(s.words) for s in read_corpus(Path(args.data) / "test.tsv").sentences]
    tmp = Path(tempfile.mkdtemp(prefix="mslm-soak-"))
    procs: list[subprocess.Popen] = []
    try:
        bundle = int8_bundle(args.model, tmp)
        env = {
            **os.environ,
            "MSLM_HOME": str(tmp / "home"),
            "MSLM_API_KEYS": f"{KEY}:admin",
            "MSLM_DATABASE_URL": "",
            "MSLM_BROKER_URL": "",
        }
        if args.base_model:
            env["MSLM_BASE_MODELS"] = f"soak={args.base_model}"
            env["MSLM_BASE_MODEL"] = "soak"
        cli = [sys.executable, "-m", "mslm_core.cli"]
        subprocess.run(
            [*cli, "import-model", str(bundle), "--activate"],
            env=env,
            check=True,
            capture_output=True,
        )
        port = free_port()
        with open(tmp / "service.log", "wb") as log:
            for cmd in (["serve", "--port", str(port)], ["worker"], ["reaper"]):
                procs.append(
                    subprocess.Popen(
                        [*cli, *cmd],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        api = procs[0].pid
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=60,
            headers={"Authorization": f"Bearer {KEY}"},
        )
        deadline = time.time() + 120
        while True:
            try:
                if client.get("/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit((tmp / "service.log").read_text()[-2000:])
            time.sleep(0.5)
        files = {
            s: (f"{s}.tsv", (Path(args.data) / f"{n}.tsv").read_bytes())
            for s, n in (("train", "train"), ("dev", "devel"))
        }
        dataset = client.post("/v1/datasets", files=files).json()["id"]
        job = client.post(
            "/v1/jobs", json={"dataset_id": dataset, "epochs": 20, "patience": 0}
        ).json()["id"]
        while client.get(f"/v1/jobs/{job}").json()["state"] == "queued":
            time.sleep(1)
        asyncio.run(load(port, texts, args.clients, 1, args.warmup))
        rss = [(0, round(rss_mb(api), 1))]
        result: dict = {}

        async def soak() -> None:
            task = asyncio.create_task(load(port, texts, args.clients, 1, args.minutes * 60))
            started = time.monotonic()
            while not task.done():
                await asyncio.wait({task}, timeout=30)  # every 30 s, and at the end
                rss.append((round(time.monotonic() - started), round(rss_mb(api), 1)))
            result.update(await task)

        asyncio.run(soak())
        job_state = client.get(f"/v1/jobs/{job}").json()
        client.post(f"/v1/jobs/{job}/cancel")
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {
        "clients": args.clients,
        "minutes": args.minutes,
        "requests": result["requests"],
        "errors": result["errors"],
        "texts_per_s": round(result["texts_per_s"], 1),
        "p50_ms": round(result["p50_ms"], 1),
        "p95_ms": round(result["p95_ms"], 1),
        "p99_ms": round(result["p99_ms"], 1),
        "api_rss_mb": {"start": rss[0][1], "end": rss[-1][1]},
    }
    emit(
        "soak-cpu",
        figures,
        {
            "rss_mb_every_30s": rss,
            "training_job": {"state": job_state["state"], "progress": job_state["progress"]},
        },
    )


if __name__ == "__main__":
    main()
