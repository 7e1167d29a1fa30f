"""Training (``fit``): the loop (``loop.py``), what runs around it as callbacks
(``callbacks.py``: dev evaluation, the weights kept, early stopping, checkpoints, progress;
``pace.py``: the time left), exact checkpoints (``checkpoint.py``), the end of a run
(``finalize.py``: scores, calibration, the bundle) and what each of these sees of the run
(``state.py``)."""

from .callbacks import (
    Callback,
    Checkpointing,
    DevEvaluation,
    EarlyStopping,
    KeepWeights,
    Progress,
)
from .loop import Trainer, TrainingCancelled, load_corpora, train
from .pace import Pace
from .state import FinishingRun, Resumable, TrainingRun, TrainState

__all__ = [
    "Callback",
    "Checkpointing",
    "DevEvaluation",
    "EarlyStopping",
    "FinishingRun",
    "KeepWeights",
    "Pace",
    "Progress",
    "Resumable",
    "TrainState",
    "Trainer",
    "TrainingCancelled",
    "TrainingRun",
    "load_corpora",
    "train",
]
