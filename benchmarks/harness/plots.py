"""The benchmark's figures (PNG, matplotlib's Agg backend — no display needed):

- ``dev_f1_curves.png`` — mean dev F1 per epoch, per variant (paper Fig. 3);
- ``grid_heatmap.png`` — ELM × BLM heat-maps of dev F1 and test EM (paper Fig. 4);
- ``strategies.png`` — test F1 per variant, honest and reference-leaky (paper Fig. 5);
- ``confidence_examples.png`` — per-word entity probability on a few test sentences,
  baseline vs MSLM variants (paper Fig. 2);
- ``learning_curve.png`` — test F1 by training-set size per variant, and the ``compare``
  pairs' paired differences with their 95 % intervals (protocols with ``NAME@N`` datasets at
  several sizes).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .aggregate import PAIR_SEPARATOR


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _save(fig: Any, path: Path, title: str | None = None) -> Path:
    """Title (if any), lay out, write and close a figure."""
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def plot_dev_curves(summary: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    datasets = summary["datasets"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.2), squeeze=False)
    for ax, (ds, table) in zip(axes[0], datasets.items(), strict=True):
        for label, row in table.items():
            ys = [_nan(v) for v in row["dev_f1_per_epoch"]]
            ax.plot(range(1, len(ys) + 1), ys, marker="o", label=label)
        ax.xaxis.get_major_locator().set_params(integer=True)  # epochs: no 1.2, 1.4, …
        ax.set_title(ds)
        ax.set_xlabel("epoch (two-stage runs: masked-LM epochs have no dev F1)")
        ax.set_ylabel("dev strict F1 (mean over seeds)")
        ax.grid(alpha=0.3)
        if table:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax.transAxes)
    return _save(fig, path, f"{summary['protocol']}: dev F1 per epoch (honest)")


def plot_grid(summary: dict[str, Any], path: Path) -> Path | None:
    grid = summary.get("grid") or {}
    if not grid:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(grid), 2, figsize=(10, 4.2 * len(grid)), squeeze=False)
    for row_axes, (ds, g) in zip(axes, grid.items(), strict=True):
        elms = sorted({c["elm_rate"] for c in g["cells"]})
        blms = sorted({c["blm_rate"] for c in g["cells"]})
        for ax, key, title in (
            (row_axes[0], "dev_f1_mean", "dev F1 (selection)"),
            (row_axes[1], "em_mean", "test EM (honest)"),
        ):
            values = [[math.nan] * len(blms) for _ in elms]
            for c in g["cells"]:
                values[elms.index(c["elm_rate"])][blms.index(c["blm_rate"])] = 100 * c[key]
            im = ax.imshow(values, cmap="viridis", origin="lower", aspect="auto")
            for i in range(len(elms)):
                for j in range(len(blms)):
                    if not math.isnan(values[i][j]):
                        ax.text(
                            j,
                            i,
                            f"{values[i][j]:.1f}",
                            ha="center",
                            va="center",
                            color="white",
                            fontsize=8,
                        )
            ax.set_xticks(range(len(blms)), [f"{b:g}" for b in blms])
            ax.set_yticks(range(len(elms)), [f"{e:g}" for e in elms])
            ax.set_xlabel("BLM rate")
            ax.set_ylabel("ELM rate")
            ax.set_title(f"{ds} — {g['variant']}: {title}")
            fig.colorbar(im, ax=ax)
    return _save(fig, path)


def plot_strategies(summary: dict[str, Any], path: Path) -> Path:
    plt = _pyplot()
    datasets = summary["datasets"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(7 * len(datasets), 4.6), squeeze=False)
    for ax, (ds, table) in zip(axes[0], datasets.items(), strict=True):
        labels = list(table)
        xs = range(len(labels))
        honest = [100 * _nan(table[v]["f1_mean"]) for v in labels]
        honest_err = [100 * _nan(table[v]["f1_std"]) for v in labels]
        leaky = [100 * _nan(table[v]["leaky_f1_mean"]) for v in labels]
        ax.bar(
            [x - 0.2 for x in xs],
            honest,
            0.4,
            yerr=honest_err,
            capsize=3,
            label="honest (unmasked test text)",
        )
        ax.bar(
            [x + 0.2 for x in xs],
            leaky,
            0.4,
            hatch="//",
            alpha=0.6,
            label="reference-leaky (gold-masked test text)",
        )
        ax.set_xticks(list(xs), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("test strict F1 (%)")
        ax.set_title(ds)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path, f"{summary['protocol']}: strategies (mean ± std over seeds)")


def plot_confidences(
    results: list[dict[str, Any]], labels: list[str], dataset: str, path: Path
) -> Path | None:
    """Per-word P(entity) on the example sentences of ``dataset`` (first seed of each label);
    gold entity words in red."""
    by_label: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: r["seed"]):
        if r["dataset"] == dataset and r["label"] in labels and r.get("examples"):
            by_label.setdefault(r["label"], r)
    rows = [lb for lb in labels if lb in by_label]
    if not rows:
        return None
    plt = _pyplot()
    examples = by_label[rows[0]]["examples"]
    fig, axes = plt.subplots(
        len(examples), 1, figsize=(14, (0.5 * len(rows) + 1.6) * len(examples)), squeeze=False
    )
    for ax, k in zip(axes[:, 0], range(len(examples)), strict=True):
        words = examples[k]["words"]
        gold = {j for a, b, _ in examples[k]["gold"] for j in range(a, b)}
        values = [by_label[lb]["examples"][k]["p_entity"] for lb in rows]
        ax.imshow(values, cmap="Reds", vmin=0, vmax=1, aspect="auto")
        for i, vals in enumerate(values):
            for j, v in enumerate(vals):
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if v > 0.6 else "black",
                )
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_xticks(range(len(words)), words, rotation=60, ha="right", fontsize=7)
        for j, tick in enumerate(ax.get_xticklabels()):
            if j in gold:
                tick.set_color("red")
                tick.set_fontweight("bold")
    return _save(
        fig, path, f"{dataset}: P(entity) per word, honest (gold entity words in red; first seed)"
    )


def plot_learning_curve(summary: dict[str, Any], path: Path) -> Path | None:
    curves = summary.get("curve") or {}
    if not curves:
        return None
    plt = _pyplot()
    # one colour per variant in both panels: a paired difference a − b is drawn in a's colour
    # with markers filled in b's
    colour = {label: f"C{i}" for i, label in enumerate(summary["variants"])}
    fig, axes = plt.subplots(2, len(curves), figsize=(6 * len(curves), 8), squeeze=False)
    for k, (folder, curve) in enumerate(curves.items()):
        top, bottom = axes[0][k], axes[1][k]
        for label, points in curve["variants"].items():
            xs = [q["n"] for q in points]
            ys = [100 * _nan(q["test_f1_mean"]) for q in points]
            err = [100 * _nan(q["test_f1_std"]) for q in points]
            top.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label, color=colour[label])
        top.set_title(f"{folder}: test F1 (honest), mean ± std over seeds")
        top.set_ylabel("test strict F1 (%)")
        for pair, points in curve["pairs"].items():
            xs = [q["n"] for q in points]
            ys = [100 * _nan(q["f1_diff_mean"]) for q in points]
            lo = [
                y - 100 * q["f1_diff_ci95"][0] if q["f1_diff_ci95"] else 0
                for y, q in zip(ys, points, strict=True)
            ]
            hi = [
                100 * q["f1_diff_ci95"][1] - y if q["f1_diff_ci95"] else 0
                for y, q in zip(ys, points, strict=True)
            ]
            a, b = pair.split(PAIR_SEPARATOR)
            bottom.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                marker="o",
                markersize=8,
                markerfacecolor=colour[b],
                capsize=3,
                color=colour[a],
                label=pair,
            )
        bottom.axhline(0.0, color="grey", lw=0.8)
        bottom.set_title(f"{folder}: paired Δ test F1, 95 % interval")
        bottom.set_ylabel("Δ test F1 (points)")
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xticks(curve["sizes"], [str(n) for n in curve["sizes"]])
            ax.minorticks_off()  # the log axis's own "2 × 10²" between the sizes
            ax.set_xlim(min(curve["sizes"]) / 1.3, max(curve["sizes"]) * 1.3)
            ax.set_xlabel("training sentences")
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax.transAxes)
    return _save(fig, path, f"{summary['protocol']}: learning curve")


def write_plots(
    summary: dict[str, Any], results: list[dict[str, Any]], out_dir: Path
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        plot_dev_curves(summary, out_dir / "dev_f1_curves.png"),
        plot_strategies(summary, out_dir / "strategies.png"),
    ]
    for extra in (
        plot_grid(summary, out_dir / "grid_heatmap.png"),
        plot_learning_curve(summary, out_dir / "learning_curve.png"),
    ):
        if extra:
            written.append(extra)
    baseline = summary["baseline"]
    candidate = (summary["decision"] or {}).get("candidate")
    for ds, table in summary["datasets"].items():
        others = [lb for lb in table if lb not in (baseline, candidate)]
        labels = [lb for lb in (baseline, candidate, *others) if lb][:4]
        p = plot_confidences(results, labels, ds, out_dir / f"confidence_examples-{ds}.png")
        if p:
            written.append(p)
    return written
