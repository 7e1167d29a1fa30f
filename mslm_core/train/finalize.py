"""The end of a training run: the kept weights back in the model, dev and test scored
honestly, the confidences calibrated on dev, the manifest written with the bundle."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import torch

from .. import __version__, relations
from ..bundle import save_bundle
from ..calibration import CALIBRATION_PNG, calibrate, diagram_for, gold_type_spans
from ..evaluate import as_mentions, floor_warnings, masked_nll
from .checkpoint import BEST
from .state import FinishingRun

log = logging.getLogger("mslm_core.train")


def _sources_manifest(run: FinishingRun) -> dict[str, Any]:
    """A multi-corpus run's corpora: each one's files, type map, weight, the target types it
    annotates and its splits' counts (nothing for a run on one corpus)."""
    data = run.data
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
        "partial_labels": run.config.partial_labels,
    }


def _relation_scorer(run: FinishingRun) -> tuple[dict[str, Path], dict[str, Any]]:
    """The relation scorer (``mslm_core.relations``) learnt from the training sentences of
    the corpora that annotate relations, scored on their dev sentences: its files and what
    the manifest says of it (nothing when no corpus annotates a relation)."""
    with_relations = [
        d for d in run.data.sources if any(s.relations for s in d.splits["train"].sentences)
    ]
    if not with_relations:
        return {}, {}
    train = [
        e
        for d in with_relations
        for e in relations.corpus_examples(relations.from_corpus(d.splits["train"].sentences))
    ]
    if not relations.learnable(train):
        # relations annotated, but no modifier has a candidate head in its sentence (a
        # small subset of a corpus): nothing to learn, and the model serves without a scorer
        log.warning(
            "relations: %d modifiers from %s, none with a candidate head: no relation scorer",
            len(train),
            ", ".join(d.source.name for d in with_relations),
        )
        return {}, {}
    scorer = relations.train(train, seed=run.config.seed)
    dev = [
        e
        for d in with_relations
        if "dev" in d.splits
        for e in relations.corpus_examples(relations.from_corpus(d.splits["dev"].sentences))
    ]
    folder = run.work_dir / "relations"
    scorer.save(folder)
    corpora = [d.source.name for d in with_relations]
    dev_accuracy = relations.accuracy(scorer, dev)
    info = {"corpora": corpora, "examples": len(train), "dev_accuracy": dev_accuracy}
    log.info(
        "relations: %d modifiers from %s; dev attachment %s",
        len(train),
        ", ".join(corpora),
        ", ".join(f"{k} {v['accuracy']:.3f}" for k, v in dev_accuracy.items()),
    )
    return {name: folder / name for name in relations.FILES}, info


def finalize(run: FinishingRun) -> dict[str, Any]:
    """Restore the kept weights, score dev and test, calibrate, write the bundle; returns its
    path, metrics and history."""
    from safetensors.torch import load_model

    cfg, state, predictor = run.config, run.state, run.predictor
    best = run.work_dir / BEST
    if best.exists():
        load_model(run.model, str(best), strict=False, device=run.device)
    nll, n_masked = masked_nll(run.model, run.dev_windows, run.collator, cfg.seed, run.device)
    # one prediction pass per split serves both the scores and the calibration (the
    # temperatures it fits move confidences only, never which entities are found); dev's
    # also types the gold mentions, which the type temperature is fitted on
    raw = {
        split: predictor.raw_predictions(
            [s.words for s in corpus.sentences],
            gold_type_spans(corpus, predictor.types) if split == "dev" else None,
            styles=run.styles_of(split),
        )
        for split, corpus in run.corpora.items()
        if split in ("dev", "test")
    }
    metrics: dict[str, Any] = {}
    for split, predictions in raw.items():
        predicted = as_mentions(predictions.mentions(predictor.types))
        extra = (nll, n_masked) if split == "dev" else (None, 0)  # perplexity: dev only
        metrics[split] = run.score(split, predicted, *extra)
    calibration = calibrate(predictor, run.corpora["dev"], run.corpora.get("test"), passes=raw)
    predictor.temperatures = (1.0, 1.0)
    diagram = diagram_for(calibration, run.work_dir / CALIBRATION_PNG)
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
    relation_files, relation_info = _relation_scorer(run)
    warnings = floor_warnings(metrics["dev"], cfg.min_dev_f1)
    for warning in warnings:
        log.warning("below the floor: %s", warning)
    manifest = {
        "base_model": cfg.base_model,
        "strategy": cfg.strategy,
        # asked for ``auto``: what it chose for this training set, and why
        **({"auto": run.auto_choice} if run.auto_choice is not None else {}),
        **run.serving_manifest(),
        "config": cfg.to_dict(),
        "learning_rate": run.learning_rate,
        "encoder": run.encoder_info,
        "masking": run.masking_info,
        "metrics": metrics,
        "warnings": warnings,  # below the floor (evaluate.floor_warnings)
        "calibration": calibration,
        "history": state.history,
        "best_epoch": state.best_epoch,
        "train_seconds": round(state.train_seconds, 2),
        "train_cpu_seconds": round(state.train_cpu_seconds, 2),
        "corpora": {k: c.stats() for k, c in run.corpora.items()},
        **_sources_manifest(run),
        **({"relations": relation_info} if relation_info else {}),
        "max_length": cfg.max_length,
        "mslm_version": __version__,
        "torch_version": torch.__version__,
    }
    save_bundle(
        run.model,
        run.tokenizer,
        run.output,
        manifest,
        overwrite=run.overwrite,
        extra_files={CALIBRATION_PNG: diagram, **relation_files},
    )
    shutil.rmtree(run.work_dir, ignore_errors=True)
    return {"output": str(run.output), "metrics": metrics, "history": state.history}
