"""``benchmarks/api_load.py`` for two versions of the service, interleaved: a base revision
(checked out into a temporary git worktree) and this working tree, round after round, so that
the machine's drift hits both alike. Reports the median texts/s per client level of each and
their ratio.

    python benchmarks/api_load_ab.py --base REV --model BUNDLE [--rounds 3] [--duration 15]
        [--levels 1,8,32] [--warmup 2]

``--data`` is passed to both (default: the NCBI-disease test split); so are ``--levels`` and
``--warmup`` when given (a base revision older than them takes api_load.py's defaults only).
Each run serves with ``mslm serve`` from its own tree (``PYTHONPATH``), the same bundle and the
same sentences.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import DATA, emit

REPO = Path(__file__).resolve().parents[1]


def run(tree: Path, args: argparse.Namespace) -> dict:
    out = tempfile.mkdtemp(prefix="mslm-ab-")  # the run's own results stay out of ours
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "HF_HUB_OFFLINE": "1",
        "MSLM_BENCH_RESULTS": out,
    }
    cmd = [
        sys.executable,
        str(tree / "benchmarks" / "api_load.py"),
        "--model",
        str(Path(args.model).resolve()),
        "--data",
        str(Path(args.data).resolve()),
        "--duration",
        str(args.duration),
    ]
    for flag, value in (("--levels", args.levels), ("--warmup", args.warmup)):
        if value is not None:
            cmd += [flag, str(value)]
    # one run a round (the rounds interleave the two trees), with aiohttp's clients: what a
    # tree from before --runs and --client loaded the API with
    script = (tree / "benchmarks" / "api_load.py").read_text(encoding="utf-8")
    if '"--runs"' in script:
        cmd += ["--runs", "1", "--client", "aiohttp"]
    try:
        proc = subprocess.run(
            cmd, cwd=out, env=env, capture_output=True, text=True, check=False, timeout=1800
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"api_load.py failed in {tree}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="git revision to compare against")
    ap.add_argument("--model", required=True, help="a trained bundle (exported or not)")
    ap.add_argument("--data", default=str(DATA / "NCBI-disease-IOB" / "test.tsv"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=15.0, help="seconds per client level")
    ap.add_argument("--levels", help="client levels (default: api_load.py's, 1,8,32)")
    ap.add_argument("--warmup", type=float, help="warm-up seconds per level (default: 2)")
    args = ap.parse_args()

    base_rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.base],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    worktree = Path(tempfile.mkdtemp(prefix="mslm-base-")) / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(worktree), base_rev],
        check=True,
    )
    runs: dict[str, list[dict]] = {"base": [], "head": []}
    try:
        for r in range(args.rounds):
            for name, tree in (("base", worktree), ("head", REPO)):
                runs[name].append(run(tree, args))
                print(f"round {r + 1} {name}", json.dumps(runs[name][-1]), file=sys.stderr)
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)], check=False
        )
        shutil.rmtree(worktree.parent, ignore_errors=True)

    def median(name: str, level: str) -> float:
        return round(statistics.median(r["api_sps"][level] for r in runs[name]), 1)

    levels = list(runs["head"][0]["api_sps"])
    figures = {
        "base": base_rev,
        "base_api_sps": {lv: median("base", lv) for lv in levels},
        "head_api_sps": {lv: median("head", lv) for lv in levels},
        "head_over_base": {lv: round(median("head", lv) / median("base", lv), 3) for lv in levels},
        "errors": sum(r["errors"] for rs in runs.values() for r in rs),
    }
    details = {
        "rounds": args.rounds,
        "duration_s": args.duration,
        "model": args.model,
        "data": args.data,
        "runs": runs,
    }
    emit("api_load-ab-cpu", figures, details)


if __name__ == "__main__":
    main()
