"""The research code's evaluation protocol, **reference-leaky** — for explaining numbers only.

The public MSLM research code masks the dev and test sentences with their *gold* mentions
(ELM at the training rate, plus BLM) before predicting them, so a detection head that learned
"``[MASK]`` → entity" reads the answer from its input (MSLM.md §3b). No user ever gets this
accuracy: a served model has no gold labels. This module exists so that benchmarks can show
both columns side by side; nothing that predicts for users or scores the product imports it.
"""

from __future__ import annotations

import numpy as np
import torch

from .collate import MaskingCollator
from .config import TrainConfig
from .corpus import Corpus, Mention
from .features import O, WindowBuilder
from .masking import build_strategy
from .metrics import evaluation_report
from .predict import decode_bio

LABEL = "reference-leaky"


def evaluate_reference_leaky(bundle, corpus: Corpus, seed: int = 0, device: str = "cpu") -> dict:
    """Metrics when every sentence is masked with its gold mentions (ELM/BLM of the bundle's
    training configuration) before prediction, as the research code does. Labelled
    ``protocol: reference-leaky``."""
    config = TrainConfig.from_dict(bundle.manifest["config"])
    types = bundle.manifest["types"]
    type_ids = {t: i for i, t in enumerate(types)}
    tok, model = bundle.tokenizer, bundle.model.to(device).eval()
    builder = WindowBuilder(tok, config.max_length)
    sentences = [s for s in corpus.sentences if all(m.label in type_ids for m in s.mentions)]
    words = [s.words for s in sentences]
    windows = builder.training_windows(words, [s.mentions for s in sentences], type_ids)
    strategy = build_strategy("elm_blm", elm_rate=config.elm_rate, blm_rate=config.blm_rate)
    collator = MaskingCollator(strategy, tok.mask_token_id, tok.pad_token_id or 0)
    tag_probs = [np.tile(np.eye(3, dtype=np.float32)[O], (len(w), 1)) for w in words]
    feats_by_word: list[list[np.ndarray | None]] = [[None] * len(w) for w in words]
    with torch.inference_mode():
        for i in range(0, len(windows), 64):
            chunk = windows[i : i + 64]
            rngs = [np.random.default_rng([seed, i + r]) for r in range(len(chunk))]
            batch = {k: v.to(device) for k, v in collator(chunk, rngs).items()}
            hidden = model.encode(batch["input_ids"], batch["attention_mask"])  # masked input
            probs = model.detection_logits(hidden, batch["clean_ids"]).softmax(-1).cpu().numpy()
            feats = model.type_features(hidden, batch["clean_ids"]).cpu().numpy()
            for r, w in enumerate(chunk):
                for j, pos in w.first_subword().items():
                    tag_probs[w.sentence][j] = probs[r, pos]
                for pos, j in enumerate(w.word_index.tolist()):
                    if j >= 0:
                        prev = feats_by_word[w.sentence][j]
                        f = feats[r, pos][None]
                        feats_by_word[w.sentence][j] = f if prev is None else np.vstack([prev, f])
    predicted: list[list[Mention]] = []
    for s, probs in enumerate(tag_probs):
        spans = decode_bio(probs.argmax(-1).tolist())
        mentions = []
        for start, end in spans:
            rows = [f for f in feats_by_word[s][start:end] if f is not None]
            pooled = np.vstack(rows).mean(0, keepdims=True) if rows else None
            label = types[0]
            if pooled is not None and len(types) > 1:
                with torch.inference_mode():
                    logits = model.classify(torch.from_numpy(pooled).to(device))
                label = types[int(logits.argmax(-1))]
            mentions.append(Mention(start, end, label))
        predicted.append(mentions)
    report = evaluation_report([s.mentions for s in sentences], predicted, [len(w) for w in words])
    report["protocol"] = LABEL
    return report
