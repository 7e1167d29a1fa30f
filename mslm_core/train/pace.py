"""How long a training run has left, from its own measured pace.

A run has known phases: optional MLM head warm-up, then ``total_steps`` optimiser steps in
epochs, a dev evaluation after every fine-tuning epoch, then the end of the run (dev and test
scored once more with calibration, the relation scorer trained, the bundle written) and, in a
job, the ONNX export. :class:`Pace` measures what this run has done — seconds per step,
seconds per dev evaluation — and prices what is left with them; the phases it has not seen
yet are priced in units of this run's own step time, by ratios measured on the reference run
(benchmarks/results/clinical/first-start.json: the first start on 2 CPU cores), so that a
machine twice as fast is taken as twice as fast everywhere. Nothing is a constant in seconds.

The clock is a parameter: tests/test_pace.py runs whole simulated runs on a fake one.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable

from ..timeleft import Estimate
from .callbacks import Callback
from .state import TrainingRun

#: Seconds of a dev evaluation per dev sentence, in units of the seconds of a training step
#: per training window (an evaluation costs a forward pass at a larger batch and the decoding;
#: a training window a forward and a backward pass). Measured on the reference run.
EVAL_WINDOW_RATIO = 0.30
#: The end of the run (finalize: dev and test predicted, calibration, the bundle written) in
#: dev evaluations' worth of sentences of dev+test; :data:`FINISH_MASKED_LM` more dev
#: evaluations when the run masks (the masked-LM loss on dev, a pass of its own). Fitted on
#: the first start's two models on 2 CPU cores: the plain early model's end took 18 s after a
#: 3.5 s dev evaluation of 800 sentences, 12 s of it before the relation scorer and the export
#: (1,600 scored; benchmarks/results/clinical/first-start-early.json), the MSLM full model's
#: 290 s before the export (16,430 scored; the first start of commit 0b04c4c).
FINISH_RATIO = 1.72
FINISH_MASKED_LM = 2.24
#: The relation scorer's training (mslm_core.relations: three small networks, 60 epochs), in
#: training steps per modifier mention it learns from.
RELATION_STEPS_PER_MODIFIER = 0.005  # a few seconds for MACCROBAT's 4,842 (the same run)
#: The pace is the mean of the latest steps, at most this many: about 5 minutes of the first
#: start on 2 CPU cores, long enough to average a machine's passing spurts and stalls (on 2
#: CPU cores a step's time moves by a fifth from one 10 s to the next), short enough to
#: forget a stage that ran at another pace.
RECENT_STEPS = 1000
#: No estimate during training before this many steps are timed: the first few are no pace
#: (the pace is shown from the first; a run of fewer steps is estimated once they are done).
MIN_STEPS = 20
#: The ONNX export with int8 quantization and its checks, in training steps (5 s for both of
#: the same run's models, at 0.34 s a step).
EXPORT_STEPS = 15.0


class Pace(Callback):
    """A callback that measures the run and estimates the time left (:meth:`estimate`).

    ``export``: a job exports ONNX after training (priced as :data:`EXPORT_STEPS` steps);
    ``clock``: seconds, monotonic. Call :meth:`phase` to say the run has moved past training
    (``exporting``): the time left then counts down from the estimate made for it."""

    def __init__(self, export: bool = False, clock: Callable[[], float] = time.monotonic):
        self.export = export
        self.clock = clock
        self.started = clock()
        self._phase = "preparing"
        self._last: float | None = None  # when the last step ended
        self._elapsed = array("d", [0.0])  # the timed steps' seconds, summed: [i] = first i
        self._eval_seconds: list[float] = []
        self._epoch_ended = False
        self._end_at: float | None = None  # the estimated end, once only the tail is left
        self._run: TrainingRun | None = None
        self._shape: dict[str, int] = {}

    # -- the callback -----------------------------------------------------------------------
    def on_train_begin(self, run: TrainingRun) -> None:
        self._run = run
        st, cfg = run.state, run.config
        self._shape = {
            "batch": cfg.batch_size,
            "dev": _sentences(run, "dev"),
            "test": _sentences(run, "test"),
            "joint_epochs": cfg.epochs,
            "mlm_epochs": cfg.mlm_epochs,
            "steps_per_epoch": st.steps_per_epoch,
            "modifiers": _modifiers(run),
            "masks": int(_masks(cfg.strategy)),
        }
        warm = cfg.mlm_head_warmup_steps and not st.mlm_head_warmed and st.global_step == 0
        self._phase = "warm-up" if warm else "training"
        self._last = None

    def on_step_end(self, run: TrainingRun) -> None:
        now = self.clock()
        if self._last is not None and not self._epoch_ended:
            self._elapsed.append(self._elapsed[-1] + now - self._last)
        self._phase, self._last, self._epoch_ended = "training", now, False

    def on_epoch_end(self, run: TrainingRun) -> None:
        """Runs after the dev evaluation (a default callback, before the caller's): the time
        since the epoch's last step is that evaluation's."""
        now = self.clock()
        evaluated = run.state.history and run.state.history[-1].get("dev_f1") is not None
        if evaluated and self._last is not None:
            self._eval_seconds.append(now - self._last)
        self._last, self._epoch_ended = now, True
        if run.state.epoch >= run.config.total_epochs or run.state.should_stop:
            self._phase = "finishing"
            eta = self._left(run)
            self._end_at = None if eta is None else now + eta

    def phase(self, name: str) -> None:
        """The run moved on: ``exporting`` — the countdown starts again from the export's
        own price (the end of the run may have taken more or less than its estimate)."""
        self._phase = name
        step = self.step_seconds
        if name == "exporting" and self.export and step is not None:
            self._end_at = self.clock() + EXPORT_STEPS * step

    # -- the estimate -----------------------------------------------------------------------
    @property
    def step_seconds(self) -> float | None:
        """The mean of the latest :data:`RECENT_STEPS` steps timed (a stage that ran at another
        pace is forgotten; batches of different lengths average out); none before a step is."""
        timed = len(self._elapsed) - 1
        if timed < 1:
            return None
        window = min(RECENT_STEPS, timed)
        return (self._elapsed[-1] - self._elapsed[-1 - window]) / window

    def eval_seconds(self) -> float | None:
        """A dev evaluation: the last one measured, else priced by the step time."""
        if self._eval_seconds:
            return self._eval_seconds[-1]
        step = self.step_seconds
        if step is None:
            return None
        return EVAL_WINDOW_RATIO * self._shape["dev"] * step / self._shape["batch"]

    def _tail(self) -> float | None:
        """The end of the run and the export, in seconds."""
        step, evaluation = self.step_seconds, self.eval_seconds()
        if step is None or evaluation is None:
            return None
        dev = max(1, self._shape["dev"])
        scored = (dev + self._shape["test"]) / dev
        finish = evaluation * (FINISH_RATIO * scored + FINISH_MASKED_LM * self._shape["masks"])
        relations = RELATION_STEPS_PER_MODIFIER * self._shape["modifiers"] * step
        return finish + relations + (EXPORT_STEPS * step if self.export else 0.0)

    def _left(self, run: TrainingRun) -> float | None:
        step, tail = self.step_seconds, self._tail()
        if step is None or tail is None:
            return None
        st, shape = run.state, self._shape
        steps_left = 0 if st.should_stop else max(0, st.total_steps - st.global_step)
        # dev evaluations still to come: one per fine-tuning epoch not yet evaluated
        evaluated = max(0, st.epoch - shape["mlm_epochs"])
        evals_left = max(0, shape["joint_epochs"] - evaluated) if not st.should_stop else 0
        evaluation = self.eval_seconds() or 0.0
        return steps_left * step + evals_left * evaluation + tail

    def estimate(self) -> Estimate:
        now = self.clock()
        step = self.step_seconds
        if self._end_at is not None:
            eta: float | None = max(0.0, self._end_at - now)
        elif self._run is not None and len(self._elapsed) - 1 >= MIN_STEPS:
            eta = self._left(self._run)
            if eta is not None and self._last is not None:
                eta = max(0.0, eta - (now - self._last))  # the step under way
        else:
            eta = None
        return Estimate(self._phase, now - self.started, None if not step else 1.0 / step, eta)


def _modifiers(run: TrainingRun) -> int:
    """The modifier mentions the relation scorer will learn from: none unless a training
    sentence carries relations (finalize trains no scorer then)."""
    from ..relations import MODIFIERS

    train = run.corpora["train"].sentences
    if not any(s.relations for s in train):
        return 0
    return sum(1 for s in train for m in s.mentions if m.label in MODIFIERS)


def _masks(strategy: str) -> bool:
    """The run masks (its end scores the masked-LM loss on dev)."""
    from ..config import STRATEGIES

    spec = STRATEGIES.get(strategy)
    return spec is not None and spec.masking is not None


def _sentences(run: TrainingRun, split: str) -> int:
    corpus = run.corpora.get(split)
    return 0 if corpus is None else len(corpus.sentences)


def error_of(eta: float, left: float, total: float) -> float:
    """How far an estimate of the time left is from the truth: |eta − left| / left, and in the
    run's last 10 % |eta − left| / (10 % of the run) (seconds off at the very end are no
    large share of anything a user waits for). The goal: at most 0.25 after the first 10 %."""
    return abs(eta - left) / max(left, 0.1 * total)
