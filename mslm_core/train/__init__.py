"""Training (``fit``): the loop (``loop.py``), what runs around it as callbacks
(``callbacks.py``: dev evaluation, the weights kept, early stopping, checkpoints, progress),
exact checkpoints (``checkpoint.py``) and the end of a run (``finalize.py``: scores,
calibration, the bundle)."""

from .callbacks import (
    Callback,
    Checkpointing,
    DevEvaluation,
    EarlyStopping,
    KeepWeights,
    Progress,
)
from .loop import Trainer, TrainingCancelled, TrainState, load_corpora, train

__all__ = [
    "Callback",
    "Checkpointing",
    "DevEvaluation",
    "EarlyStopping",
    "KeepWeights",
    "Progress",
    "TrainState",
    "Trainer",
    "TrainingCancelled",
    "load_corpora",
    "train",
]
