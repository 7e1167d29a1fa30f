"""``python benchmarks/bench.py run|aggregate|fetch`` (see :mod:`harness`). The product's
``mslm`` command has no benchmark verb: the harness lives with the repository it reads its
protocols from and writes its results to."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from .protocol import Protocol, dataset_folder, parse_protocol, smoke_protocol, with_base_model

BENCHMARKS = Path(__file__).resolve().parents[1]
REPO = BENCHMARKS.parent
# MSLM_BENCH_RESULTS: elsewhere (benchmarks/common.py; the smoke tests' temporary folder)
DEFAULT_RESULTS = Path(os.environ.get("MSLM_BENCH_RESULTS") or BENCHMARKS / "results")
DEFAULT_WORK = REPO / ".mslm" / "bench"
PROTOCOL_DIR = BENCHMARKS / "protocols"


def add_run_options(r: argparse.ArgumentParser, data: str | None = None) -> None:
    """``run``'s arguments, on ``bench.py run`` and on ``benchmarks/reproduce.py`` (which
    passes ``data``, the default of ``--data``; without it ``--data`` is required)."""
    r.add_argument("protocol", help="protocol TOML file, or a name in benchmarks/protocols/")
    r.add_argument(
        "--data",
        required=data is None,
        default=data,
        help="directory holding the dataset folders" + (f" (default: {data})" if data else ""),
    )
    r.add_argument("--results", default=DEFAULT_RESULTS, help="results root (PROTOCOL/ below)")
    r.add_argument("--work", default=DEFAULT_WORK, help="checkpoints and bundles in progress")
    r.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    r.add_argument("--keep-bundles", action="store_true", help="keep each run's model bundle")
    r.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs side by side (worker processes; a GPU fits several small runs)",
    )
    r.add_argument(
        "--fetch", action="store_true", help="download missing BLURB corpora into --data first"
    )
    r.add_argument("--base-model", help="the encoder of every run (an alias, a directory)")
    r.add_argument(
        "--datasets",
        nargs="+",
        metavar="NAME",
        help="run only these of the protocol's datasets now (NAME@N, or NAME for all its "
        "sizes); the summary shows the others' runs as pending until they are done",
    )
    r.add_argument(
        "--smoke",
        action="store_true",
        help="a smoke run (CI, with --base-model a tiny encoder): every variant and phase on "
        "the first dataset and seed, one epoch, two grid cells at most; results under "
        "PROTOCOL-smoke/",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/bench.py", description="benchmark protocols: run, aggregate, fetch"
    )
    bench = p.add_subparsers(dest="bench_command", required=True)

    r = bench.add_parser("run", help="run every training run of a protocol not yet done")
    add_run_options(r)

    a = bench.add_parser("aggregate", help="summary.json, summary.md and plots from results")
    a.add_argument("protocol")
    a.add_argument("--results", default=DEFAULT_RESULTS)

    f = bench.add_parser(
        "fetch",
        help="download corpora at pinned sha256: BLURB NER folders, or MACCROBAT2020 / CHIA "
        "(assertion labels, benchmarks/assertion.py)",
    )
    f.add_argument("datasets", nargs="+", help="e.g. NCBI-disease-IOB, MACCROBAT2020, CHIA")
    f.add_argument("--dest", help="folder (default for MACCROBAT2020/CHIA: ~/.cache/mslm/corpora)")
    f.add_argument(
        "--from-git",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="MACCROBAT2020/CHIA: read the pinned commit from a local clone instead of GitHub",
    )
    return p


def resolve_protocol(name: str) -> Path:
    """A TOML file, or a protocol's name in ``benchmarks/protocols/``."""
    path = Path(name)
    if path.suffix != ".toml" and not path.exists():
        path = PROTOCOL_DIR / f"{name}.toml"
    return path


def _changed(protocol: Protocol, smoke: bool, base_model: str | None) -> Protocol:
    """The protocol with every run's encoder ``base_model``, cut to a smoke run."""
    data = protocol.raw
    if base_model:
        data = with_base_model(data, base_model)
    if smoke:
        data = smoke_protocol(data)
    changed = parse_protocol(data, where=f"{protocol.path} (--smoke/--base-model)")
    changed.path = protocol.path
    return changed


def main(argv: list[str] | None = None) -> int:
    from . import aggregate, headline, load_protocol
    from .datasets import fetch

    args = build_parser().parse_args(argv)
    if args.bench_command == "fetch":
        from .clinical import DEFAULT_CACHE, corpora, fetch_corpus

        clones = dict(item.split("=", 1) for item in args.from_git)
        clinical = [d for d in args.datasets if d in corpora()]
        blurb = [d for d in args.datasets if d not in corpora()]
        for name in clinical:
            print(fetch_corpus(name, args.dest or DEFAULT_CACHE, clones.get(name)))
        if blurb:
            if not args.dest:
                raise SystemExit("--dest is required for BLURB corpora")
            for path in fetch(blurb, args.dest):
                print(path)
        return 0
    command = "python benchmarks/bench.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    if args.bench_command == "run":
        return run(args, command)
    protocol = load_protocol(resolve_protocol(args.protocol))
    summary = aggregate(protocol, Path(args.results) / protocol.name, command=None)
    print(json.dumps(headline(summary)))
    return 0


def run(args: argparse.Namespace, command: str) -> int:
    """Run a protocol's missing runs (the options of :func:`add_run_options`) and print its
    headline; ``command``: how the run was started, recorded in summary.md."""
    from . import headline, load_protocol, run_protocol
    from .datasets import fetch

    protocol = load_protocol(resolve_protocol(args.protocol))
    if args.smoke or args.base_model:
        protocol = _changed(protocol, args.smoke, args.base_model)
    if args.fetch:
        from mslm_core.corpora.clinical import CORPORA

        # NAME@N reads folder NAME; the clinical corpora come through the corpus cache
        folders = dict.fromkeys(dataset_folder(d) for d in protocol.datasets)
        missing = [d for d in folders if d not in CORPORA and not (Path(args.data) / d).is_dir()]
        if missing:
            fetch(missing, args.data)
    summary = run_protocol(
        protocol,
        args.data,
        Path(args.results) / protocol.name,
        Path(args.work) / protocol.name,
        device=args.device,
        keep_bundles=args.keep_bundles,
        command=command,
        jobs=args.jobs,
        only=args.datasets,
    )
    print(json.dumps(headline(summary)))
    return 0
