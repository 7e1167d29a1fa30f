"""Aggregate run results: mean ± std over seeds, paired tests against the baseline, epochs
to the baseline's best dev F1, the default-strategy decision, ``summary.json`` and
``summary.md``.

Every score here is honest (unmasked test input) unless its key or column says
``leaky`` — the research code's gold-masked protocol, shown only to explain the paper.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from .paper import paper_numbers
from .protocol import BY_SIZE, Protocol, cell_label, dataset_folder, dataset_size
from .select import plan_is_done, screen_ranking

DECISION_RULE = (
    "candidate: the non-baseline variant run on every seed (as the baseline) with the best mean "
    "dev strict F1 (mean over datasets of the mean over seeds); it becomes the default only if "
    "its mean dev F1 beats the baseline's on every dataset, else the baseline stays the "
    "default. Test scores are reported, never used to choose."
)
DECISION_BY_SIZE_RULE = (
    "at each training-set size N: among the variants run on every seed of every corpus at N, "
    "the best is the one with the highest mean dev strict F1 (mean over corpora of the mean "
    "over seeds); a variant is tied with it when their paired dev F1 difference, pooled over "
    "(corpus, seed), has a 95 % confidence interval (t) that contains 0; the winner at N is "
    "the cheapest (mean training cost) of the best and those tied with it — costs compare only "
    "when those runs ran on one machine, else the size waits for a re-run on one. One winner at "
    "every size is the default; else the default is `auto`, which takes each size's winner, "
    "switching at the geometric mean of two neighbouring sizes. Test scores are reported, "
    "never used to choose."
)


# how a learning curve names a compared pair, ``a − b`` (plots split it back)
PAIR_SEPARATOR = " − "


def load_results(results_dir: str | Path) -> list[dict[str, Any]]:
    runs = Path(results_dir) / "runs"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(runs.rglob("*.json"))]


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def paired_t_p(a: list[float], b: list[float]) -> float | None:
    """Two-sided p-value of the paired t-test of ``a`` vs ``b`` (same seeds), or None when
    it is undefined (fewer than two pairs, or all differences equal)."""
    if len(a) < 2:
        return None
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    if statistics.pstdev(diffs) == 0.0:
        return None
    from scipy import stats

    p = float(stats.ttest_rel(a, b).pvalue)
    return None if math.isnan(p) else p


def ci95(diffs: list[float]) -> list[float] | None:
    """The 95 % confidence interval (Student's t) of the mean of paired differences, or None
    with fewer than two."""
    if len(diffs) < 2:
        return None
    from scipy import stats

    mean = statistics.mean(diffs)
    half = (
        float(stats.t.ppf(0.975, len(diffs) - 1)) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    )
    return [mean - half, mean + half]


def _epochs_to(history: list[dict[str, Any]], target: float) -> tuple[int | None, float | None]:
    """First epoch (1-based, all stages counted) whose dev F1 reaches ``target``, and the
    wall seconds (training + dev scoring) spent up to then."""
    seconds = 0.0
    for h in history:
        seconds += h.get("seconds") or 0.0
        if h["dev_f1"] is not None and h["dev_f1"] >= target - 1e-12:
            return h["epoch"], seconds
    return None, None


def _best_dev(history: list[dict[str, Any]]) -> float:
    return max((h["dev_f1"] for h in history if h["dev_f1"] is not None), default=0.0)


def _cost_basis(runs: list[dict[str, Any]]) -> str:
    """``gpu``: a run trained on a GPU, where CPU seconds measure only the host's share, so
    costs compare on the wall seconds of the training steps (runs that shared the GPU,
    ``--jobs``, slowed each other: indicative); ``cpu``: every run recorded the CPU seconds
    of its training steps (robust to pauses and to other work on the machine), so costs
    compare on those; else ``wall``. None counts dev scoring or evaluation."""
    if any(_on_gpu(r) for r in runs):
        return "gpu"
    return "cpu" if all(r.get("train_cpu_seconds") for r in runs) else "wall"


def _on_gpu(run: dict[str, Any]) -> bool:
    device = run.get("settings", {}).get("device")
    return device == "cuda" or (device == "auto" and bool(run.get("machine", {}).get("cuda")))


def _cost(run: dict[str, Any], basis: str) -> float:
    seconds: float = run["train_cpu_seconds"] if basis == "cpu" else run["train_seconds"]
    return seconds


def _machine(run: dict[str, Any]) -> str | None:
    """Where a run ran, as its record names it (the GPU, else the CPU and its instruction
    sets, and the threads); None for a record that predates the field."""
    m = run.get("machine")
    if not m:
        return None
    return f"{m.get('cuda') or m.get('cpu')}, {m.get('threads')} threads"


def _machines(runs: list[dict[str, Any]]) -> list[str]:
    """The machines a set of runs ran on."""
    return sorted({name for r in runs if (name := _machine(r)) is not None})


def _one_machine(*runs: dict[str, Any]) -> bool:
    """Whether runs that are compared on cost (the same corpus and seed) ran on one machine:
    the same steps take other seconds on another CPU (AVX-512 against AVX2 alone, say)."""
    return len({_machine(r) for r in runs}) <= 1


def _row(runs: list[dict[str, Any]], base: dict[int, dict[str, Any]]) -> dict[str, Any]:
    runs = sorted(runs, key=lambda r: r["seed"])

    def pick(key: str, source: str = "test") -> list[float]:
        return [r[source]["strict"][key] if key != "em" else r[source]["exact_match"] for r in runs]

    f1, em = pick("f1"), pick("em")
    row: dict[str, Any] = {"seeds": [r["seed"] for r in runs]}
    for name, values in (
        ("f1", f1),
        ("em", em),
        ("precision", pick("precision")),
        ("recall", pick("recall")),
        ("dev_f1", pick("f1", "dev")),
    ):
        row[f"{name}_mean"], row[f"{name}_std"] = _mean_std(values)
    leaky = [r for r in runs if r.get("test_leaky")]
    row["leaky_f1_mean"], row["leaky_f1_std"] = _mean_std(
        [r["test_leaky"]["strict"]["f1"] for r in leaky]
    )
    row["leaky_em_mean"], row["leaky_em_std"] = _mean_std(
        [r["test_leaky"]["exact_match"] for r in leaky]
    )
    ppl = [r["dev"]["perplexity"] for r in runs if r["dev"].get("perplexity") is not None]
    row["perplexity_mean"] = statistics.mean(ppl) if ppl else None
    row["train_seconds_mean"] = statistics.mean(r["train_seconds"] for r in runs)
    row["train_cost"] = _cost_basis(runs + list(base.values()))
    row["train_cost_mean"] = statistics.mean(_cost(r, row["train_cost"]) for r in runs)
    row["epochs"] = max(len(r["history"]) for r in runs)
    row["dev_f1_per_epoch"] = [
        _mean_std(
            [
                r["history"][e]["dev_f1"]
                for r in runs
                if len(r["history"]) > e and r["history"][e]["dev_f1"] is not None
            ]
        )[0]
        for e in range(row["epochs"])
    ]

    # epochs and wall time to the baseline's best dev F1 (same dataset, same seed)
    reached_epochs: list[int] = []
    reached_seconds: list[float] = []
    for r in runs:
        b = base.get(r["seed"])
        if b is None:
            continue
        epoch, seconds = _epochs_to(r["history"], _best_dev(b["history"]))
        if epoch is not None and seconds is not None:
            reached_epochs.append(epoch)
            reached_seconds.append(seconds)
    paired = [r for r in runs if r["seed"] in base]
    row["epochs_to_vanilla_best"] = statistics.mean(reached_epochs) if reached_epochs else None
    row["seconds_to_vanilla_best"] = statistics.mean(reached_seconds) if reached_seconds else None
    row["reached_vanilla_best"] = f"{len(reached_epochs)}/{len(paired)}"

    # paired comparison with the baseline over the seeds both have
    if paired:
        row["vs_baseline"] = paired_comparison(paired, [base[r["seed"]] for r in paired])
    return row


def paired_comparison(a_runs: list[dict[str, Any]], b_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``a`` against ``b``, run by run on the same seeds: test and dev F1 differences, their
    paired t-tests, and the training-cost ratio."""
    a_f1 = [r["test"]["strict"]["f1"] for r in a_runs]
    b_f1 = [r["test"]["strict"]["f1"] for r in b_runs]
    a_dev = [r["dev"]["strict"]["f1"] for r in a_runs]
    b_dev = [r["dev"]["strict"]["f1"] for r in b_runs]
    diffs = [x - y for x, y in zip(a_f1, b_f1, strict=True)]
    dev_diffs = [x - y for x, y in zip(a_dev, b_dev, strict=True)]
    diff_mean, diff_std = _mean_std(diffs)
    basis = _cost_basis(a_runs + b_runs)
    base_seconds = statistics.mean(_cost(r, basis) for r in b_runs)
    comparable = all(_one_machine(a, b) for a, b in zip(a_runs, b_runs, strict=True))
    return {
        "n_pairs": len(a_runs),
        "f1_diff_mean": diff_mean,
        "f1_diff_std": diff_std,
        "f1_diff_ci95": ci95(diffs),
        "p_value": paired_t_p(a_f1, b_f1),
        "dev_f1_diff_mean": statistics.mean(dev_diffs),
        "dev_f1_diff_ci95": ci95(dev_diffs),
        "dev_p_value": paired_t_p(a_dev, b_dev),
        # no ratio of seconds measured on different machines: each pair ran on one
        "train_time_ratio": (
            statistics.mean(_cost(r, basis) for r in a_runs) / base_seconds
            if base_seconds and comparable
            else None
        ),
        "train_cost_comparable": comparable,
    }


def _comparisons(protocol: Protocol, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The protocol's ``compare`` pairs on one dataset, over the seeds both have."""
    out = []
    for a, b in protocol.compare:
        by_seed = {label: {r["seed"]: r for r in runs if r["label"] == label} for label in (a, b)}
        seeds = sorted(set(by_seed[a]) & set(by_seed[b]))
        if seeds:
            out.append(
                {
                    "a": a,
                    "b": b,
                    "seeds": seeds,
                    **paired_comparison(
                        [by_seed[a][s] for s in seeds], [by_seed[b][s] for s in seeds]
                    ),
                }
            )
    return out


def summarize(protocol: Protocol, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The aggregate of a protocol's results (``summary.json``)."""
    results = [r for r in results if r["protocol"] == protocol.name]
    confirm_labels = sorted({r["label"] for r in results if r["phase"] == "confirm"})
    labels = [*protocol.variants, *confirm_labels]
    datasets: dict[str, Any] = {}
    grids: dict[str, Any] = {}
    comparisons: dict[str, Any] = {}
    for ds in protocol.datasets:
        mine = [r for r in results if r["dataset"] == ds]
        if protocol.compare:
            comparisons[ds] = _comparisons(protocol, _dedupe_by_label(mine))
        base = {r["seed"]: r for r in mine if r["label"] == protocol.baseline}
        table = {}
        for label in labels:
            runs = _dedupe([r for r in mine if r["label"] == label])
            if runs:
                table[label] = _row(runs, base)
        datasets[ds] = table
        grid_runs = [r for r in mine if r["cell"] is not None and r["phase"] != "variants"]
        if grid_runs and protocol.grid is not None:
            grids[ds] = _grid(protocol, grid_runs)
    summary: dict[str, Any] = {
        "protocol": protocol.name,
        "description": protocol.description,
        "baseline": protocol.baseline,
        "seeds": protocol.seeds,
        "train": protocol.train,
        "variants": protocol.variants,
        "datasets": datasets,
        "grid": grids or None,
        "screen": _screen(protocol, results),
        "paper": {ds: paper_numbers(ds) for ds in protocol.datasets if paper_numbers(ds)},
        "comparisons": comparisons or None,
        "curve": learning_curve(protocol, datasets, comparisons),
        "decision": (
            decide_by_size(protocol, results)
            if protocol.decision == BY_SIZE
            else decide(protocol, datasets)
            if protocol.decision
            else None
        ),
        "complete": plan_is_done(protocol, results),
        "n_runs": len(results),
        "run_time": _run_time(results),
    }
    return summary


def _run_time(results: list[dict[str, Any]]) -> dict[str, Any]:
    """What the protocol cost: the sum of its runs' wall seconds (training with dev scoring,
    then evaluation) — its wall time when they ran one after the other (``--jobs 1``) — and
    where they ran. A grid cell reused from its twin variant run cost nothing again."""
    ran = [r for r in results if not r.get("same_run_as")]
    wall = sum(sum((r.get("wall_seconds") or {}).values()) for r in ran)
    return {"runs": len(ran), "wall_seconds": round(wall, 1), "machines": _machines(ran)}


def _screen(protocol: Protocol, results: list[dict[str, Any]]) -> dict[str, Any] | None:
    if protocol.screen is None:
        return None
    ranking = screen_ranking(protocol, results)
    return {
        "seeds": protocol.screen.seeds,
        "keep": protocol.screen.keep,
        "kept": None if ranking is None else ranking[0],
        "mean_dev_f1": None if ranking is None else ranking[1],
    }


def _dedupe_by_label(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run per (label, seed)."""
    return [
        r
        for label in dict.fromkeys(r["label"] for r in runs)
        for r in _dedupe([x for x in runs if x["label"] == label])
    ]


def _dedupe(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_seed: dict[int, dict[str, Any]] = {}
    for r in runs:
        by_seed.setdefault(r["seed"], r)
    return list(by_seed.values())


def _grid(protocol: Protocol, runs: list[dict[str, Any]]) -> dict[str, Any]:
    assert protocol.grid is not None
    variant = runs[0]["variant"]
    grid_seeds = set(protocol.grid.seeds)
    cells = []
    for elm in protocol.grid.elm_rate:
        for blm in protocol.grid.blm_rate:
            label = cell_label(variant, elm, blm)
            mine = [
                r
                for r in _dedupe([r for r in runs if r["label"] == label])
                if r["seed"] in grid_seeds
            ]
            if not mine:
                continue
            cells.append(
                {
                    "elm_rate": elm,
                    "blm_rate": blm,
                    "seeds": sorted(r["seed"] for r in mine),
                    "dev_f1_mean": statistics.mean(r["dev"]["strict"]["f1"] for r in mine),
                    "f1_mean": statistics.mean(r["test"]["strict"]["f1"] for r in mine),
                    "em_mean": statistics.mean(r["test"]["exact_match"] for r in mine),
                }
            )
    best = max(cells, key=lambda c: c["dev_f1_mean"]) if cells else None
    return {"variant": variant, "cells": cells, "best_by_dev": best}


def decide(protocol: Protocol, datasets: dict[str, Any]) -> dict[str, Any]:
    """Which variant should be the default (dev scores only; see :data:`DECISION_RULE`)."""
    base = protocol.baseline
    seeds = sorted(protocol.seeds)

    def complete(label: str) -> bool:
        return all(label in t and t[label]["seeds"] == seeds for t in datasets.values())

    if not complete(base):
        return {"rule": DECISION_RULE, "candidate": None, "default": base, "pending": True}
    labels = [
        label
        for label in {lbl for table in datasets.values() for lbl in table}
        if label != base and complete(label)
    ]
    if not labels:
        return {"rule": DECISION_RULE, "candidate": None, "default": base}

    def mean_dev(label: str) -> float:
        mean: float = statistics.mean(t[label]["dev_f1_mean"] for t in datasets.values())
        return mean

    candidate = max(sorted(labels), key=mean_dev)
    beats = {ds: t[candidate]["dev_f1_mean"] > t[base]["dev_f1_mean"] for ds, t in datasets.items()}
    return {
        "rule": DECISION_RULE,
        "candidate": candidate,
        "candidate_mean_dev_f1": mean_dev(candidate),
        "baseline_mean_dev_f1": statistics.mean(t[base]["dev_f1_mean"] for t in datasets.values()),
        "beats_baseline_on_dev": beats,
        "default": candidate if all(beats.values()) else base,
    }


def learning_curve(
    protocol: Protocol, datasets: dict[str, Any], comparisons: dict[str, Any]
) -> dict[str, Any] | None:
    """Each corpus the protocol trains at several sizes (``NAME@N``): every variant's test and
    dev F1 and training cost by size, and the ``compare`` pairs' paired differences (with
    their 95 % intervals) by size. None when no corpus has two sizes."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for ds in protocol.datasets:
        n = dataset_size(ds)
        if n is not None:
            groups.setdefault(dataset_folder(ds), []).append((n, ds))
    curves: dict[str, Any] = {}
    for folder, sized in groups.items():
        if len(sized) < 2:
            continue
        sized.sort()
        variants: dict[str, list[dict[str, Any]]] = {}
        for label in protocol.variants:
            points = [
                {
                    "n": n,
                    "seeds": row["seeds"],
                    "test_f1_mean": row["f1_mean"],
                    "test_f1_std": row["f1_std"],
                    "dev_f1_mean": row["dev_f1_mean"],
                    "train_cost_mean": row["train_cost_mean"],
                    "train_cost": row["train_cost"],
                }
                for n, ds in sized
                if (row := datasets.get(ds, {}).get(label))
            ]
            if points:
                variants[label] = points
        pairs: dict[str, list[dict[str, Any]]] = {}
        for n, ds in sized:
            for c in comparisons.get(ds) or []:
                pairs.setdefault(PAIR_SEPARATOR.join((c["a"], c["b"])), []).append(
                    {
                        "n": n,
                        "seeds": c["seeds"],
                        **{
                            k: c[k]
                            for k in (
                                "f1_diff_mean",
                                "f1_diff_ci95",
                                "p_value",
                                "dev_f1_diff_mean",
                                "dev_f1_diff_ci95",
                                "train_time_ratio",
                                "train_cost_comparable",
                            )
                        },
                    }
                )
        curves[folder] = {"sizes": [n for n, _ in sized], "variants": variants, "pairs": pairs}
    return curves or None


def decide_by_size(protocol: Protocol, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The default strategy by training-set size (:data:`DECISION_BY_SIZE_RULE`), from the
    runs themselves (dev scores only)."""
    results = [r for r in results if r["protocol"] == protocol.name and r["phase"] == "variants"]
    seeds = sorted(protocol.seeds)
    sizes = sorted({n for ds in protocol.datasets if (n := dataset_size(ds)) is not None})
    steps: list[dict[str, Any]] = []
    for n in sizes:
        corpora = [ds for ds in protocol.datasets if dataset_size(ds) == n]
        runs: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
        for r in results:
            if r["dataset"] in corpora:
                runs.setdefault(r["label"], {}).setdefault((r["dataset"], r["seed"]), r)
        keys = [(ds, s) for ds in corpora for s in seeds]
        complete = sorted(label for label, got in runs.items() if all(k in got for k in keys))
        if not complete:
            steps.append({"n": n, "winner": None, "pending": True})
            continue

        dev = {
            label: {k: float(runs[label][k]["dev"]["strict"]["f1"]) for k in keys}
            for label in complete
        }
        mean_dev = {
            label: statistics.mean(
                statistics.mean(dev[label][(ds, s)] for s in seeds) for ds in corpora
            )
            for label in complete
        }
        basis = _cost_basis([r for label in complete for r in runs[label].values()])
        cost = {
            label: statistics.mean(_cost(runs[label][k], basis) for k in keys) for label in complete
        }
        best = max(complete, key=lambda label: mean_dev[label])
        tied = []
        for label in complete:
            interval = ci95([dev[best][k] - dev[label][k] for k in keys])
            if label != best and (interval is None or interval[0] <= 0.0):
                tied.append(label)
        # the tie is broken on cost, which compares only run by run on one machine
        comparable = not tied or all(
            _one_machine(*(runs[label][k] for label in [best, *tied])) for k in keys
        )
        winner = min([best, *tied], key=lambda label: (cost[label], label)) if comparable else None
        steps.append(
            {
                "n": n,
                "best": best,
                "tied": tied,
                "winner": winner,
                "pending": len(complete) < len(protocol.variants) or not comparable,
                "mean_dev_f1": mean_dev,
                "train_cost": cost,
                "train_cost_basis": basis,
                "train_cost_comparable": comparable,
            }
        )
    winners = [s["winner"] for s in steps]
    pending = any(s.get("pending") for s in steps) or None in winners
    if None in winners or not winners:
        default: str | None = None
        auto: list[dict[str, Any]] = []
    else:
        auto = []
        for step, following in zip(steps, [*steps[1:], None], strict=True):
            if following is not None and following["winner"] == step["winner"]:
                continue
            up_to = None if following is None else round(math.sqrt(step["n"] * following["n"]))
            auto.append(
                {
                    "up_to_sentences": up_to,
                    "variant": step["winner"],
                    "settings": protocol.settings_for(step["winner"]),
                }
            )
        default = auto[0]["variant"] if len(auto) == 1 else "auto"
    return {
        "rule": DECISION_BY_SIZE_RULE,
        "by_size": steps,
        "default": default,
        "auto": auto,
        "pending": pending,
    }


# -- Markdown ---------------------------------------------------------------------------------
def _pct(mean: float | None, std: float | None = None) -> str:
    if mean is None:
        return "—"
    return f"{100 * mean:.2f}" + ("" if std is None else f" ± {100 * std:.2f}")


def _p(value: float | None) -> str:
    return "—" if value is None else (f"{value:.3f}" if value >= 0.001 else f"{value:.1e}")


def _ratio(comparison: dict[str, Any], row: bool = False) -> str:
    """A comparison's training-cost ratio, or why there is none: a table cell, or (``row``)
    the note after a variant's own cost."""
    ratio = comparison.get("train_time_ratio")
    if ratio is not None:
        return f" ({ratio:.2f}×)" if row else f"{ratio:.2f}"
    if comparison.get("train_cost_comparable", True):
        return "" if row else "—"
    return " (no ratio: machines differ)" if row else "— (machines differ)"


def _table_row(label: str, row: dict[str, Any], is_baseline: bool) -> str:
    vs = row.get("vs_baseline") or {}
    etb = row["epochs_to_vanilla_best"]
    ppl = row["perplexity_mean"]
    cells = [
        f"`{label}`",
        ",".join(map(str, row["seeds"])),
        _pct(row["f1_mean"], row["f1_std"]),
        _pct(row["em_mean"], row["em_std"]),
        _pct(row["leaky_f1_mean"], row["leaky_f1_std"]),
        "—" if is_baseline else _pct(vs.get("f1_diff_mean"), vs.get("f1_diff_std")),
        "—" if is_baseline else _p(vs.get("p_value")),
        _pct(row["dev_f1_mean"], row["dev_f1_std"]),
        ("—" if etb is None else f"{etb:.1f} ep, {row['seconds_to_vanilla_best']:.0f} s")
        + f" ({row['reached_vanilla_best']})",
        f"{row['train_cost_mean']:.0f} {row['train_cost']}" + _ratio(vs, row=True),
        "—" if ppl is None else f"{ppl:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def _ci(interval: list[float] | None) -> str:
    return "—" if interval is None else f"[{100 * interval[0]:+.2f}, {100 * interval[1]:+.2f}]"


def _curve_lines(curves: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for folder, curve in curves.items():
        labels = list(curve["variants"])
        lines += [
            f"## Learning curve: {folder}",
            "",
            "Test F1 (honest, %) by training sentences, mean ± std over seeds; dev F1 in brackets.",
            "",
            "| sentences | " + " | ".join(f"`{label}`" for label in labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for n in curve["sizes"]:
            cells = []
            for label in labels:
                point = next((q for q in curve["variants"][label] if q["n"] == n), None)
                cells.append(
                    "—"
                    if point is None
                    else f"{_pct(point['test_f1_mean'], point['test_f1_std'])} "
                    f"({_pct(point['dev_f1_mean'])})"
                )
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
        for pair, points in curve["pairs"].items():
            lines += [
                f"Paired differences `{pair}` (points; 95 % interval, t, over seeds):",
                "",
                "| sentences | seeds | Δ test F1 | 95 % interval | p | Δ dev F1 | dev 95 % "
                "interval | train cost × |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for q in points:
                lines.append(
                    f"| {q['n']} | {','.join(map(str, q['seeds']))} | {_pct(q['f1_diff_mean'])} "
                    f"| {_ci(q['f1_diff_ci95'])} | {_p(q['p_value'])} "
                    f"| {_pct(q['dev_f1_diff_mean'])} | {_ci(q['dev_f1_diff_ci95'])} "
                    f"| {_ratio(q)} |"
                )
            lines.append("")
    return lines


def _decision_by_size_lines(d: dict[str, Any]) -> list[str]:
    lines = ["## Decision, by training-set size", "", d["rule"], ""]
    lines += [
        "| sentences | best (dev) | tied with it | winner | mean dev F1 | train cost |",
        "|---|---|---|---|---|---|",
    ]
    for step in d["by_size"]:
        if "best" not in step:
            lines.append(f"| {step['n']} | — | — | pending | — | — |")
            continue
        devs = ", ".join(f"`{k}` {_pct(v)}" for k, v in step["mean_dev_f1"].items())
        costs = (
            ", ".join(f"`{k}` {v:.0f} s" for k, v in step["train_cost"].items())
            + f" ({step['train_cost_basis']})"
        )
        tied = ", ".join(f"`{t}`" for t in step["tied"]) or "none"
        winner = (
            f"**`{step['winner']}`**"
            if step["winner"] is not None
            else "pending: tied, costs from different machines"
        )
        lines.append(f"| {step['n']} | `{step['best']}` | {tied} | {winner} | {devs} | {costs} |")
    lines.append("")
    if d["default"] is None:
        lines.append(
            "**No default yet: runs are missing, or a tie waits for costs measured on one "
            "machine.**"
        )
    elif d["default"] == "auto":
        parts = [
            f"`{a['variant']}` up to {a['up_to_sentences']} sentences"
            if a["up_to_sentences"] is not None
            else f"`{a['variant']}` above"
            for a in d["auto"]
        ]
        lines.append("**Default: `auto`** — " + ", ".join(parts) + ".")
    else:
        lines.append(f"**Default: `{d['default']}`** at every size measured.")
    if d.get("pending") and d["default"] is not None:
        lines.append("")
        lines.append("Not final: some variants have not run on every seed at every size.")
    return lines


def _decision_lines(d: dict[str, Any]) -> list[str]:
    if "by_size" in d:
        return _decision_by_size_lines(d)
    lines = ["## Decision", "", d["rule"], ""]
    if d.get("candidate"):
        beats = ", ".join(
            f"{ds}: {'yes' if v else 'no'}" for ds, v in d["beats_baseline_on_dev"].items()
        )
        lines.append(
            f"Candidate `{d['candidate']}` (mean dev F1 {_pct(d['candidate_mean_dev_f1'])} vs "
            f"baseline {_pct(d['baseline_mean_dev_f1'])}); beats the baseline on dev — {beats}. "
            f"**Default: `{d['default']}`.**"
        )
    else:
        lines.append(f"**Default: `{d['default']}`.**")
    return lines


def render_markdown(summary: dict[str, Any], command: str | None = None) -> str:
    lines = [f"# Benchmark `{summary['protocol']}`", ""]
    if summary.get("description"):
        lines += [summary["description"].strip(), ""]
    lines += [
        "Scores are strict entity-level test F1 and EM (%), mean ± std over seeds "
        f"{summary['seeds']}. **Honest** = the product's prediction path on unmasked text. "
        "**Leaky** = the research code's protocol (test sentences masked with their *gold* "
        "mentions before prediction, docs/method.md §3b) — shown only to explain the paper's "
        "numbers. "
        f"Δ and p: paired over seeds against `{summary['baseline']}` (two-sided paired t-test). "
        "To baseline best: the first epoch whose dev F1 reaches the baseline's best dev F1 "
        "in the same seed, and the wall seconds (training and dev scoring) spent up to it, "
        "mean over the runs that reach it (reached / runs). Train s: seconds of the training "
        "steps (no dev scoring): CPU seconds, all threads, where every run recorded them "
        "(`cpu`: not inflated by pauses or other work), else wall seconds (`wall`); on a "
        "GPU, wall seconds (`gpu`), indicative only where runs shared the GPU (`--jobs`).",
        "",
        "Training settings shared by every run: `" + json.dumps(summary["train"]) + "`.",
        "",
    ]
    if not summary.get("complete", True):
        lines += [
            f"**Incomplete: {summary['n_runs']} runs so far.** The study resumes where it "
            "stopped (same command); rows with fewer seeds than the baseline are not yet "
            "comparable, and no decision is final.",
            "",
        ]
    screen = summary.get("screen")
    if screen:
        lines += [
            f"**Screen.** Every variant ran on seed(s) {screen['seeds']} first; the baseline "
            f"and the {screen['keep']} other variant(s) with the best mean dev F1 go on to "
            "the other seeds.",
            "",
        ]
        if screen["kept"] is not None:
            lines += ["| variant | mean dev F1 (screen) | goes on |", "|---|---|---|"]
            ranked = sorted(screen["mean_dev_f1"].items(), key=lambda kv: -kv[1])
            for label, score in ranked:
                lines.append(
                    f"| `{label}` | {_pct(score)} | {'yes' if label in screen['kept'] else 'no'} |"
                )
            lines.append("")
    for ds, table in summary["datasets"].items():
        lines += [f"## {ds}", ""]
        lines += [
            "| variant | seeds | test F1 (honest) | test EM (honest) | test F1 (leaky) | "
            "Δ F1 vs baseline | p | dev F1 | to baseline best | train s (× baseline) "
            "| dev perplexity |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for label, row in table.items():
            lines.append(_table_row(label, row, label == summary["baseline"]))
        paper = (summary.get("paper") or {}).get(ds)
        if paper:
            em = ", ".join(
                f"{enc} {a:.1f} → {b:.1f}" for enc, (a, b) in paper["em_vanilla_to_mslm"].items()
            )
            lines += ["", f"Paper (EM, vanilla → MSLM, {paper['note']}): {em}."]
            if paper.get("f1_biobert_vanilla_to_mslm"):
                a, b = paper["f1_biobert_vanilla_to_mslm"]
                lines.append(f"Paper test F1, BioBERT → MSLM-BioBERT: {a:.2f} → {b:.2f}.")
        lines.append("")
    grid = summary.get("grid") or {}
    for ds, g in grid.items():
        lines += [f"## ELM × BLM grid, `{g['variant']}`, {ds}", ""]
        lines += ["| ELM | BLM | dev F1 | test F1 | test EM | seeds |", "|---|---|---|---|---|---|"]
        for c in g["cells"]:
            best = " **(best dev)**" if c == g["best_by_dev"] else ""
            lines.append(
                f"| {c['elm_rate']:g} | {c['blm_rate']:g} | {_pct(c['dev_f1_mean'])}{best} "
                f"| {_pct(c['f1_mean'])} | {_pct(c['em_mean'])} | {c['seeds']} |"
            )
        lines.append("")
    comparisons = summary.get("comparisons") or {}
    if any(comparisons.values()):
        lines += [
            "## Paired comparisons",
            "",
            "Test F1 difference a − b (points), paired over the seeds both have; two-sided "
            "paired t-test; training cost a / b.",
            "",
            "| dataset | a | b | seeds | Δ test F1 | p | Δ dev F1 | train cost × |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for ds, pairs in comparisons.items():
            for c in pairs:
                lines.append(
                    f"| {ds} | `{c['a']}` | `{c['b']}` | {','.join(map(str, c['seeds']))} "
                    f"| {_pct(c['f1_diff_mean'], c['f1_diff_std'])} | {_p(c['p_value'])} "
                    f"| {_pct(c['dev_f1_diff_mean'])} "
                    f"| {_ratio(c)} |"
                )
        lines.append("")
    if summary.get("curve"):
        lines += _curve_lines(summary["curve"])
    if summary["decision"] is not None:
        lines += _decision_lines(summary["decision"])
    rt = summary.get("run_time")
    if rt and rt["runs"]:
        lines += [
            "",
            f"Run time: {rt['runs']} runs, {rt['wall_seconds'] / 60:.1f} minutes of wall time "
            "summed over the runs (training with dev scoring, then evaluation; the protocol's "
            f"time when run one after the other) on {'; '.join(rt['machines']) or '?'}.",
        ]
    if command:
        lines += ["", "Produced by:", "", f"    {command}"]
    return "\n".join(lines) + "\n"
