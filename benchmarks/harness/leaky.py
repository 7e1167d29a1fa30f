"""The research code's evaluation protocol, **reference-leaky** — for explaining numbers only.

The public MSLM research code masks the dev and test sentences with their *gold* mentions
(ELM at the training rate, plus BLM) before predicting them, so a detection head that learned
"``[MASK]`` → entity" reads the answer from its input (docs/method.md §3b). No user ever gets this
accuracy: a served model has no gold labels. This module exists so that benchmarks can show
both columns side by side; nothing that predicts for users or scores the product imports it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from mslm_core.collate import MaskingCollator
from mslm_core.config import TrainConfig
from mslm_core.corpus import Corpus, Mention
from mslm_core.features import O, WindowBuilder
from mslm_core.masking import build_strategy
from mslm_core.metrics import evaluation_report
from mslm_core.predict.decoding import decode_bio
from mslm_core.train import Callback, TrainingRun

if TYPE_CHECKING:
    from mslm_core.bundle import LoadedBundle
    from mslm_core.model import MSLMModel

LABEL = "reference-leaky"


def evaluate_reference_leaky(
    bundle: LoadedBundle, corpus: Corpus, seed: int = 0, device: str = "cpu"
) -> dict[str, Any]:
    """Metrics when every sentence is masked with its gold mentions (ELM/BLM of the bundle's
    training configuration) before prediction, as the research code does. Labelled
    ``protocol: reference-leaky``."""
    config = TrainConfig.from_dict(bundle.manifest["config"])
    return leaky_report(
        bundle.model, bundle.tokenizer, config, bundle.manifest["types"], corpus, seed, device
    )


def leaky_report(
    model: MSLMModel,
    tok: Any,
    config: TrainConfig,
    types: list[str],
    corpus: Corpus,
    seed: int,
    device: str,
) -> dict[str, Any]:
    """:func:`evaluate_reference_leaky` for a model in memory."""
    type_ids = {t: i for i, t in enumerate(types)}
    was_training = model.training
    model = model.to(device).eval()
    builder = WindowBuilder(tok, config.max_length)
    sentences = [s for s in corpus.sentences if all(m.label in type_ids for m in s.mentions)]
    words = [s.words for s in sentences]
    windows = builder.training_windows(words, [s.mentions for s in sentences], type_ids)
    strategy = build_strategy("mslm", elm_rate=config.elm_rate, blm_rate=config.blm_rate)
    collator = MaskingCollator(strategy, tok.mask_token_id, tok.pad_token_id or 0)
    tag_probs = [np.tile(np.eye(3, dtype=np.float32)[O], (len(w), 1)) for w in words]
    feats_by_word: list[list[npt.NDArray[np.float32] | None]] = [[None] * len(w) for w in words]
    # length-sorted batches pad little; each window's masking is seeded by its position in
    # the corpus, so the order changes no mask
    order = sorted(range(len(windows)), key=lambda i: (len(windows[i]), i))
    with torch.inference_mode():
        for i in range(0, len(order), 64):
            chunk = [windows[k] for k in order[i : i + 64]]
            rngs = [np.random.default_rng([seed, k]) for k in order[i : i + 64]]
            batch = {k: v.to(device) for k, v in collator(chunk, rngs).items()}
            hidden = model.encode(batch["input_ids"], batch["attention_mask"])  # masked input
            probs_t, feats_t = model.head_outputs(hidden, batch["clean_ids"])
            probs, feats = probs_t.float().cpu().numpy(), feats_t.float().cpu().numpy()
            for r, w in enumerate(chunk):
                for j, pos in w.first_subword().items():
                    tag_probs[w.sentence][j] = probs[r, pos]
                pooled_at = w.first_subword_mask if model.pools_first_subwords else ~w.special_mask
                for pos, j in enumerate(w.word_index.tolist()):
                    if pooled_at[pos]:
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
    model.train(was_training)
    return report


class LeakyDevSelection(Callback):
    """The research code's model selection, for the labelled reference-leaky column only:
    after each fine-tuning epoch, score dev *masked with its gold mentions* and keep the
    weights with the best such F1 in ``path`` (the honest selection is untouched). Its state
    sits beside the weights so that a resumed run continues it."""

    def __init__(self, dev: Corpus, path: Path, seed: int):
        self.dev, self.path, self.seed = dev, Path(path), seed
        self.state_file = self.path.with_suffix(".json")
        self.state: dict[str, Any] = {"best_f1": -1.0, "best_epoch": None, "history": []}
        if self.state_file.exists():
            self.state = json.loads(self.state_file.read_text())

    def on_epoch_end(self, run: TrainingRun) -> None:
        entry = run.state.history[-1]
        if entry["stage"] != "joint":
            return
        report = leaky_report(
            run.model,
            run.tokenizer,
            run.config,
            run.types,
            self.dev,
            self.seed,
            run.device,
        )
        f1 = report["strict"]["f1"]
        self.state["history"].append({"epoch": entry["epoch"], "dev_f1": f1})
        if f1 > self.state["best_f1"]:
            from safetensors.torch import save_model

            self.path.parent.mkdir(parents=True, exist_ok=True)
            save_model(run.model, str(self.path))
            self.state.update(best_f1=f1, best_epoch=entry["epoch"])
        self.state_file.write_text(json.dumps(self.state))
