"""The textbook baseline: what a user gets from forty lines of ``transformers``.

``AutoModelForTokenClassification`` (a linear layer over B-TYPE / I-TYPE / O on the encoder),
``DataCollatorForTokenClassification``, the ``Trainer`` with AdamW, linear warm-up and decay,
labels on each word's first subword, sentences truncated at the encoder's 512 positions, the
last epoch kept (``select = "best-dev"``: the epoch with the best dev F1, as our trainer keeps
it, for a textbook tuned as fairly as our recipe), each word tagged by the argmax at its first
subword and the tags read as conlleval does (an ``I-X`` after ``O`` or after another type
starts a mention). It is a protocol variant like any other (``strategy =
"hf-token-classification"``): same data, seeds, epochs, batch size, learning rate, warm-up and
weight decay as the runs beside it, scored by our scorer, and checked against ``seqeval`` (an
unequal F1 is an error, not a footnote).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mslm_core.config import SELECTIONS
from mslm_core.corpus import Corpus, Mention, read_corpus
from mslm_core.evaluate import score_predictions
from mslm_core.metrics import judge, mentions_to_tags, tags_to_mentions
from mslm_core.model import resolve_encoder, split_revision

log = logging.getLogger(__name__)

NAME = "hf-token-classification"
# The settings of a protocol run that this baseline reads; the others (head, masking, …)
# describe our own trainer and do not apply.
SETTINGS = (
    "base_model",
    "epochs",
    "batch_size",
    "learning_rate",
    "weight_decay",
    "warmup_ratio",
    "max_train_sentences",
    "select",
)
MAX_POSITIONS = 512  # the textbook truncates at the encoder's length instead of windowing


class TextbookTagger:
    """A token-classification model and its tokenizer, predicting tags per word."""

    def __init__(self, model: Any, tokenizer: Any, labels: list[str], device: str):
        self.model, self.tokenizer, self.labels, self.device = model, tokenizer, labels, device

    def word_probabilities(
        self, sentences: list[list[str]], batch_size: int = 64
    ) -> list[npt.NDArray[np.float32]]:
        """Per sentence [n_words, L]: the label probabilities at each word's first subword
        (a word cut off by truncation gets all its mass on O)."""
        import torch

        out: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(sentences)
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        self.model.eval()
        with torch.inference_mode():
            for k in range(0, len(order), batch_size):
                chunk = [i for i in order[k : k + batch_size] if sentences[i]]
                for i in order[k : k + batch_size]:
                    if not sentences[i]:
                        out[i] = np.zeros((0, len(self.labels)), np.float32)
                if not chunk:
                    continue
                enc = self.tokenizer(
                    [sentences[i] for i in chunk],
                    is_split_into_words=True,
                    truncation=True,
                    max_length=MAX_POSITIONS,
                    padding=True,
                    return_tensors="pt",
                )
                logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
                probs = logits.float().softmax(-1).cpu().numpy()
                for r, i in enumerate(chunk):
                    words = np.zeros((len(sentences[i]), len(self.labels)), np.float32)
                    words[:, 0] = 1.0  # O
                    previous = None
                    for pos, w in enumerate(enc.word_ids(r)):
                        if w is not None and w != previous:
                            words[w] = probs[r, pos]
                        previous = w
                    out[i] = words
        return out

    def predict(self, sentences: list[list[str]]) -> list[list[str]]:
        """Per sentence, the argmax tag of each word."""
        return [
            [self.labels[j] for j in p.argmax(-1).tolist()]
            for p in self.word_probabilities(sentences)
        ]


def _tags(corpus: Corpus) -> list[list[str]]:
    return [mentions_to_tags(len(s.words), s.mentions) for s in corpus.sentences]


def score(tagger: TextbookTagger, corpus: Corpus) -> tuple[dict[str, Any], list[list[Mention]]]:
    """Our metrics of the tagger on ``corpus`` (with ``seqeval_f1`` beside them) and the
    predicted mentions. Raises when our strict F1 and seqeval's disagree."""
    from seqeval.metrics import f1_score

    predicted_tags = tagger.predict([s.words for s in corpus.sentences])
    predicted = [tags_to_mentions(t)[0] for t in predicted_tags]
    metrics = score_predictions(corpus, predicted)
    gold_tags = _tags(corpus)
    if any(s.annotated is not None for s in corpus.sentences):
        # a corpus of a multi-corpus schema is judged on its own types (metrics.judge):
        # seqeval checks the same judged mentions
        judged = [
            judge(s.mentions, p, s.annotated)
            for s, p in zip(corpus.sentences, predicted, strict=True)
        ]
        sizes = [len(s.words) for s in corpus.sentences]
        gold_tags = [mentions_to_tags(n, g) for n, (g, _) in zip(sizes, judged, strict=True)]
        predicted_tags = [mentions_to_tags(n, p) for n, (_, p) in zip(sizes, judged, strict=True)]
    reference = float(f1_score(gold_tags, predicted_tags))
    if abs(reference - metrics["strict"]["f1"]) > 1e-9:
        raise AssertionError(
            f"our strict F1 {metrics['strict']['f1']:.6f} != seqeval's {reference:.6f}"
        )
    metrics["seqeval_f1"] = reference
    return metrics, predicted


def train_textbook(
    settings: dict[str, Any],
    paths: dict[str, Path],
    seed: int,
    device: str,
    work_dir: Path,
) -> dict[str, Any]:
    """Fine-tune and score the textbook baseline. Returns the parts of a run record that
    the harness's trainer would give: ``history`` (dev F1 per epoch, measured only),
    ``best_epoch`` (the last, or with ``select = "best-dev"`` the best by dev F1, whose weights
    are then the model's), training seconds, ``dev`` metrics, the ``tagger`` and the
    settings it read."""
    import torch
    from transformers import (
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        Trainer,
        TrainerCallback,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )
    from transformers.utils import logging as hf_logging

    used = {k: settings[k] for k in SETTINGS if k in settings}
    train, dev = read_corpus(paths["train"]), read_corpus(paths["dev"])
    if used.get("max_train_sentences"):
        train.sentences = train.sentences[: used["max_train_sentences"]]
    labels = ["O"] + [f"{p}-{t}" for t in train.types for p in ("B", "I")]
    label_ids = {label: i for i, label in enumerate(labels)}
    name, revision = split_revision(used.get("base_model", "minilm"))
    path = resolve_encoder(name)
    tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)

    def encode(corpus: Corpus) -> list[dict[str, Any]]:
        rows = []
        for sentence, tags in zip(corpus.sentences, _tags(corpus), strict=True):
            enc = tokenizer(
                sentence.words, is_split_into_words=True, truncation=True, max_length=MAX_POSITIONS
            )
            row_labels, previous = [], None
            for w in enc.word_ids():
                first = w is not None and w != previous
                row_labels.append(label_ids.get(tags[w], 0) if first else -100)
                previous = w
            rows.append({**enc, "labels": row_labels})
        return rows

    torch.manual_seed(seed)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)  # what its untyped set_verbosity_error() does
    try:
        model = AutoModelForTokenClassification.from_pretrained(
            path,
            revision=revision,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id=label_ids,
        )
    finally:
        hf_logging.set_verbosity(verbosity)
    on_gpu = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    tagger = TextbookTagger(model, tokenizer, labels, "cuda" if on_gpu else "cpu")
    args = TrainingArguments(
        output_dir=str(work_dir),
        learning_rate=used.get("learning_rate", 5e-5),
        per_device_train_batch_size=used.get("batch_size", 16),
        num_train_epochs=used.get("epochs", 3),
        warmup_steps=used.get("warmup_ratio", 0.1),  # a float < 1: a share of the steps
        weight_decay=used.get("weight_decay", 0.01),
        lr_scheduler_type="linear",
        seed=seed,
        bf16=on_gpu,  # as our trainer's autocast on CUDA
        use_cpu=not on_gpu,
        save_strategy="no",
        report_to=[],
        logging_strategy="no",
        disable_tqdm=True,
    )
    history: list[dict[str, Any]] = []
    select = used.get("select", "last")
    if select not in SELECTIONS:
        raise ValueError(f"{NAME}: select {select!r}: one of {', '.join(SELECTIONS)}")
    best_dev = select == "best-dev"
    kept: dict[str, Any] = {}  # with best_dev: the best epoch's weights, on the CPU
    started, cpu_started = time.perf_counter(), time.process_time()
    clock = {"epoch_start": started, "eval": 0.0, "eval_cpu": 0.0}

    class DevEachEpoch(TrainerCallback):
        """Dev F1 after each epoch: for the curves, and with ``best_dev`` the best epoch's
        weights kept."""

        def on_epoch_end(
            self,
            args: TrainingArguments,
            state: TrainerState,
            control: TrainerControl,
            **kwargs: Any,
        ) -> None:
            scoring, scoring_cpu = time.perf_counter(), time.process_time()
            metrics, _ = score(tagger, dev)
            now = time.perf_counter()
            clock["eval"] += now - scoring
            clock["eval_cpu"] += time.process_time() - scoring_cpu
            history.append(
                {
                    "epoch": len(history) + 1,
                    "stage": "joint",
                    "dev_f1": metrics["strict"]["f1"],
                    "dev_precision": metrics["strict"]["precision"],
                    "dev_recall": metrics["strict"]["recall"],
                    "seconds": now - clock["epoch_start"],  # training + dev scoring
                }
            )
            if best_dev and metrics["strict"]["f1"] > kept.get("f1", -1.0):
                kept["f1"], kept["epoch"] = metrics["strict"]["f1"], len(history)
                kept["state"] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            clock["epoch_start"] = now
            model.train()

    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=encode(train),
        data_collator=DataCollatorForTokenClassification(tokenizer),
        callbacks=[DevEachEpoch()],
    )
    trainer.train()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    if best_dev and kept:
        model.load_state_dict(kept["state"])
    dev_metrics, _ = score(tagger, dev)
    chosen = kept["epoch"] if best_dev and kept else len(history)
    log.info("%s: dev strict F1 %.4f (epoch %d)", NAME, dev_metrics["strict"]["f1"], chosen)
    return {
        "history": history,
        "best_epoch": chosen,
        "train_seconds": round(wall - clock["eval"], 2),  # the steps only, as our trainer's
        "train_cpu_seconds": round(cpu - clock["eval_cpu"], 2),
        "dev": dev_metrics,
        "tagger": tagger,
        "settings_used": used,
        "encoder": {"base_model": used.get("base_model", "minilm"), "labels": labels},
    }
