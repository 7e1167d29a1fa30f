"""The benchmark harness: declared protocols of training runs, one result file per run
(resumable), aggregation with paired tests, Markdown tables and plots.

    mslm bench run benchmarks/protocols/cpu-small.toml --data "$MSLM_DATA"
    python benchmarks/reproduce.py cpu-small            (the same, with the repo's defaults)

Plots and statistics need the ``bench`` extra (matplotlib, scipy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .aggregate import load_results, render_markdown, summarize
from .protocol import Protocol, RunSpec, load_protocol, parse_protocol
from .runner import Runner, write_json

__all__ = [
    "Protocol",
    "RunSpec",
    "Runner",
    "aggregate",
    "load_protocol",
    "parse_protocol",
    "run_protocol",
]


def aggregate(
    protocol: Protocol, results_dir: str | Path, command: str | None = None, plots: bool = True
) -> dict[str, Any]:
    """Write ``summary.json``, ``summary.md`` and the plots of a protocol's results."""
    results_dir = Path(results_dir)
    previous = results_dir / "summary.json"
    if command is None and previous.exists():  # re-aggregating keeps the command of the run
        command = json.loads(previous.read_text(encoding="utf-8")).get("command")
    results = load_results(results_dir)
    summary = summarize(protocol, results)
    if command:
        summary["command"] = command
    write_json(results_dir / "summary.json", summary)
    (results_dir / "summary.md").write_text(render_markdown(summary, command), encoding="utf-8")
    if plots:
        from .plots import write_plots

        summary["plots"] = [p.name for p in write_plots(summary, results, results_dir)]
        write_json(results_dir / "summary.json", summary)
    return summary


def run_protocol(
    protocol: Protocol,
    data_root: str | Path,
    results_dir: str | Path,
    work_dir: str | Path,
    device: str = "auto",
    keep_bundles: bool = False,
    command: str | None = None,
    jobs: int = 1,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Run every run of ``protocol`` not yet done (``jobs`` at a time; on the datasets ``only``
    names, if given), then aggregate everything there is: runs not yet done show as pending."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "protocol.json").write_text(
        json.dumps(protocol.raw, indent=1) + "\n", encoding="utf-8"
    )
    runner = Runner(
        protocol, data_root, results_dir, work_dir, device, keep_bundles, jobs=jobs, only=only
    )
    runner.run_all()
    return aggregate(protocol, results_dir, command)


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures printed on a benchmark's last line: test F1/EM mean ± std per dataset and
    variant, and the decision."""
    return {
        "protocol": summary["protocol"],
        "datasets": {
            ds: {
                label: {
                    k: None if row[k] is None else round(row[k], 4)
                    for k in ("f1_mean", "f1_std", "em_mean", "em_std", "leaky_f1_mean")
                }
                for label, row in table.items()
            }
            for ds, table in summary["datasets"].items()
        },
        "default": (summary["decision"] or {}).get("default"),
    }
