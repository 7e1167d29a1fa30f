"""Helpers shared by the benchmark scripts: result files and the last-line JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

# MSLM_BENCH_RESULTS: elsewhere (a benchmark that runs another for its figures, such as
# api_load_ab.py, keeps the inner run's file out of the committed results; the smoke runs of
# tests/test_benchmarks_run.py write into a temporary folder)
RESULTS = Path(os.environ.get("MSLM_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
# MSLM_DATA: the folder holding the BLURB corpora in IOB (BC5CDR-IOB/, NCBI-disease-IOB/, …: the
# splits as distributed; harness/datasets.py pins their sha256); by default the checkout's
# sibling shared/data, where this project's machines keep them
DATA = Path(os.environ.get("MSLM_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def machine() -> dict:
    from harness.runner import machine as runtime

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {**runtime(), "commit": commit}


def emit(name: str, figures: dict, details: dict | None = None) -> None:
    """Write ``results/<name>.json`` (figures + details + command; ``name`` may name a
    folder: ``linking/speed``) and print the figures as one JSON object on the last line."""
    path = RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        **figures,
        "details": {**(details or {}), "machine": machine()},
        "command": " ".join(["python", *sys.argv]),
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(figures))


def int8_bundle(model: str | Path, tmp: Path) -> Path:
    """``model`` when it has an int8 export, else an exported copy of it under ``tmp`` (what
    the service serves on a CPU)."""
    import shutil

    from mslm_core.bundle import read_manifest
    from mslm_core.export import export_bundle

    bundle = Path(model)
    if "int8" not in (read_manifest(bundle).get("onnx") or {}).get("precisions", {}):
        bundle = tmp / "bundle"
        shutil.copytree(model, bundle)
        export_bundle(bundle, quantize="int8")
    return bundle


def exit_on_sigterm() -> None:
    """Let ``kill`` (SIGTERM) run the script's ``finally``: it raises SystemExit, so that the
    servers and workers the script started in sessions of their own, which no signal to its
    process group reaches, are stopped with it instead of running on."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
