"""The first start, end to end (issue 28): ``mslm up`` on a fresh home with the clinical
corpora in the corpus cache, until the clinical model answers.

    python benchmarks/first_start.py [--cache DIR] [--port 8765] [--timeout-minutes 180]
        [--epochs N] [--base-model ENCODER] [--poll-seconds 5]   # CI: a tiny encoder, 1 epoch
        [--keep-home DIR]   # keep the home (the served bundle, for assertion.py and the misses)

What a hospital's first ``bash scripts/run.sh`` does, on this machine: a new ``MSLM_HOME``
(SQLite, the embedded broker), the API and one worker, ``--bootstrap clinical``. Timed from the
command until ``/readyz`` is 200 with the clinical model served, with the job's phases (queued,
training epochs, export) read from its row on the way. Writes
``results/clinical/first-start.json``; the last line printed is its headline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, machine

KEY = "first-start-benchmark-key-0123456789"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="the corpus cache (default: MSLM_CORPUS_CACHE or ~/.cache)")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--timeout-minutes", type=float, default=180)
    ap.add_argument("--out", default=str(RESULTS / "clinical" / "first-start.json"))
    ap.add_argument("--epochs", type=int, help="the first model's epochs (mslm up's default)")
    ap.add_argument(
        "--base-model", help="the first model's encoder (an alias or a directory; default: minilm)"
    )
    ap.add_argument("--poll-seconds", type=float, default=5.0, help="how often the job is read")
    ap.add_argument(
        "--keep-home",
        metavar="DIR",
        help="use this new folder as the home and keep it (the model bundle the first start "
        "serves is under artifacts/models/); default: a temporary home, deleted",
    )
    args = ap.parse_args()
    import httpx

    if args.keep_home:
        home = Path(args.keep_home)
        if home.exists() and any(home.iterdir()):
            raise SystemExit(f"--keep-home {home}: not empty (the first start needs a new home)")
        home.mkdir(parents=True, exist_ok=True)
    else:
        home = Path(tempfile.mkdtemp(prefix="mslm-first-start-"))
    env = {
        **os.environ,
        "MSLM_HOME": str(home),
        "MSLM_API_KEYS": f"{KEY}:admin",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "MSLM_DATABASE_URL": "",
        "MSLM_BROKER_URL": "",
    }
    if args.cache:
        env["MSLM_CORPUS_CACHE"] = args.cache
    if args.base_model:
        env["MSLM_BASE_MODELS"] = f"first-start={args.base_model}"
        env["MSLM_BASE_MODEL"] = "first-start"
    epochs = [] if args.epochs is None else ["--bootstrap-epochs", str(args.epochs)]
    log = home / "up.log"
    started = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mslm_core.cli",
                "up",
                "--port",
                str(args.port),
                "--bootstrap",
                "clinical",
                *epochs,
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{args.port}"
    headers = {"Authorization": f"Bearer {KEY}"}
    phases: dict[str, float] = {}
    epochs: list[dict] = []
    ready = None
    try:
        deadline = started + 60 * args.timeout_minutes
        while time.perf_counter() < deadline:
            time.sleep(args.poll_seconds)
            if proc.poll() is not None:
                raise SystemExit(f"mslm up exited ({proc.returncode}); see {log}")
            try:
                jobs = httpx.get(f"{url}/v1/jobs", headers=headers, timeout=10).json()["data"]
                ready = httpx.get(f"{url}/readyz", headers=headers, timeout=10)
            except (httpx.HTTPError, ValueError, KeyError):
                continue
            now = round(time.perf_counter() - started, 1)
            phases.setdefault("api_answering_s", now)
            if jobs:
                job = jobs[0]
                phases.setdefault("job_queued_s", now)
                if job["state"] == "running":
                    phases.setdefault("training_started_s", now)
                if job["progress"].get("done") or job["state"] == "succeeded":
                    phases.setdefault("training_and_export_done_s", now)
                epochs = job["history"]
                if job["state"] in ("failed", "cancelled"):
                    raise SystemExit(f"the first job {job['state']}: {job['error']}")
            if ready.status_code == 200:
                phases["served_s"] = now
                break
        else:
            raise SystemExit(f"not served after {args.timeout_minutes} minutes; see {log}")
        model = ready.json()["model"]
        answer = httpx.post(
            f"{url}/v1/annotate",
            headers=headers,
            json={
                "texts": [
                    "No fever; chest X-ray showed a right lower lobe infiltrate. "
                    "Started amoxicillin 500 mg three times daily."
                ]
            },
            timeout=60,
        ).json()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    manifest_path = next((home / "artifacts" / "models").glob("*/manifest.json"))
    manifest = json.loads(manifest_path.read_text())
    figures = {
        "minutes_to_served": round(phases["served_s"] / 60, 1),
        "model": model["id"],
        "types": manifest["types"],
        "dev_macro_f1": manifest["metrics"]["dev"].get("macro_f1"),
    }
    if args.keep_home:
        figures["bundle"] = str(manifest_path.parent)
    record = {
        **figures,
        "phases_s": phases,
        "epochs": [
            {k: h.get(k) for k in ("epoch", "stage", "train_loss", "dev_f1", "seconds")}
            for h in epochs
        ],
        "train_seconds": manifest.get("train_seconds"),
        "example": [
            {k: e[k] for k in ("text", "type", "confidence")}
            | {"negated": (e.get("assertion") or {}).get("negated")}
            for e in answer["results"][0]["entities"]
        ],
        "machine": machine(),
        "command": " ".join(["python", *sys.argv]),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    if not args.keep_home:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
