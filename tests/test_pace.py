"""The time left of a training run (mslm_core.train.pace), on simulated runs with a fake
clock: after the first 10 % of a run the estimate stays within ±25 % of the true time left."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from mslm_core.timeleft import Estimate, left_text
from mslm_core.train.pace import (
    EVAL_WINDOW_RATIO,
    EXPORT_STEPS,
    FINISH_MASKED_LM,
    FINISH_RATIO,
    MIN_STEPS,
    RECENT_STEPS,
    RELATION_STEPS_PER_MODIFIER,
    Pace,
    error_of,
)
from mslm_core.train.state import TrainState


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Config:
    batch_size: int = 16
    epochs: int = 3
    mlm_epochs: int = 1
    mlm_head_warmup_steps: int = 200
    strategy: str = "mslm_tapt"

    @property
    def total_epochs(self) -> int:
        return self.mlm_epochs + self.epochs


@dataclass
class Sentence:
    mentions: list[Any] = field(default_factory=list)
    relations: list[Any] = field(default_factory=list)


@dataclass
class Mention:
    label: str


@dataclass
class Corpus:
    sentences: list[Any]


def sentences(n: int, modifiers: int = 0) -> list[Sentence]:
    """``n`` sentences, the first ``modifiers`` with a Dosage tied to something."""
    return [
        Sentence([Mention("Dosage"), Mention("Drug")], [(0, 1)]) if i < modifiers else Sentence()
        for i in range(n)
    ]


@dataclass
class Run:
    config: Config
    corpora: dict[str, Corpus]
    state: TrainState = field(default_factory=TrainState)


@dataclass
class Shape:
    """A run as it goes on a machine: each cost in seconds, as the ratios say, each off by
    its own factor (the estimator knows only the ratios)."""

    # the full clinical model of the first start of 2026-12-04 (first-start.json): 2 CPU
    # cores, MiniLM, batch 16, 1,292 steps an epoch, 4 epochs with the masked-LM one
    step_s: float = 0.35
    train_windows: int = 20_672
    dev: int = 7_179
    test: int = 9_251
    epochs: int = 3
    mlm_epochs: int = 1
    prepare_s: float = 20.0
    warmup_s: float = 37.0
    eval_off: float = 1.0  # the true dev evaluation / what the ratio prices
    finish_off: float = 1.0
    export_off: float = 1.0
    first_epoch_slower: float = 1.0  # caches warming up: the first epoch's steps cost more
    modifiers: int = 4_842  # what the relation scorer learns from (MACCROBAT's)
    relations_off: float = 1.0
    jitter: float = 0.35  # lognormal sigma of a step (batches of different lengths)
    export: bool = True
    masks: bool = True  # MSLM (the end scores the masked-LM loss on dev); False: vanilla
    early_stop_after: int | None = None  # fine-tuning epochs before early stopping


def simulate(shape: Shape, seed: int = 0) -> list[tuple[float, float, float | None]]:
    """Run ``shape`` through a Pace on a fake clock; (elapsed, true time left, estimate)
    after every step, every evaluation and every 5 s of the tail."""
    rng = np.random.default_rng(seed)
    clock = Clock()
    start = clock.now
    config = Config(
        epochs=shape.epochs,
        mlm_epochs=shape.mlm_epochs,
        strategy="mslm_tapt" if shape.masks else "vanilla",
    )
    corpora = {
        "train": Corpus(sentences(shape.train_windows, shape.modifiers)),
        "dev": Corpus(sentences(shape.dev)),
        "test": Corpus(sentences(shape.test)),
    }
    run = Run(config, corpora)
    st = run.state
    st.steps_per_epoch = math.ceil(shape.train_windows / config.batch_size)
    st.total_steps = st.steps_per_epoch * config.total_epochs
    pace = Pace(export=shape.export, clock=clock)
    evaluation = EVAL_WINDOW_RATIO * shape.dev * shape.step_s / config.batch_size
    scored = (shape.dev + shape.test) / shape.dev
    finish = evaluation * (FINISH_RATIO * scored + FINISH_MASKED_LM * shape.masks)
    finish *= shape.finish_off
    finish += RELATION_STEPS_PER_MODIFIER * shape.modifiers * shape.step_s * shape.relations_off
    export = EXPORT_STEPS * shape.step_s * shape.export_off if shape.export else 0.0
    timeline: list[tuple[float, str]] = []  # when each estimate is read

    def read() -> None:
        timeline.append((clock.now, str(pace.estimate().eta_s)))

    clock.now += shape.prepare_s
    pace.on_train_begin(run)
    read()
    clock.now += shape.warmup_s
    stop = False
    for epoch in range(config.total_epochs):
        slower = shape.first_epoch_slower if epoch == 0 else 1.0
        for _ in range(st.steps_per_epoch):
            clock.now += (
                shape.step_s * slower * float(rng.lognormal(-(shape.jitter**2) / 2, shape.jitter))
            )
            st.global_step += 1
            pace.on_step_end(run)
            read()
        joint = epoch >= config.mlm_epochs
        if joint:
            clock.now += evaluation * shape.eval_off
        st.history.append({"dev_f1": 0.5 if joint else None})
        st.epoch += 1
        fine_tuned = epoch + 1 - config.mlm_epochs
        if shape.early_stop_after is not None and fine_tuned >= shape.early_stop_after:
            st.should_stop, stop = True, True
        pace.on_epoch_end(run)
        read()
        if stop:
            break
    end = clock.now + finish + export
    exporting = False
    while clock.now < end:
        clock.now = min(end, clock.now + 5.0)
        if clock.now >= end - export and not exporting:
            clock.now, exporting = end - export, True
            pace.phase("exporting")
        read()
    return [(t - start, end - t, None if e == "None" else float(e)) for t, e in timeline]


def worst_error(points: list[tuple[float, float, float | None]]) -> float:
    """The largest error of the time left after the first 10 % of the run (or the first timed
    step, if later: until then there is no estimate): |estimate − truth| / truth, and in the
    run's last 10 % |estimate − truth| / (10 % of the run) — else any error of seconds at the
    very end would be a large share of what is left. benchmarks/first_start.py judges the
    real run alike (``mslm_core.train.pace.error_of``)."""
    total = points[-1][0]
    first = next(t for t, _, eta in points if eta is not None)
    assert first <= 0.2 * total, "the first estimate comes late"
    judged = [(left, eta) for t, left, eta in points if t >= max(0.1 * total, first)]
    assert all(eta is not None for _, eta in judged), "an estimate went missing"
    return max(error_of(eta, left, total) for left, eta in judged if eta is not None)


SHAPES: dict[str, Shape] = {
    "reference": Shape(),
    "a GPU (40× faster), 10× the data": Shape(
        step_s=0.018, train_windows=90_000, dev=5_000, test=5_000, prepare_s=40.0, warmup_s=1.0
    ),
    "no export (mslm train)": Shape(export=False),
    "evaluations 20 % dearer than priced": Shape(eval_off=1.2),
    "the end 15 % cheaper, export 25 % dearer": Shape(finish_off=0.85, export_off=1.25),
    "the relation scorer 20 % dearer": Shape(relations_off=1.2),
    "a first epoch 15 % slower": Shape(first_epoch_slower=1.15),
    "vanilla, one epoch, small (the early model)": Shape(
        train_windows=4_000,
        dev=800,
        test=800,
        modifiers=1_500,
        epochs=1,
        mlm_epochs=0,
        warmup_s=0.0,
        prepare_s=15.0,
        masks=False,
    ),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_time_left_holds_within_25_percent_after_the_first_10(name: str) -> None:
    points = simulate(SHAPES[name])
    assert worst_error(points) <= 0.25, name


def test_early_stopping_is_not_known_in_advance_but_the_estimate_recovers() -> None:
    """A run that stops early finishes sooner than planned: the estimate is long until the
    stop and right after it (the countdown of the tail)."""
    points = simulate(Shape(epochs=6, early_stop_after=2))
    tail = [(left, eta) for _, left, eta in points[-20:] if left > 0 and eta is not None]
    assert tail and all(abs(eta - left) <= 0.25 * left + 5.0 for left, eta in tail)


def test_no_estimate_before_the_first_steps_are_timed_and_a_countdown_after_training() -> None:
    clock = Clock()
    corpora = {"train": Corpus(sentences(30)), "dev": Corpus(sentences(100))}
    run = Run(Config(epochs=1, mlm_epochs=0, mlm_head_warmup_steps=0), corpora)
    run.state.steps_per_epoch = run.state.total_steps = 30
    pace = Pace(export=True, clock=clock)
    pace.on_train_begin(run)
    assert pace.estimate().eta_s is None and pace.estimate().phase == "training"
    for step in range(1, 31):  # the first step is not timed (it pays for the start)
        clock.now += 1.0
        run.state.global_step += 1
        pace.on_step_end(run)
        assert (pace.estimate().eta_s is None) == (step - 1 < MIN_STEPS), step
    estimate = pace.estimate()
    assert estimate.steps_per_s == pytest.approx(1.0)
    clock.now += 2.0  # the dev evaluation
    run.state.history.append({"dev_f1": 0.1})
    run.state.epoch = 1
    pace.on_epoch_end(run)
    first = pace.estimate()
    assert first.phase == "finishing" and first.eta_s is not None and first.eta_s > 0
    clock.now += 3.0
    assert pace.estimate().eta_s == pytest.approx(max(0.0, first.eta_s - 3.0))  # a countdown
    pace.phase("exporting")  # priced again from its start: EXPORT_STEPS steps of 1 s
    later = pace.estimate()
    assert later.phase == "exporting" and later.eta_s == pytest.approx(EXPORT_STEPS * 1.0)
    assert later.to_json()["elapsed_s"] == pytest.approx(35.0)


def test_the_pace_is_the_mean_of_the_latest_steps() -> None:
    """A stage that ran at another pace is forgotten once RECENT_STEPS steps ran after it."""
    clock = Clock()
    run = Run(Config(epochs=1, mlm_epochs=0, mlm_head_warmup_steps=0), {"train": Corpus([])})
    run.state.steps_per_epoch = run.state.total_steps = 3 * RECENT_STEPS
    pace = Pace(clock=clock)
    pace.on_train_begin(run)
    for seconds in [3.0] * RECENT_STEPS + [1.0] * (RECENT_STEPS // 2):
        clock.now += seconds
        run.state.global_step += 1
        pace.on_step_end(run)
    # the latest RECENT_STEPS: half at 3 s (the first step is never timed), half at 1 s
    assert pace.step_seconds == pytest.approx(2.0, abs=0.01)
    for _ in range(RECENT_STEPS // 2):
        clock.now += 1.0
        run.state.global_step += 1
        pace.on_step_end(run)
    assert pace.step_seconds == pytest.approx(1.0)


def test_the_time_left_reads_the_same_everywhere() -> None:
    assert left_text(None) == "" and left_text("soon") == "" and left_text(True) == ""
    assert left_text(40.4) == "about 40 s left"
    assert left_text(89) == "about 89 s left"
    assert left_text(90) == "about 2 min left"
    assert left_text(12 * 60 + 10) == "about 12 min left"


def test_the_client_reads_every_field_of_the_estimate() -> None:
    """The worker writes Estimate.to_json into a job's progress; the client's JobProgress
    carries each of its fields, read back as written."""
    from dataclasses import fields

    from mslm_client.results import JobProgress

    written = Estimate("training", 12.34, 2.5, 61.0).to_json()
    read = JobProgress.from_dict(written)
    assert set(written) <= {f.name for f in fields(JobProgress)}
    assert {k: getattr(read, k) for k in written} == written
