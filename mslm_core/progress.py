"""The ``mslm train`` progress display: a bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import logging

from .train import Callback

log = logging.getLogger("mslm")


class ProgressCallback(Callback):
    """A progress bar on a terminal, plain log lines otherwise."""

    def __init__(self, interactive: bool):
        self.interactive = interactive
        self.bar = None
        self.every = 50

    def on_train_begin(self, trainer) -> None:
        if self.interactive:
            from tqdm import tqdm

            st = trainer.state
            self.bar = tqdm(total=st.total_steps, initial=st.global_step, unit="step")
            # the bar shows epoch summaries itself; the library's log line would break it
            logging.getLogger("mslm_core.train").setLevel(logging.WARNING)

    def on_step_end(self, trainer) -> None:
        st = trainer.state
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(epoch=st.epoch + 1, loss=f"{st.loss:.4f}")
        elif st.global_step % self.every == 0:
            log.info(
                "step %d/%d epoch %d loss %.4f",
                st.global_step,
                st.total_steps,
                st.epoch + 1,
                st.loss,
            )

    def on_epoch_end(self, trainer) -> None:
        if self.bar is None:
            return  # mslm_core.train logs each epoch
        h = trainer.state.history[-1]
        f1 = "-" if h["dev_f1"] is None else f"{h['dev_f1']:.4f}"
        self.bar.write(
            f"epoch {h['epoch']} ({h['stage']}): loss {h['train_loss']:.4f}, dev F1 {f1}"
        )

    def on_train_end(self, trainer) -> None:
        if self.bar is not None:
            self.bar.close()
