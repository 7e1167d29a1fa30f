"""Prediction: words or raw text → typed mentions with confidences (docs/method.md §4).

One code path serves dev evaluation during training, ``mslm evaluate`` and annotation, so
they cannot disagree. It never masks its input and never sees gold labels: it receives
words or text only. The numeric work is behind a small backend interface (PyTorch here; the
inference engine adds ONNX Runtime).

One module per job: ``backend.py`` (the backend interface, PyTorch's), ``windows.py`` (text
into sentences and back, chunks of windows, the runs of the backend), ``decoding.py`` (word
tags → spans: argmax or Viterbi, BIO, hyphens), ``confidence.py`` (tag and type
probabilities, temperatures, :class:`RawPredictions` and the scored mentions),
``schedule.py`` (:class:`AnnotationPlan`, ``annotate`` cut into steps for the service) and
``predictor.py`` (:class:`Predictor`, which runs them)."""

from .backend import TorchBackend
from .confidence import RawPredictions
from .predictor import Predictor
from .schedule import AnnotationPlan

__all__ = [
    "AnnotationPlan",
    "Predictor",
    "RawPredictions",
    "TorchBackend",
]
