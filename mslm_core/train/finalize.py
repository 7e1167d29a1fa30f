"""The end of a training run: the kept weights back in the model, dev and test scored
honestly, the confidences calibrated on dev, the manifest written with the bundle."""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING, Any

import torch

from .. import __version__
from ..bundle import save_bundle
from ..calibration import CALIBRATION_PNG, calibrate, diagram_for, gold_type_spans
from ..evaluate import as_mentions, masked_nll
from .checkpoint import BEST

if TYPE_CHECKING:
    from .loop import Trainer

log = logging.getLogger("mslm_core.train")


def _sources_manifest(trainer: Trainer) -> dict[str, Any]:
    """A multi-corpus run's corpora: each one's files, type map, weight, the target types it
    annotates and its splits' counts (nothing for a run on one corpus)."""
    data = trainer.data
    if not data.partial:
        return {}
    return {
        "sources": [
            {
                **d.source.to_json(),
                "annotated": sorted(d.annotated),
                "corpora": {split: c.stats() for split, c in d.splits.items()},
            }
            for d in data.sources
        ],
        "partial_labels": trainer.config.partial_labels,
    }


def finalize(trainer: Trainer) -> dict[str, Any]:
    """Restore the kept weights, score dev and test, calibrate, write the bundle; returns its
    path, metrics and history."""
    from safetensors.torch import load_model

    cfg, state, predictor = trainer.config, trainer.state, trainer.predictor
    best = trainer.work_dir / BEST
    if best.exists():
        load_model(trainer.model, str(best), strict=False, device=trainer.device)
    nll, n_masked = masked_nll(
        trainer.model, trainer.dev_windows, trainer.collator, cfg.seed, trainer.device
    )
    # one prediction pass per split serves both the scores and the calibration (the
    # temperatures it fits move confidences only, never which entities are found); dev's
    # also types the gold mentions, which the type temperature is fitted on
    raw = {
        split: predictor.raw_predictions(
            [s.words for s in corpus.sentences],
            gold_type_spans(corpus, predictor.types) if split == "dev" else None,
            styles=trainer.styles_of(split),
        )
        for split, corpus in trainer.corpora.items()
        if split in ("dev", "test")
    }
    metrics: dict[str, Any] = {}
    for split, predictions in raw.items():
        predicted = as_mentions(predictions.mentions(predictor.types))
        extra = (nll, n_masked) if split == "dev" else (None, 0)  # perplexity: dev only
        metrics[split] = trainer.score(split, predicted, *extra)
    calibration = calibrate(
        predictor, trainer.corpora["dev"], trainer.corpora.get("test"), passes=raw
    )
    predictor.temperatures = (1.0, 1.0)
    diagram = diagram_for(calibration, trainer.work_dir / CALIBRATION_PNG)
    log.info(
        "calibration: T(detection) %.2f, T(type) %.2f; ECE %s",
        calibration["detection_temperature"],
        calibration["type_temperature"],
        ", ".join(
            f"{split} {calibration[split]['before']['ece']:.3f} → "
            f"{calibration[split]['after']['ece']:.3f}"
            for split in ("dev", "test")
            if split in calibration
        ),
    )
    manifest = {
        "base_model": cfg.base_model,
        "strategy": cfg.strategy,
        # asked for ``auto``: what it chose for this training set, and why
        **({"auto": trainer.auto_choice} if trainer.auto_choice is not None else {}),
        **trainer.serving_manifest(),
        "config": cfg.to_dict(),
        "learning_rate": trainer.learning_rate,
        "encoder": trainer.encoder_info,
        "masking": trainer.masking_info,
        "metrics": metrics,
        "calibration": calibration,
        "history": state.history,
        "best_epoch": state.best_epoch,
        "train_seconds": round(state.train_seconds, 2),
        "train_cpu_seconds": round(state.train_cpu_seconds, 2),
        "corpora": {k: c.stats() for k, c in trainer.corpora.items()},
        **_sources_manifest(trainer),
        "max_length": cfg.max_length,
        "mslm_version": __version__,
        "torch_version": torch.__version__,
    }
    save_bundle(
        trainer.model,
        trainer.tokenizer,
        trainer.output,
        manifest,
        overwrite=trainer.overwrite,
        extra_files={CALIBRATION_PNG: diagram},
    )
    shutil.rmtree(trainer.work_dir, ignore_errors=True)
    return {"output": str(trainer.output), "metrics": metrics, "history": state.history}
