"""The inference engine: raw text in, typed entities with character offsets and confidences
out, from a bundle, with ONNX Runtime (CUDA provider when there is one, CPU otherwise) or
PyTorch when the bundle has no ONNX export.

    extractor = EntityExtractor.from_bundle("runs/ncbi-disease")
    extractor.annotate(["Cisplatin caused renal failure."])
    # [[Entity(start=0, end=9, text='Cisplatin', type='Chemical', confidence=0.97, ...), ...]]

Texts of any length and any Unicode: each is cut into sentences, each sentence into
overlapping windows of ``max_length`` subwords (never truncated); ``start``/``end`` index the
given Python string and ``text == input[start:end]``. Work is sorted by length and padded per
batch only; the session is created once and reused. The ONNX path imports neither ``torch``
nor ``transformers``. Nothing here masks its input or sees a gold label.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .bundle import check_style, predictor_options, styles_of, verify_bundle
from .errors import ConfigError, InferenceError
from .features import WindowBuilder
from .predict.predictor import Predictor
from .predict.schedule import AnnotationPlan
from .relations import RelationScorer
from .tokenizer import RustWordTokenizer
from .types import Entity, ScoredMention

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")
PRECISIONS = ("auto", "fp32", "int8")
DEVICES = ("auto", "cpu", "cuda")


class OnnxBackend:
    """Two ONNX Runtime sessions (serving graph, classifier), created once, thread-safe."""

    def __init__(
        self,
        model_path: Path,
        classifier_path: Path,
        providers: list[str],
        intra_op_threads: int = 0,
        inter_op_threads: int = 0,
        spinning: bool = True,
    ):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads  # 0: ONNX Runtime's default (cores)
        options.inter_op_num_threads = inter_op_threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if not spinning:
            # idle pool threads sleep instead of spinning: the CPU goes to the web server
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(model_path), options, providers=providers)
        small = ort.SessionOptions()
        small.intra_op_num_threads = 1
        small.log_severity_level = 3
        self.classifier = ort.InferenceSession(
            str(classifier_path), small, providers=["CPUExecutionProvider"]
        )
        self.provider = self.session.get_providers()[0]

    def features(
        self, input_ids: npt.NDArray[np.int64], attention_mask: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        probs: npt.NDArray[np.float32]
        feats: npt.NDArray[np.float32]
        probs, feats = self.session.run(
            ["detection_probs", "type_features"],
            {"input_ids": input_ids, "attention_mask": attention_mask},
        )
        return probs, feats

    def classify(self, pooled: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        probs: npt.NDArray[np.float32] = self.classifier.run(None, {"pooled": pooled})[0]
        return probs


@dataclass(frozen=True)
class EngineInfo:
    """What serves a bundle: ``backend`` onnx|torch, ``precision`` fp32|int8, ``provider``
    (ONNX Runtime execution provider, or the torch device)."""

    model_id: str
    backend: str
    precision: str
    provider: str
    types: tuple[str, ...]
    max_length: int
    # (detection, type) temperatures from the bundle's calibration; (1, 1): uncalibrated
    temperatures: tuple[float, float] = (1.0, 1.0)


def _choose_providers(device: str) -> list[str]:
    import onnxruntime as ort

    available = ort.get_available_providers()
    cuda = "CUDAExecutionProvider" in available
    if device == "cuda" and not cuda:
        raise InferenceError(
            "device cuda was asked for but ONNX Runtime has no CUDA provider "
            f"(available: {', '.join(available)}); install onnxruntime-gpu"
        )
    if device != "cpu" and cuda:
        _preload_cuda_libraries(ort)
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _preload_cuda_libraries(ort: Any) -> None:
    """The GPU worker image has no CUDA base: the CUDA runtime and cuDNN come as PyTorch's
    nvidia-* wheels, and onnxruntime-gpu (1.21+) loads them from there before the first CUDA
    session. Where they are missing, the session falls back to the CPU and says so."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:  # a missing wheel: the CUDA provider reports it when it loads
        log.warning("onnxruntime could not preload the CUDA libraries: %s", exc)


def _check(name: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise InferenceError(f"{name} must be one of {', '.join(valid)}, got {value!r}")


def _relation_scorer(path: Path) -> RelationScorer | None:
    """The bundle's relation scorer; None when it has none, or one this version cannot read
    (the entities are served all the same, and the log says why its ties are not)."""
    if not RelationScorer.present(path):
        return None
    try:
        return RelationScorer.load(path)
    except ConfigError as exc:
        log.warning("%s: its relation scorer is not served: %s", path.name, exc)
        return None


class EntityExtractor:
    """Entities from raw text with one bundle: the model's own, before any threshold, context
    or concept (:class:`~mslm_core.pipeline.AnnotationPipeline` adds those). Build it with
    :meth:`from_bundle`."""

    def __init__(
        self,
        predictor: Predictor,
        manifest: dict[str, Any],
        info: EngineInfo,
        relations: RelationScorer | None = None,
    ):
        self.predictor = predictor
        self.manifest = manifest
        self.info = info
        self.relations = relations  # the bundle's relation scorer (None: it has none)

    @property
    def id(self) -> str:
        return self.info.model_id

    @classmethod
    def from_bundle(
        cls,
        path: str | Path,
        *,
        backend: str = "auto",
        precision: str = "auto",
        device: str = "auto",
        intra_op_threads: int = 0,
        inter_op_threads: int = 0,
        batch_size: int | None = None,
        max_batch_tokens: int = 8192,
        spinning: bool = True,
        style: str | None = None,
    ) -> EntityExtractor:
        """Load a bundle (every checksum verified first).

        ``backend``: ``onnx`` needs an export (``mslm export``); ``auto`` takes ONNX when the
        bundle has it, PyTorch otherwise. ``precision``: ``auto`` takes int8 on CPU when the
        bundle has it, fp32 otherwise. ``device``: ``auto`` takes CUDA when available.
        Thread counts of 0 take the runtime's own default (the service passes its settings'
        ``intra_op_threads`` / ``inter_op_threads``). ``batch_size``: windows per run; see
        :func:`_default_batch_size`. ``spinning=False`` lets idle ONNX Runtime threads sleep
        (a server sharing its cores with request handling). ``style``: a model trained with
        ``source_styles`` reads text as this corpus's (one of its manifest's ``styles``, or
        ``""``, none, when it was trained with a ``blank_style``; None: its ``style``, the
        first corpus's or, with a blank style, none)."""
        _check("backend", backend, BACKENDS)
        _check("precision", precision, PRECISIONS)
        _check("device", device, DEVICES)
        path = Path(path)
        manifest = verify_bundle(path)
        onnx = manifest.get("onnx") or {}
        if backend == "auto":
            backend = "onnx" if onnx and _has_onnxruntime() else "torch"
        workers = 1
        max_length = int(manifest.get("max_length", 128))
        types = list(manifest["types"])
        backend_obj: Any
        if backend == "onnx":
            backend_obj, precision, workers = _onnx_backend(
                path, onnx, device, precision, (intra_op_threads, inter_op_threads), spinning
            )
            provider = backend_obj.provider
            tokenizer: Any = RustWordTokenizer.from_directory(path)
        else:
            if precision == "int8":
                raise InferenceError("int8 needs the ONNX backend (mslm export --quantize int8)")
            precision = "fp32"
            backend_obj, provider, tokenizer = _torch_backend(
                path, manifest, device, intra_op_threads
            )
        if batch_size is None:
            batch_size = _default_batch_size(precision, provider)
        options = predictor_options(manifest)
        if style is not None:
            options["style"] = check_style(manifest, style)
        predictor = Predictor(
            backend_obj,
            WindowBuilder(tokenizer, max_length, styles=styles_of(manifest)),
            types,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
            pad_id=tokenizer.pad_token_id,
            workers=workers,
            **options,
        )
        calibration = manifest.get("calibration") or {}
        predictor.temperatures = (
            float(calibration.get("detection_temperature", 1.0)),
            float(calibration.get("type_temperature", 1.0)),
        )
        info = EngineInfo(
            manifest["id"],
            backend,
            precision,
            provider,
            tuple(types),
            max_length,
            predictor.temperatures,
        )
        log.info("serving %s with %s %s (%s)", info.model_id, backend, precision, provider)
        return cls(predictor, manifest, info, _relation_scorer(path))

    # -- prediction -------------------------------------------------------------------------
    def annotate(self, texts: Sequence[str], style: str | None = None) -> list[list[Entity]]:
        """Entities per text, in text order; ``text[start:end] == entity.text``. ``style``:
        read the texts as this corpus's (a model trained with ``source_styles``; see
        :meth:`from_bundle`; None: the style it was loaded with)."""
        check_texts(texts)
        styles = None if style is None else [check_style(self.manifest, style)] * len(texts)
        return self.predictor.annotate(texts, styles)

    def plan(
        self,
        texts: Sequence[str],
        styles: Sequence[str | None] | None = None,
        after: Callable[[list[str], list[list[Entity]]], list[list[Entity]]] | None = None,
    ) -> AnnotationPlan:
        """:meth:`annotate` as steps for a scheduler (the service's micro-batcher runs the
        steps of several requests in turn); ``plan.result()`` equals ``annotate(texts)``, then
        ``after`` (the pipeline's postprocessing). ``styles``: per text, the style it is read
        as (None: the loaded one), each one this model reads
        (:meth:`~mslm_core.pipeline.AnnotationPipeline.options` checks them)."""
        check_texts(texts)
        return AnnotationPlan(self.predictor, texts, after, styles)

    def predict_words(self, sentences: Sequence[list[str]]) -> list[list[ScoredMention]]:
        """Mentions per sentence of pre-split words (what evaluation scores)."""
        return self.predictor.predict_words(sentences)


def check_texts(texts: Sequence[str]) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InferenceError(f"texts[{i}] is {type(t).__name__}, not str")


def _default_batch_size(precision: str, provider: str) -> int:
    """fp32: 16 windows per run on CPU (measured fastest), 64 on CUDA; a window's result
    does not depend on the others in its batch (tested). int8: one window per run, because
    dynamic quantisation scales activations per *run*: batched, a text's entities would
    depend on its batch neighbours (measured on NCBI-disease: 8% of entities differed
    between batched and one-by-one runs); alone, int8 is deterministic per text and costs
    ~17% of its batched throughput."""
    if precision == "int8":
        return 1
    return 64 if provider in ("CUDAExecutionProvider", "cuda") else 16


def _has_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _onnx_backend(
    path: Path,
    onnx: dict[str, Any],
    device: str,
    precision: str,
    threads: tuple[int, int],
    spinning: bool,
) -> tuple[Any, str, int]:
    """The ONNX Runtime backend of an exported bundle → (backend, precision, runs side by
    side). ``threads``: intra- and inter-op threads (0: the runtime's default)."""
    if not onnx:
        raise InferenceError(f"{path}: the bundle has no ONNX export (run mslm export)")
    providers = _choose_providers(device)
    on_gpu = providers[0] == "CUDAExecutionProvider"
    precisions = onnx["precisions"]
    if precision == "auto":
        precision = "int8" if "int8" in precisions and not on_gpu else "fp32"
    workers = 1
    if precision == "int8" and not on_gpu:
        # int8 runs one window at a time (see _default_batch_size); small runs keep the
        # cores busier side by side, one thread each unless the threads are set. Measured on
        # 2 cores (NCBI-disease test): 1 run × 2 threads 250 sentences/s, p50 4.9 ms for one
        # sentence; 2 × 2 threads with idle threads sleeping 258/s at 5.3 ms; 2 × 1 thread
        # 279/s but 8.2 ms — the default: on the first start's clinical model
        # the answer's steps offline 381 against 342 texts/s, and the API at 32 clients
        # 305 against 249 (benchmarks/api_load.py --intra-op-threads; spinning threads would
        # fight: 227/s)
        workers, spinning = os.cpu_count() or 1, False
        if threads[0] == 0:
            threads = (1, threads[1])
    if precision not in precisions:
        raise InferenceError(
            f"{path}: no {precision} export (has {', '.join(precisions)}); "
            f"run mslm export --quantize {precision}"
        )
    backend = OnnxBackend(
        path / precisions[precision], path / onnx["classifier"], providers, *threads, spinning
    )
    return backend, precision, workers


def _torch_backend(
    path: Path, manifest: dict[str, Any], device: str, threads: int
) -> tuple[Any, str, Any]:
    import torch

    from .bundle import load_bundle
    from .predict.backend import TorchBackend

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise InferenceError("device cuda was asked for but PyTorch sees no CUDA device")
    if threads:
        torch.set_num_threads(threads)
    bundle = load_bundle(path, device=device, manifest=manifest)
    return TorchBackend(bundle.model, device), device, RustWordTokenizer.from_directory(path)
