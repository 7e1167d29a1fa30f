"""Evaluation: honest predictions (never masked, never told the gold) scored against gold."""

from __future__ import annotations

import numpy as np
import torch

from .collate import MaskingCollator
from .corpus import Corpus, Mention
from .features import Window
from .metrics import evaluation_report
from .predict import Predictor


def evaluate_corpus(
    predictor: Predictor, corpus: Corpus, total_nll: float | None = None, n_masked: int = 0
) -> dict:
    """DESIGN.md's metrics.json for ``corpus``. The predictor is given the words only."""
    words = [s.words for s in corpus.sentences]
    predicted = predictor.predict_words(words)
    return evaluation_report(
        [s.mentions for s in corpus.sentences],
        [[Mention(m.start, m.end, m.label) for m in sent] for sent in predicted],
        [len(w) for w in words],
        total_nll=total_nll,
        n_masked=n_masked,
    )


def masked_nll(
    model,
    windows: list[Window],
    collator: MaskingCollator,
    seed: int,
    device: str,
    batch_size: int = 64,
) -> tuple[float, int]:
    """Summed cross-entropy of the MLM head over masked positions, and their number.

    A diagnostic of the masked-LM objective (MSLM.md §6: same masking as training, fixed seed);
    it is never used to predict entities.
    """
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
