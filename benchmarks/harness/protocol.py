"""Benchmark protocols: a TOML file that declares every training run of a study.

A protocol names its datasets (directories under a data root, each with train/dev/test
splits), its seeds, the training settings shared by every run (``[train]``, any
:class:`~mslm_core.config.TrainConfig` field) and its *variants* (``[variants.NAME]``, the
fields that differ). Runs are the product dataset × variant × seed. An optional ``[grid]``
adds the ELM × BLM grid of docs/method.md §1 for one variant (or for the variant with the best
mean dev F1, ``variant = "best"``) and, with ``confirm = true``, re-runs the grid cell with
the best mean dev F1 on every seed. An optional ``[screen]`` makes a long study affordable by
successive halving: every variant runs on the screen seeds first, then only the baseline and
the ``keep`` variants with the best mean dev F1 go on to the other seeds (and only they are
candidates for the grid). Selection only ever reads dev scores.

Example::

    name = "cpu-small"
    datasets = ["NCBI-disease-IOB", "BC5CDR-chem-IOB"]
    seeds = [1, 2, 3]
    baseline = "vanilla"

    [train]
    base_model = "minilm"
    epochs = 3

    [variants.vanilla]
    strategy = "vanilla"

    [variants.mslm]
    strategy = "mslm"
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mslm_core.config import BASE_DEFAULTS, TrainConfig
from mslm_core.errors import ConfigError

# Fields a protocol may not set: the harness fills them in per run.
_PER_RUN = {"train", "dev", "test", "seed", "device"}
_TOP_LEVEL = {
    "name",
    "description",
    "datasets",
    "seeds",
    "baseline",
    "leaky",
    "examples",
    "train",
    "variants",
    "grid",
    "screen",
    "compare",
    "decision",
}
_GRID_KEYS = {"variant", "elm_rate", "blm_rate", "seeds", "datasets", "confirm"}
_SCREEN_KEYS = {"seeds", "keep"}
BY_SIZE = "by-size"  # decision: a default per training-set size, from a learning curve
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class RunSpec:
    """One training run. ``label`` names what is compared: the variant, or for a grid cell
    ``variant@elm<E>-blm<B>``. ``settings`` are the TrainConfig fields of the run (shared
    settings, then the variant's, then the grid cell's); the seed and paths come later."""

    dataset: str
    label: str
    variant: str
    seed: int
    settings: dict[str, Any]
    phase: str  # "variants", "grid" or "confirm"
    cell: tuple[float, float] | None = None

    @property
    def slug(self) -> str:
        """Relative path of the run's result file (without ``.json``)."""
        return f"{self.dataset}/{self.label}/seed{self.seed}"


def cell_label(variant: str, elm: float, blm: float) -> str:
    return f"{variant}@elm{elm:g}-blm{blm:g}"


@dataclass
class GridSpec:
    variant: str  # a variant name, or "best" (best mean dev F1 of the variants)
    elm_rate: list[float]
    blm_rate: list[float]
    seeds: list[int]
    confirm: bool = True
    datasets: list[str] | None = None  # the grid's datasets (default: all); confirm uses all


@dataclass
class ScreenSpec:
    seeds: list[int]  # every variant runs on these first
    keep: int  # then the baseline and this many others go on to the remaining seeds


@dataclass
class Protocol:
    name: str
    datasets: list[str]
    seeds: list[int]
    train: dict[str, Any]
    variants: dict[str, dict[str, Any]]
    baseline: str = "vanilla"
    description: str = ""
    leaky: bool = True  # also score the research code's gold-masked protocol (labelled)
    examples: int = 3  # test sentences whose per-word confidences are kept (Fig. 2)
    grid: GridSpec | None = None
    screen: ScreenSpec | None = None
    # pairs of variants compared run by run in the summary, beside each against the baseline
    compare: list[tuple[str, str]] = field(default_factory=list)
    # whether the summary decides the default strategy: one for every size (True), or one per
    # training-set size from a learning curve (BY_SIZE: NAME@N datasets at several N)
    decision: bool | str = True  # True, False or BY_SIZE
    path: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    # -- runs -------------------------------------------------------------------------------
    def settings_for(self, variant: str, cell: tuple[float, float] | None = None) -> dict[str, Any]:
        settings = {**self.train, **self.variants[variant]}
        if cell is not None:
            settings.update(elm_rate=cell[0], blm_rate=cell[1])
        return settings

    def variant_runs(self, kept: list[str] | None = None) -> list[RunSpec]:
        """Seed by seed: a protocol cut short has every variant on the same seeds, which is
        what a paired comparison needs. With a screen: the screen seeds for every variant,
        or, given the variants ``kept`` after the screen, the other seeds for those."""
        seeds, variants = self.seeds, list(self.variants)
        if self.screen is not None:
            if kept is None:
                seeds = self.screen.seeds
            else:
                seeds = [s for s in self.seeds if s not in self.screen.seeds]
                variants = [v for v in variants if v in kept]
        return [
            RunSpec(ds, v, v, seed, self.settings_for(v), "variants")
            for seed in seeds
            for ds in self.datasets
            for v in variants
        ]

    def grid_runs(self, variant: str) -> list[RunSpec]:
        """The ELM × BLM cells of ``variant`` on the grid seeds. A cell the variant cannot
        train (ELM 1.0 with ``detect_ignore_masked``: no entity token left to detect) is
        left out."""
        if self.grid is None:
            return []
        cells = []
        for elm in self.grid.elm_rate:
            for blm in self.grid.blm_rate:
                try:
                    TrainConfig.from_dict(self.settings_for(variant, (elm, blm)))
                except ConfigError:
                    continue
                cells.append((elm, blm))
        return [
            RunSpec(
                ds,
                cell_label(variant, *cell),
                variant,
                seed,
                self.settings_for(variant, cell),
                "grid",
                cell,
            )
            for ds in self.grid.datasets or self.datasets
            for cell in cells
            for seed in self.grid.seeds
        ]

    def confirm_runs(self, variant: str, cell: tuple[float, float]) -> list[RunSpec]:
        """The selected grid cell on every protocol seed (runs the grid already did are the
        same runs: same label, same seed, same result file)."""
        label = cell_label(variant, *cell)
        return [
            RunSpec(ds, label, variant, seed, self.settings_for(variant, cell), "confirm", cell)
            for ds in self.datasets
            for seed in self.seeds
        ]


# Variants whose "strategy" is a baseline the harness runs itself, not our trainer.
HARNESS_BASELINES = ("hf-token-classification",)
_SIZED = re.compile(r"^(?P<folder>[A-Za-z0-9][A-Za-z0-9_.-]*)@(?P<n>[1-9][0-9]*)$")


def is_harness_baseline(settings: dict[str, Any]) -> bool:
    return settings.get("strategy") in HARNESS_BASELINES


def dataset_folder(name: str) -> str:
    """The folder of a protocol dataset: ``NAME``, or ``NAME@N`` (its first ``N`` training
    sentences; dev and test whole)."""
    m = _SIZED.match(name)
    return m["folder"] if m else name


def dataset_size(name: str) -> int | None:
    """``N`` of ``NAME@N`` (None: the whole training split)."""
    m = _SIZED.match(name)
    return int(m["n"]) if m else None


def dataset_settings(name: str) -> dict[str, Any]:
    """The training settings a dataset name implies (``NAME@N``: ``max_train_sentences``)."""
    m = _SIZED.match(name)
    return {"max_train_sentences": int(m["n"])} if m else {}


def train_config(settings: dict[str, Any]) -> TrainConfig:
    """The checked :class:`TrainConfig` of a run's settings. A harness baseline reads a few
    of them (epochs, batch size, learning rate, …), checked as a vanilla run's would be."""
    if is_harness_baseline(settings):
        settings = {**settings, "strategy": "vanilla"}
    return TrainConfig.from_dict(dict(settings))


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _check_settings(where: str, settings: dict[str, Any]) -> None:
    known = {f.name for f in fields(TrainConfig)}
    for key, value in settings.items():
        if isinstance(value, dict):
            raise _fail(
                f"{where}.{key}",
                "is a table, not a setting (quote a variant name that holds a dot: "
                '[variants."a.b"])',
            )
        if key in _PER_RUN:
            raise _fail(f"{where}.{key}", "is set per run by the harness; remove it")
        if key not in known:
            raise _fail(f"{where}.{key}", "unknown training setting")
    try:
        train_config(settings)
    except ConfigError as exc:
        raise _fail(where, str(exc)) from exc


def _table(where: str, value: Any, keys: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "must be a table")
    bad = sorted(set(value) - keys)
    if bad:
        raise _fail(f"{where}.{bad[0]}", "unknown key; valid: " + ", ".join(sorted(keys)))
    return value


def _float_list(where: str, value: Any) -> list[float]:
    if not isinstance(value, list) or not value:
        raise _fail(where, "must be a non-empty list of numbers")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
            raise _fail(where, f"{v!r} is not a rate in [0, 1]")
        out.append(float(v))
    return out


def _seed_list(where: str, value: Any) -> list[int]:
    if not isinstance(value, list) or not value:
        raise _fail(where, "must be a non-empty list of integers")
    if any(isinstance(s, bool) or not isinstance(s, int) for s in value):
        raise _fail(where, "must hold integers only")
    if len(set(value)) != len(value):
        raise _fail(where, "repeats a seed")
    return list(value)


def parse_protocol(data: dict[str, Any], where: str = "protocol") -> Protocol:
    """A :class:`Protocol` from parsed TOML; errors name the offending key."""
    unknown = sorted(set(data) - _TOP_LEVEL)
    if unknown:
        raise _fail(f"{where}.{unknown[0]}", "unknown key; valid: " + ", ".join(sorted(_TOP_LEVEL)))
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(f"{where}.name", "a name of letters, digits, '-', '_' or '.' is required")
    datasets = data.get("datasets")
    if (
        not isinstance(datasets, list)
        or not datasets
        or not all(isinstance(d, str) and (_NAME.match(d) or _SIZED.match(d)) for d in datasets)
    ):
        raise _fail(
            f"{where}.datasets",
            "must be a non-empty list of dataset directory names (NAME@N: its first N "
            "training sentences)",
        )
    seeds = _seed_list(f"{where}.seeds", data.get("seeds"))
    train = data.get("train", {})
    if not isinstance(train, dict):
        raise _fail(f"{where}.train", "must be a table of training settings")
    _check_settings(f"{where}.train", train)
    variants = data.get("variants")
    if not isinstance(variants, dict) or not variants:
        raise _fail(f"{where}.variants", "at least one [variants.NAME] table is required")
    for vname, settings in variants.items():
        if not _NAME.match(vname) or "@" in vname:
            raise _fail(f"{where}.variants.{vname}", "invalid variant name")
        if not isinstance(settings, dict):
            raise _fail(f"{where}.variants.{vname}", "must be a table of training settings")
        _check_settings(f"{where}.variants.{vname}", {**train, **settings})
    baseline = data.get("baseline", "vanilla")
    if baseline not in variants:
        raise _fail(f"{where}.baseline", f"{baseline!r} is not one of the variants")
    examples = data.get("examples", 3)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise _fail(f"{where}.examples", "must be a non-negative integer")
    leaky = data.get("leaky", True)
    if not isinstance(leaky, bool):
        raise _fail(f"{where}.leaky", "must be true or false")
    grid = None
    if "grid" in data:
        g = _table(f"{where}.grid", data["grid"], _GRID_KEYS)
        variant = g.get("variant", "best")
        if variant != "best" and variant not in variants:
            raise _fail(f"{where}.grid.variant", f"{variant!r} is neither 'best' nor a variant")
        grid_datasets = g.get("datasets")
        if grid_datasets is not None and (
            not isinstance(grid_datasets, list)
            or not grid_datasets
            or any(d not in datasets for d in grid_datasets)
        ):
            raise _fail(f"{where}.grid.datasets", "must be a non-empty list of the datasets")
        grid = GridSpec(
            variant=variant,
            elm_rate=_float_list(f"{where}.grid.elm_rate", g.get("elm_rate")),
            blm_rate=_float_list(f"{where}.grid.blm_rate", g.get("blm_rate")),
            seeds=_seed_list(f"{where}.grid.seeds", g.get("seeds", seeds[:1])),
            confirm=bool(g.get("confirm", True)),
            datasets=None if grid_datasets is None else list(grid_datasets),
        )
    screen = None
    if "screen" in data:
        sc = _table(f"{where}.screen", data["screen"], _SCREEN_KEYS)
        screen_seeds = _seed_list(f"{where}.screen.seeds", sc.get("seeds", seeds[:1]))
        if any(s not in seeds for s in screen_seeds):
            raise _fail(f"{where}.screen.seeds", "must be some of the protocol's seeds")
        keep = sc.get("keep")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise _fail(f"{where}.screen.keep", "must be a positive integer")
        screen = ScreenSpec(seeds=screen_seeds, keep=keep)
    compare = data.get("compare", [])
    if not isinstance(compare, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(v in variants for v in pair)
        for pair in compare
    ):
        raise _fail(f"{where}.compare", "must be a list of [variant, variant] pairs")
    decision = data.get("decision", True)
    if not isinstance(decision, bool) and decision != BY_SIZE:
        raise _fail(f"{where}.decision", f'must be true, false or "{BY_SIZE}"')
    if decision == BY_SIZE and len({dataset_size(d) for d in datasets} - {None}) < 2:
        raise _fail(
            f"{where}.decision", f'"{BY_SIZE}" needs datasets at two sizes or more (NAME@N)'
        )
    description = data.get("description", "")
    return Protocol(
        name=name,
        datasets=list(datasets),
        seeds=seeds,
        train=dict(train),
        variants={k: dict(v) for k, v in variants.items()},
        baseline=baseline,
        description=str(description),
        leaky=leaky,
        examples=examples,
        grid=grid,
        screen=screen,
        compare=[(a, b) for a, b in compare],
        decision=decision,
        raw=data,
    )


def with_base_model(data: dict[str, Any], base_model: str) -> dict[str, Any]:
    """A protocol's TOML table with ``base_model`` the encoder of every run."""
    out: dict[str, Any] = json.loads(json.dumps(data))  # a deep copy of plain TOML values
    out.setdefault("train", {})["base_model"] = base_model
    for settings in (out.get("variants") or {}).values():
        if isinstance(settings, dict) and "base_model" in settings:
            settings["base_model"] = base_model
    return out


def smoke_protocol(data: dict[str, Any]) -> dict[str, Any]:
    """A protocol's TOML table cut to a smoke run (CI: ``bench.py run --smoke`` with a tiny
    encoder and tiny corpora): every variant and every phase (screen, grid, confirm) still
    runs, on the first dataset (and, for a learning curve, its next size) and the first seed,
    for one epoch (two for a variant that trains longer than the others), with at most two
    grid cells. Named ``NAME-smoke``, so that its results never land on the protocol's own."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    out["name"] = f"{data.get('name')}-smoke"
    datasets = list(data.get("datasets") or [])[:1]
    if datasets and dataset_size(datasets[0]) is not None:  # a learning curve: two sizes
        folder = dataset_folder(datasets[0])
        datasets += [
            d
            for d in data["datasets"][1:]
            if dataset_folder(d) == folder and dataset_size(d) is not None
        ][:1]
    seeds = list(data.get("seeds") or [])[:1]
    out["datasets"], out["seeds"] = datasets, seeds
    train = out.setdefault("train", {})
    epochs = train.get("epochs", BASE_DEFAULTS["epochs"])
    train["epochs"] = 1
    for settings in (out.get("variants") or {}).values():
        if not isinstance(settings, dict):
            continue  # parse_protocol names the error
        if "epochs" in settings:
            settings["epochs"] = 2 if settings["epochs"] > epochs else 1
        if "tapt_epochs" in settings:
            settings["tapt_epochs"] = min(1, settings["tapt_epochs"])
    if isinstance(out.get("screen"), dict):
        out["screen"]["seeds"] = seeds
    grid = out.get("grid")
    if isinstance(grid, dict):
        grid["seeds"] = seeds
        if "datasets" in grid:
            grid["datasets"] = [d for d in grid["datasets"] if d in datasets] or datasets
        if isinstance(grid.get("elm_rate"), list) and grid["elm_rate"]:
            grid["elm_rate"] = list(dict.fromkeys([grid["elm_rate"][0], grid["elm_rate"][-1]]))
        if isinstance(grid.get("blm_rate"), list) and grid["blm_rate"]:
            grid["blm_rate"] = grid["blm_rate"][-1:]
    return out


def load_protocol(path: str | Path) -> Protocol:
    """Read a protocol TOML file, or the ``protocol.json`` a results folder keeps of the
    protocol its runs followed (to re-aggregate them after the TOML has changed). Errors
    name the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: protocol file not found") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # TOML and JSON errors
        raise ConfigError(f"{path}: cannot read protocol: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a protocol is a table of keys, not {type(data).__name__}")
    protocol = parse_protocol(data, where=str(path))
    protocol.path = str(path)
    return protocol
