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

from common import DATA

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv: list[str] | None = None) -> int:
    """``bench.py run``'s options (declared once, :func:`harness.cli.add_run_options`), with
    ``--data`` defaulting to MSLM_DATA or the sibling shared/data."""
    from harness.cli import add_run_options, run

    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="benchmarks/reproduce.py", description=__doc__)
    ap.formatter_class = argparse.RawDescriptionHelpFormatter
    add_run_options(ap, data=str(DATA))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    return run(args, " ".join(map(shlex.quote, ["python", "benchmarks/reproduce.py", *argv])))


if __name__ == "__main__":
    sys.exit(main())
