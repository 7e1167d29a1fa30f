"""What happens around the training steps, as callbacks: dev evaluation, the choice of the
weights kept, early stopping, checkpoints and progress. The loop (``loop.py``) only runs steps
and epochs; :meth:`~mslm_core.train.loop.Trainer.default_callbacks` lists these in order.

A callback sees the run as :class:`~mslm_core.train.state.TrainingRun` declares it; setting
``run.state.should_stop`` stops the run at the next step (the worker uses it for cancel,
early stopping for itself).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from .state import TrainingRun

log = logging.getLogger("mslm_core.train")


class Callback:
    """Hooks; ``run.state`` has the progress. ``on_epoch_end`` runs once an epoch is
    counted (``state.epoch`` is the number of epochs done, ``state.history[-1]`` its entry)."""

    def on_train_begin(self, run: TrainingRun) -> None: ...
    def on_step_end(self, run: TrainingRun) -> None: ...
    def on_epoch_end(self, run: TrainingRun) -> None: ...
    def on_train_end(self, run: TrainingRun) -> None: ...


class DevEvaluation(Callback):
    """After each fine-tuning epoch, strict F1 on dev through the serving prediction path
    (unmasked words, never the gold) — with several corpora, the macro F1 over their dev sets
    (``evaluate.selection_f1``), and each corpus's in ``dev_sources``; logs the epoch. The
    masked-LM stage of a two-stage run has untrained heads: no dev score there."""

    def on_epoch_end(self, run: TrainingRun) -> None:
        from ..evaluate import predict_mentions, selection_f1

        st, entry = run.state, run.state.history[-1]
        if entry["stage"] != "mlm":
            started = time.perf_counter()
            predicted = predict_mentions(run.predictor, run.corpora["dev"], run.styles_of("dev"))
            dev = run.score("dev", predicted)
            entry.update(
                dev_f1=selection_f1(dev),
                dev_precision=dev["strict"]["precision"],
                dev_recall=dev["strict"]["recall"],
            )
            if "sources" in dev:
                entry["dev_sources"] = {k: r["strict"]["f1"] for k, r in dev["sources"].items()}
            entry["seconds"] += time.perf_counter() - started
        log.info(
            "epoch %d/%d (%s) loss %.4f dev strict F1 %s",
            st.epoch,
            run.config.total_epochs,
            entry["stage"],
            entry["train_loss"],
            "-" if entry["dev_f1"] is None else f"{entry['dev_f1']:.4f}",
        )


class KeepWeights(Callback):
    """The weights the bundle gets: those of the epoch with the best dev F1 (``best-dev``) or
    of the last epoch (``last``), written to ``work_dir/best``."""

    def __init__(self, select: str):
        self.select = select

    def on_epoch_end(self, run: TrainingRun) -> None:
        from .checkpoint import BEST, save_weights

        st = run.state
        f1 = st.history[-1]["dev_f1"]
        if f1 is None:
            return
        if f1 > st.best_f1 or self.select == "last":
            st.best_f1, st.best_epoch, st.epochs_without_gain = f1, st.epoch, 0
            save_weights(run.model, run.work_dir / BEST)
        else:
            st.epochs_without_gain += 1


class EarlyStopping(Callback):
    """Stop after ``patience`` epochs without a dev F1 gain (the bundle keeps the best)."""

    def __init__(self, patience: int):
        self.patience = patience

    def on_epoch_end(self, run: TrainingRun) -> None:
        st = run.state
        if st.epochs_without_gain >= self.patience:
            st.should_stop, st.stop_reason = True, "early_stopping"


class Checkpointing(Callback):
    """A checkpoint at every epoch end, and every ``every`` steps when set, from which
    ``fit(resume=True)`` continues exactly (:mod:`.checkpoint`). Runs after the other
    callbacks, so that what they recorded is in it; a step at which the run is being stopped
    is not checkpointed."""

    def __init__(self, every: int = 0):
        self.every = every

    def on_step_end(self, run: TrainingRun) -> None:
        from .checkpoint import save_checkpoint

        st = run.state
        if self.every and not st.should_stop and st.global_step % self.every == 0:
            save_checkpoint(run.resumable())

    def on_epoch_end(self, run: TrainingRun) -> None:
        from .checkpoint import save_checkpoint

        save_checkpoint(run.resumable())


class Progress(Callback):
    """``mslm train``'s display: a progress bar on a terminal, plain log lines otherwise; with
    ``pace`` (a :class:`~mslm_core.train.pace.Pace` ahead of it), the time left."""

    def __init__(self, interactive: bool, every: int = 50, pace: Any = None):
        self.interactive = interactive
        self.every = every
        self.pace = pace
        self.bar: Any = None

    def _left(self) -> str:
        from ..timeleft import left_text

        return "" if self.pace is None else left_text(self.pace.estimate().eta_s)

    def on_train_begin(self, run: TrainingRun) -> None:
        if self.interactive:
            from tqdm import tqdm

            st = run.state
            self.bar = tqdm(total=st.total_steps, initial=st.global_step, unit="step")
            # the bar shows epoch summaries itself; the epoch log line would break it
            log.setLevel(logging.WARNING)

    def on_step_end(self, run: TrainingRun) -> None:
        st = run.state
        if self.bar is not None:
            self.bar.update(1)
            left = self._left()
            shown = [f"epoch={st.epoch + 1}", f"loss={st.loss:.4f}", *([left] if left else [])]
            self.bar.set_postfix_str(", ".join(shown))
        elif st.global_step % self.every == 0:
            left = self._left()
            logging.getLogger("mslm").info(
                "step %d/%d epoch %d loss %.4f%s",
                st.global_step,
                st.total_steps,
                st.epoch + 1,
                st.loss,
                f", {left}" if left else "",
            )

    def on_epoch_end(self, run: TrainingRun) -> None:
        if self.bar is None:
            return  # DevEvaluation logs each epoch
        h = run.state.history[-1]
        f1 = "-" if h["dev_f1"] is None else f"{h['dev_f1']:.4f}"
        self.bar.write(
            f"epoch {h['epoch']} ({h['stage']}): loss {h['train_loss']:.4f}, dev F1 {f1}"
        )

    def on_train_end(self, run: TrainingRun) -> None:
        if self.bar is not None:
            self.bar.close()
