"""Run a declared benchmark protocol and aggregate it (``benchmarks/bench.py run`` with this
repository's defaults: protocols from ``benchmarks/protocols/``, results in
``benchmarks/results/<protocol>/``, checkpoints in ``.mslm/bench/``).

    python benchmarks/reproduce.py cpu-small [--data DIR] [--device auto] [--fetch]
    python benchmarks/reproduce.py honest-mslm
    python benchmarks/reproduce.py paper --data DIR --fetch --device cuda
    python benchmarks/reproduce.py paper --smoke --base-model ENC --data D --results R --work W

``--smoke`` (with a tiny encoder and tiny corpora: what tests/test_benchmarks_run.py runs of
every protocol) runs every variant and phase on the first dataset and seed for one epoch.

Interrupted? Run the same command again: finished runs are kept, a run in progress resumes
from its last checkpoint. The last line printed is the headline as one JSON object; the
whole aggregate is ``summary.json`` / ``summary.md`` beside the plots.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, RESULTS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    from harness.cli import main as bench_main

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("protocol", help="a name in benchmarks/protocols/ or a TOML file")
    ap.add_argument(
        "--data",
        default=str(DATA),
        help="the folder of the dataset folders (default: MSLM_DATA or the sibling shared/data)",
    )
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--fetch", action="store_true", help="download missing corpora first")
    ap.add_argument("--keep-bundles", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="runs side by side")
    ap.add_argument("--results", default=str(RESULTS), help="results root (PROTOCOL/ below)")
    ap.add_argument("--work", default=str(REPO / ".mslm" / "bench"), help="checkpoints, bundles")
    ap.add_argument("--base-model", help="the encoder of every run (an alias, a directory)")
    ap.add_argument(
        "--datasets", nargs="+", metavar="NAME", help="only these datasets now (NAME or NAME@N)"
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="every variant and phase on the first dataset and seed, one epoch (CI)",
    )
    args = ap.parse_args()
    protocol = Path(args.protocol)
    if protocol.suffix != ".toml":
        protocol = REPO / "benchmarks" / "protocols" / f"{args.protocol}.toml"
    argv = [
        "run",
        str(protocol),
        "--data",
        args.data,
        "--device",
        args.device,
        "--results",
        args.results,
        "--jobs",
        str(args.jobs),
        "--work",
        args.work,
    ]
    argv += ["--fetch"] * args.fetch + ["--keep-bundles"] * args.keep_bundles
    argv += ["--smoke"] * args.smoke
    argv += ["--base-model", args.base_model] if args.base_model else []
    argv += ["--datasets", *args.datasets] if args.datasets else []
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    shown = ["python", "benchmarks/reproduce.py", *sys.argv[1:]]
    return bench_main(argv, " ".join(map(shlex.quote, shown)))


if __name__ == "__main__":
    sys.exit(main())
