"""Choices a protocol makes while it runs — which variants go on after the screen, which
variant gets the ELM × BLM grid, which grid cell is confirmed. Every choice reads dev scores
only, and is a pure function of the result files, so aggregating later reproduces it."""

from __future__ import annotations

import statistics
from typing import Any

from mslm_core.errors import ConfigError

from .protocol import Protocol, RunSpec, train_config


def mean_dev_f1(results: list[dict[str, Any]]) -> float:
    """Mean over datasets of the mean over seeds of dev strict F1 (datasets weigh alike)."""
    by_ds: dict[str, list[float]] = {}
    for r in results:
        by_ds.setdefault(r["dataset"], []).append(r["dev"]["strict"]["f1"])
    return statistics.mean(statistics.mean(v) for v in by_ds.values())


def screen_ranking(
    protocol: Protocol, results: list[dict[str, Any]]
) -> tuple[list[str], dict[str, float]] | None:
    """The variants that go on after the screen, and every screened variant's mean dev F1.

    ``None`` when the protocol has no screen, or a screen run is still missing (then nothing
    can be chosen yet). The baseline always goes on; of the others, the ``keep`` with the best
    mean dev F1 over the screen seeds (ties: protocol order)."""
    screen = protocol.screen
    if screen is None:
        return None
    seeds = set(screen.seeds)
    scores: dict[str, float] = {}
    for v in protocol.variants:
        runs = [
            r
            for r in results
            if r["label"] == v and r["phase"] == "variants" and r["seed"] in seeds
        ]
        done = {(r["dataset"], r["seed"]) for r in runs}
        if len(done) < len(protocol.datasets) * len(seeds):
            return None
        scores[v] = mean_dev_f1(runs)
    order = list(protocol.variants)
    others = sorted(
        (v for v in order if v != protocol.baseline),
        key=lambda v: (-scores[v], order.index(v)),
    )
    kept = {protocol.baseline, *others[: screen.keep]}
    return [v for v in order if v in kept], scores


def best_variant(
    protocol: Protocol, results: list[dict[str, Any]], among: list[str] | None = None
) -> str:
    """The ELM-BLM variant (the grid varies its rates) with the best mean dev F1, of
    ``among`` (default: every variant)."""
    candidates = [
        v
        for v in (among or protocol.variants)
        if train_config(protocol.settings_for(v)).masking_strategy == "mslm"
    ]
    if not candidates:
        raise ConfigError("grid.variant = 'best' needs at least one ELM-BLM (mslm) variant")
    scores = {v: mean_dev_f1([r for r in results if r["label"] == v]) for v in candidates}
    return max(candidates, key=lambda v: (scores[v], -candidates.index(v)))


def best_cell(results: list[dict[str, Any]]) -> tuple[float, float]:
    """The grid cell with the best mean dev F1 (ties: the first cell run)."""
    cells: dict[tuple[float, float], list[dict[str, Any]]] = {}
    for r in results:
        cells.setdefault((r["cell"]["elm_rate"], r["cell"]["blm_rate"]), []).append(r)
    order = list(cells)
    return max(order, key=lambda c: (mean_dev_f1(cells[c]), -order.index(c)))


def plan(protocol: Protocol, results: list[dict[str, Any]]) -> tuple[list[RunSpec], bool]:
    """The runs the protocol asks for, given the results so far, and whether that list is
    final (``False`` while a choice — the screen, the grid's variant or cell — still waits
    for runs not yet done). The runner runs this plan until it is final and done."""
    done = {_slug(r) for r in results}

    def finished(specs: list[RunSpec]) -> bool:
        return all(s.slug in done for s in specs)

    specs = protocol.variant_runs()
    kept = None
    if protocol.screen is not None:
        ranking = screen_ranking(protocol, results)
        if ranking is None:
            return specs, False
        kept = ranking[0]
        specs = specs + protocol.variant_runs(kept)
    grid = protocol.grid
    if grid is None:
        return specs, True
    variant = grid.variant
    if variant == "best":
        if not finished(specs):
            return specs, False
        variant = best_variant(protocol, results, among=kept)
    grid_specs = protocol.grid_runs(variant)
    specs = specs + grid_specs
    if not grid.confirm:
        return specs, True
    if not finished(grid_specs):
        return specs, False
    slugs = {s.slug for s in grid_specs}
    grid_results = [r for r in results if _slug(r) in slugs]
    return specs + protocol.confirm_runs(variant, best_cell(grid_results)), True


def plan_is_done(protocol: Protocol, results: list[dict[str, Any]]) -> bool:
    specs, final = plan(protocol, results)
    done = {_slug(r) for r in results}
    return final and all(s.slug in done for s in specs)


def _slug(result: dict[str, Any]) -> str:
    """A result's :attr:`RunSpec.slug`."""
    return f"{result['dataset']}/{result['label']}/seed{result['seed']}"
