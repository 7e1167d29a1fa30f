"""Evaluation: honest predictions (never masked, never told the gold) scored against gold."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .corpus import Corpus, Mention
from .features import Window
from .metrics import evaluation_report
from .predict.predictor import Predictor
from .types import ScoredMention

if TYPE_CHECKING:  # torch is imported where a model runs: serving needs neither
    from .collate import MaskingCollator
    from .model import MSLMModel


def predict_mentions(
    predictor: Predictor, corpus: Corpus, styles: list[str] | None = None
) -> list[list[Mention]]:
    """Predicted mentions per sentence; the predictor is given the words only (and, from a
    multi-corpus run, each sentence's ``styles``: its corpus's name)."""
    return as_mentions(predictor.predict_words([s.words for s in corpus.sentences], None, styles))


def as_mentions(predicted: list[list[ScoredMention]]) -> list[list[Mention]]:
    """Scored mentions per sentence → the spans and types that are scored against gold."""
    return [[Mention(m.start, m.end, m.label) for m in sent] for sent in predicted]


def score_predictions(
    corpus: Corpus,
    predicted: list[list[Mention]],
    total_nll: float | None = None,
    n_masked: int = 0,
) -> dict[str, Any]:
    """docs/design.md's metrics.json of ``predicted`` against the gold mentions of ``corpus``
    (each sentence judged on the types its corpus annotates: ``Sentence.annotated``)."""
    annotated = [s.annotated for s in corpus.sentences]
    return evaluation_report(
        [s.mentions for s in corpus.sentences],
        predicted,
        [len(s.word_spans) for s in corpus.sentences],
        total_nll=total_nll,
        n_masked=n_masked,
        annotated=None if all(a is None for a in annotated) else annotated,
    )


def score_by_source(
    corpus: Corpus,
    predicted: list[list[Mention]],
    ranges: dict[str, tuple[int, int]],
    total_nll: float | None = None,
    n_masked: int = 0,
) -> dict[str, Any]:
    """:func:`score_predictions` of a corpus merged from several (``ranges``: each corpus's
    sentences, name → (first, end)), with ``sources`` — each corpus's own report — and
    ``macro_f1``, the mean of their strict F1: what model selection compares, so that a small
    corpus counts as much as a large one. One corpus: the plain report."""
    report = score_predictions(corpus, predicted, total_nll, n_masked)
    if len(ranges) < 2:
        return report
    report["sources"] = {
        name: score_predictions(Corpus(corpus.sentences[a:b]), predicted[a:b])
        for name, (a, b) in ranges.items()
    }
    report["macro_f1"] = sum(r["strict"]["f1"] for r in report["sources"].values()) / len(ranges)
    return report


def selection_f1(report: dict[str, Any]) -> float:
    """The dev figure a run keeps the best epoch by: the macro F1 over its corpora when it
    trains on several, else the strict F1."""
    return float(report.get("macro_f1", report["strict"]["f1"]))


def floor_warnings(dev: dict[str, Any], min_dev_f1: float) -> list[str]:
    """Why a model is below its floor, from its dev report (empty: it is not): it predicts
    no entity on dev at all, or its dev F1 (:func:`selection_f1`) is under ``min_dev_f1``.
    A job keeps such a model only flagged (TrainConfig.below_floor), served only by force."""
    if not dev.get("n_pred"):
        return [
            f"it predicts no entity on dev ({dev.get('n_gold', 0)} annotated): more epochs, "
            "more training sentences or another learning rate may help"
        ]
    f1 = selection_f1(dev)
    if f1 < min_dev_f1:
        return [f"dev F1 {f1:.3f} is below the job's floor (min_dev_f1 {min_dev_f1:g})"]
    return []


def predictions_digest(predicted: list[list[Mention]]) -> str:
    """sha256 of the predicted mentions (spans and types): equal digests, equal predictions."""
    canon = [[[m.start, m.end, m.label] for m in sent] for sent in predicted]
    return hashlib.sha256(json.dumps(canon, separators=(",", ":")).encode()).hexdigest()


def evaluate_bundle(
    path: str | Path,
    corpus: Corpus,
    *,
    backend: str = "auto",
    precision: str = "auto",
    device: str = "auto",
    style: str | None = None,
    diagram: str | Path | None = None,
    label: str = "",
) -> dict[str, Any]:
    """A bundle scored on an annotated corpus as it is served (the engine, unmasked words):
    docs/design.md's metrics, ``calibration``, the masked-token ``perplexity`` of bundles trained
    with masking, the ``engine`` that scored and ``predictions_sha256``. ``diagram``: where to
    draw the reliability diagram (``label`` names the corpus on it). The one evaluation of
    ``mslm evaluate``, ``POST /v1/evaluations`` and the benchmarks. ``style``: read the
    corpus as this one of the bundle's corpora (``EntityExtractor.from_bundle``)."""
    from .inference import EntityExtractor

    extractor = EntityExtractor.from_bundle(
        path, backend=backend, precision=precision, device=device, style=style
    )
    nll, n_masked = bundle_perplexity(
        path, extractor.manifest, corpus, device, extractor.predictor.style
    )
    metrics, predicted = _calibrated(extractor.predictor, corpus, nll, n_masked)
    info = extractor.info
    metrics["engine"] = {
        "backend": info.backend,
        "precision": info.precision,
        "provider": info.provider,
    }
    metrics["predictions_sha256"] = predictions_digest(predicted)
    if diagram is not None:
        from .calibration import reliability_diagram

        reliability_diagram(metrics["calibration"], info.temperatures, label, Path(diagram))
    return metrics


def _calibrated(
    predictor: Predictor, corpus: Corpus, total_nll: float | None, n_masked: int
) -> tuple[dict[str, Any], list[list[Mention]]]:
    from .calibration import BINS, calibration_report

    raw = predictor.raw_predictions([s.words for s in corpus.sentences])
    mentions = raw.mentions(predictor.types, predictor.temperatures)
    predicted = as_mentions(mentions)
    metrics = score_predictions(corpus, predicted, total_nll, n_masked)
    t_det, t_type = predictor.temperatures
    metrics["calibration"] = {
        "detection_temperature": t_det,
        "type_temperature": t_type,
        "bins": BINS,
        **calibration_report(raw, corpus, predictor.types, predictor.temperatures),
    }
    return metrics, predicted


def evaluate_corpus(
    predictor: Predictor, corpus: Corpus, total_nll: float | None = None, n_masked: int = 0
) -> dict[str, Any]:
    """docs/design.md's metrics.json for ``corpus``. The predictor is given the words only."""
    return score_predictions(corpus, predict_mentions(predictor, corpus), total_nll, n_masked)


def masked_nll(
    model: MSLMModel,
    windows: list[Window],
    collator: MaskingCollator,
    seed: int,
    device: str,
    batch_size: int = 64,
) -> tuple[float, int]:
    """Summed cross-entropy of the MLM head over masked positions, and their number.

    A diagnostic of the masked-LM objective (docs/method.md §6: same masking as training, fixed
    seed); it is never used to predict entities.
    """
    import torch

    if collator.strategy is None:
        return 0.0, 0
    model.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(0, len(windows), batch_size):
            chunk = windows[i : i + batch_size]
            rngs = [np.random.default_rng([seed, i + r, 7]) for r in range(len(chunk))]
            batch = {k: v.to(device) for k, v in collator(chunk, rngs).items()}
            masked = batch["mask_type"] > 0
            if not bool(masked.any()):
                continue
            hidden = model.encode(batch["input_ids"], batch["attention_mask"])
            logits = model.mlm_head(hidden[masked]).float()
            ce = torch.nn.functional.cross_entropy(
                logits, batch["clean_ids"][masked], reduction="sum"
            )
            total += float(ce)
            count += int(masked.sum())
    return total, count


def bundle_perplexity(
    path: str | Path,
    manifest: dict[str, Any],
    corpus: Corpus,
    device: str = "cpu",
    style: str | None = None,
) -> tuple[float | None, int]:
    """Masked-token NLL of a bundle's MLM head on ``corpus`` with the bundle's own training
    masking (fixed seed), and the number of masked tokens; ``(None, 0)`` for bundles trained
    without masking. A diagnostic (docs/method.md §6), never used to predict. ``style``: the
    corpus read as this one of the bundle's corpora (None: as the bundle reads text)."""
    from .bundle import load_bundle, predictor_options, styles_of
    from .collate import MaskingCollator
    from .config import TrainConfig
    from .device import resolve_device
    from .features import WindowBuilder
    from .masking import plan_masking

    config = TrainConfig.from_dict(manifest["config"])
    if config.masking_strategy is None:
        return None, 0
    device = resolve_device(device)
    bundle = load_bundle(path, device=device, manifest=manifest)
    tok = bundle.tokenizer
    builder = WindowBuilder(tok, config.max_length, styles=styles_of(manifest))
    type_ids = {t: i for i, t in enumerate(manifest["types"])}
    sentences = [s for s in corpus.sentences if all(m.label in type_ids for m in s.mentions)]
    words = [s.words for s in sentences]
    mentions = [s.mentions for s in sentences]
    if config.pack:  # the windows the model was trained on
        words, mentions, _ = builder.pack(words, mentions)
    if style is None:
        style = predictor_options(manifest)["style"]
    windows = builder.training_windows(words, mentions, type_ids, styles=[style] * len(words))
    plan = plan_masking(config, windows, words)
    collator = MaskingCollator(plan.strategy, tok.mask_token_id, tok.pad_token_id or 0)
    return masked_nll(bundle.model, windows, collator, config.seed, device)
