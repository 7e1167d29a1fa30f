"""What the loop's collaborators see of a training run: its progress (:class:`TrainState`,
which checkpoints carry), what a callback may read (:class:`TrainingRun`), what a checkpoint
saves and restores (:class:`Resumable`) and what the end of a run reads
(:class:`FinishingRun`). :class:`~mslm_core.train.loop.Trainer` is each of these; the
callbacks, ``checkpoint.py`` and ``finalize.py`` know only the part they name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

    from ..collate import MaskingCollator
    from ..config import TrainConfig
    from ..corpus import Corpus, Mention
    from ..features import Window
    from ..model import MSLMModel
    from ..predict.predictor import Predictor
    from ..sources import TrainingData


@dataclass
class TrainState:
    """A run's progress: what callbacks read and set, and what a checkpoint restores."""

    epoch: int = 0  # epochs completed
    step_in_epoch: int = 0  # optimizer steps done in the current epoch
    global_step: int = 0
    total_steps: int = 0
    steps_per_epoch: int = 0
    loss: float | None = None  # running mean over the current epoch
    best_f1: float = -1.0
    best_epoch: int | None = None
    epochs_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    should_stop: bool = False  # set by a callback (cancel) or by early stopping
    stop_reason: str | None = None
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0  # process CPU time of the steps (all threads)
    mlm_head_warmed: bool = False


@dataclass(frozen=True)
class Resumable:
    """What a checkpoint saves and restores, under ``work_dir``: the weights, the optimizer
    and its schedule, the run's state (updated in place) and the RNG, for the configuration
    whose fingerprint is ``fingerprint``."""

    work_dir: Path
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    state: TrainState
    fingerprint: str
    device: str


class TrainingRun(Protocol):
    """A training run as a callback sees it (read-only references; the state is set in
    place)."""

    @property
    def state(self) -> TrainState: ...
    @property
    def config(self) -> TrainConfig: ...
    @property
    def work_dir(self) -> Path: ...
    @property
    def model(self) -> MSLMModel: ...
    @property
    def tokenizer(self) -> PreTrainedTokenizerBase: ...
    @property
    def types(self) -> list[str]: ...
    @property
    def device(self) -> str: ...
    @property
    def predictor(self) -> Predictor: ...
    @property
    def corpora(self) -> dict[str, Corpus]: ...
    def styles_of(self, split: str) -> list[str] | None: ...
    def score(
        self,
        split: str,
        predicted: list[list[Mention]],
        total_nll: float | None = None,
        n_masked: int = 0,
    ) -> dict[str, Any]: ...
    def resumable(self) -> Resumable: ...


class FinishingRun(TrainingRun, Protocol):
    """A training run as its end sees it: the callbacks' view, and what the bundle's
    manifest and the dev perplexity read."""

    @property
    def data(self) -> TrainingData: ...
    @property
    def dev_windows(self) -> list[Window]: ...
    @property
    def collator(self) -> MaskingCollator: ...
    @property
    def output(self) -> Path: ...
    @property
    def overwrite(self) -> bool: ...
    @property
    def auto_choice(self) -> dict[str, Any] | None: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def encoder_info(self) -> dict[str, str | bool]: ...
    @property
    def masking_info(self) -> dict[str, Any]: ...
    def serving_manifest(self) -> dict[str, Any]: ...
