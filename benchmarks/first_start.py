"""The first start, end to end (issues 28, 60): ``mslm up`` on a fresh home with the clinical
corpora in the corpus cache, until the early model answers and then the full clinical model.

    python benchmarks/first_start.py [--cache DIR] [--port 8765] [--timeout-minutes 180]
        [--epochs N] [--base-model ENCODER] [--poll-seconds 5]   # CI: a tiny encoder, 1 epoch
        [--keep-home DIR]   # keep the home (the served bundle, for assertion.py and the misses)
        [--early-only]      # stop once the early model answers (first-start-early.json)

What a hospital's first ``bash scripts/run.sh`` does, on this machine: a new ``MSLM_HOME``
(SQLite, the embedded broker), the API and one worker, ``--bootstrap clinical``. Timed from the
command until ``/readyz`` is 200 with the early model (``minutes_to_early``) and then with the
full model (``minutes_to_served``), with the full job's phases (queued, training epochs, export)
read from its row on the way, and each job's estimates of its time left against the truth
(``estimates``; the goal: within 25 % after the first 10 % of its run). Writes
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

from common import RESULTS, exit_on_sigterm, machine

KEY = "first-start-benchmark-key-0123456789"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="the corpus cache (default: MSLM_CORPUS_CACHE or ~/.cache)")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--timeout-minutes", type=float, default=180)
    ap.add_argument("--out", help="default: results/clinical/first-start(-early).json")
    ap.add_argument(
        "--early-only",
        action="store_true",
        help="stop once the early model is served (its time and its job's estimates)",
    )
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
    exit_on_sigterm()
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
    rows: dict[str, dict] = {}  # the first start's jobs, as last read
    samples: dict[str, list[dict]] = {}  # each job's progress, as read on the way
    served: list[str] = []  # the models /readyz named, in order
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
            for job in jobs:
                rows[job["id"]] = job
                progress = job["progress"]
                if progress.get("elapsed_s") is not None:
                    samples.setdefault(job["id"], []).append(
                        {k: progress.get(k) for k in ("elapsed_s", "eta_s", "phase", "step")}
                    )
                if job["state"] in ("failed", "cancelled"):
                    raise SystemExit(f"a first-start job {job['state']}: {job['error']}")
            full = next((j for j in jobs if j.get("replaces")), jobs[0] if jobs else None)
            if full is not None:
                phases.setdefault("job_queued_s", now)
                if full["state"] == "running":
                    phases.setdefault("training_started_s", now)
                if full["progress"].get("done") or full["state"] == "succeeded":
                    phases.setdefault("training_and_export_done_s", now)
            if ready.status_code == 200:
                model_id = ready.json()["model"]["id"]
                if not served or served[-1] != model_id:
                    served.append(model_id)
                phases.setdefault("first_served_s", now)
                if args.early_only:
                    break
                if full is not None and model_id == full.get("model_id"):
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
    full = next((j for j in rows.values() if j.get("replaces")), None) or next(iter(rows.values()))
    early = rows.get(full.get("replaces") or "")
    served_job = early if args.early_only and early else full
    manifest_path = home / "artifacts" / "models" / served_job["model_id"] / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if args.early_only:
        full = None  # still training when the run stopped
    figures = {
        "minutes_to_early": round(phases["first_served_s"] / 60, 1) if early else None,
        "minutes_to_served": round(phases["served_s"] / 60, 1) if "served_s" in phases else None,
        "model": model["id"],
        "types": manifest["types"],
        "dev_macro_f1": manifest["metrics"]["dev"].get("macro_f1"),
        "estimate_worst_error": {
            name: estimates(samples.get(job["id"], []))["worst_error"]
            for name, job in (("early", early), ("full", full))
            if job is not None
        },
    }
    if args.keep_home:
        figures["bundle"] = str(manifest_path.parent)
    record = {
        **figures,
        "served_in_order": served,
        "phases_s": phases,
        "early_model": None if early is None else early_model(home, early),
        # each job's estimate of its time left against the truth (mslm_core.train.pace)
        "estimates": {
            name: estimates(samples.get(job["id"], []))
            for name, job in (("early", early), ("full", full))
            if job is not None
        },
        "epochs": [
            {k: h.get(k) for k in ("epoch", "stage", "train_loss", "dev_f1", "seconds")}
            for h in served_job["history"]
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
    default = "first-start-early.json" if args.early_only else "first-start.json"
    out = Path(args.out or RESULTS / "clinical" / default)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    if not args.keep_home:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(figures))


def estimates(samples: list[dict]) -> dict:
    """The job's estimates of its time left (its progress, as read) against the truth: the
    time left is its run's length (the last elapsed_s, read when it was done) less the
    elapsed_s of the reading; the error as ``pace.error_of`` has it, judged after the first
    10 % of the run (tests/test_pace.py judges simulated runs alike)."""
    from mslm_core.train.pace import error_of

    done = [s for s in samples if s.get("phase") == "done"]
    if not done:
        return {"worst_error": None, "samples": len(samples)}
    total = float(done[0]["elapsed_s"])
    rows = []
    for s in samples:
        if s.get("phase") == "done" or s.get("eta_s") is None:
            continue
        left = total - float(s["elapsed_s"])
        rows.append(
            {
                "elapsed_s": s["elapsed_s"],
                "phase": s["phase"],
                "eta_s": s["eta_s"],
                "step": s.get("step"),
                "left_s": round(left, 1),
                "error": round(error_of(float(s["eta_s"]), left, total), 3),
            }
        )
    judged = [r["error"] for r in rows if r["elapsed_s"] >= 0.1 * total]
    first = next((r["elapsed_s"] for r in rows), None)
    return {
        "run_s": total,
        "first_estimate_at_s": first,
        "worst_error": max(judged) if judged else None,
        "median_error": sorted(judged)[len(judged) // 2] if judged else None,
        "judged": len(judged),
        "series": rows[:: max(1, len(rows) // 60)],  # at most about 60 of them
    }


def early_model(home: Path, job: dict) -> dict:
    """The early model: its id, settings and its figures on the first 200 dev and test
    sentences of each corpus (what its job scored it on)."""
    manifest = json.loads(
        (home / "artifacts" / "models" / job["model_id"] / "manifest.json").read_text()
    )
    metrics = manifest["metrics"]

    from mslm_core.corpora import clinical

    # the sources are the datasets the first start uploaded, in the recipe's order
    names = dict(
        zip([s["name"] for s in manifest["config"]["sources"]], clinical.CORPORA, strict=True)
    )

    def per_corpus(split: str) -> dict:
        report = metrics.get(split) or {}
        sources = report.get("sources") or {}
        return {
            "macro_f1": report.get("macro_f1"),
            "strict_f1": {names.get(k, k): v["strict"]["f1"] for k, v in sources.items()},
        }

    return {
        "id": job["model_id"],
        "bundle": str(home / "artifacts" / "models" / job["model_id"]),
        "params": job["params"],
        "dev": per_corpus("dev"),
        "test": per_corpus("test"),
        "warnings": job.get("warnings", []),
    }


if __name__ == "__main__":
    main()
