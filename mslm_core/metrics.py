"""Evaluation metrics for entity extraction: strict entity scores, token macro-F1, perplexity.

Mentions are compared as :class:`~mslm_core.corpus.Mention` objects (word indices, end
exclusive). A predicted mention counts as correct only if its start, end *and* label equal
those of a gold mention in the same sentence ("strict" matching, as seqeval's
``mode="strict"`` with the IOB2 scheme). All scores are fractions in ``[0, 1]``; a ratio whose
denominator is zero is reported as ``0.0``.

Matching is one-to-one: each gold mention can be matched by at most one prediction, so a
duplicated prediction counts once as a true positive and once as a false positive.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .corpus import Mention

__all__ = [
    "entity_scores",
    "evaluation_report",
    "mentions_to_tags",
    "perplexity",
    "tags_to_mentions",
    "token_macro_f1",
]

OUTSIDE = "O"


def _ratio(num: float, den: float) -> float:
    """``num / den``, or ``0.0`` when ``den`` is zero."""
    return num / den if den else 0.0


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    """Precision, recall and F1 from true positives and the two totals (zero-division → 0.0)."""
    precision = _ratio(tp, n_pred)
    recall = _ratio(tp, n_gold)
    f1 = _ratio(2 * precision * recall, precision + recall)
    return precision, recall, f1


def _check_same_length(gold: Sequence[Any], pred: Sequence[Any], what: str) -> None:
    """Raise ``ValueError`` unless ``gold`` and ``pred`` hold the same number of sentences."""
    if len(gold) != len(pred):
        side = "pred" if len(gold) > len(pred) else "gold"
        raise ValueError(
            f"{what}: gold has {len(gold)} sentences but pred has {len(pred)} "
            f"({side} has no sentence {min(len(gold), len(pred))})"
        )


def mentions_to_tags(n_words: int, mentions: Iterable[Mention]) -> list[str]:
    """Encode the mentions of one sentence of ``n_words`` words as IOB2 tags.

    Raises ``ValueError`` when a mention is empty, lies outside ``[0, n_words)`` or overlaps
    another mention.
    """
    if n_words < 0:
        raise ValueError(f"n_words must be >= 0, got {n_words}")
    tags = [OUTSIDE] * n_words
    for m in sorted(mentions):
        if not 0 <= m.start < m.end <= n_words:
            raise ValueError(f"mention {m} does not fit a sentence of {n_words} words")
        if any(t != OUTSIDE for t in tags[m.start : m.end]):
            raise ValueError(f"mention {m} overlaps another mention")
        tags[m.start] = f"B-{m.label}"
        for i in range(m.start + 1, m.end):
            tags[i] = f"I-{m.label}"
    return tags


def _split_tag(tag: str) -> tuple[str, str]:
    """Split an IOB2 tag into ``(prefix, label)``; ``"O"`` gives ``("O", "")``."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, sep, label = tag.partition("-")
    if not sep or prefix not in ("B", "I") or not label:
        raise ValueError(f"not an IOB2 tag: {tag!r}")
    return prefix, label


def tags_to_mentions(tags: Sequence[str]) -> tuple[list[Mention], int]:
    """Decode one sentence of IOB2 tags into mentions.

    An ``I-X`` that follows ``O``, opens the sentence, or follows a tag of another type starts
    a new mention (a *repair*). Returns the mentions in order and the number of repairs made.
    Raises ``ValueError`` on a tag that is neither ``O``, ``B-X`` nor ``I-X``.
    """
    mentions: list[Mention] = []
    repairs = 0
    start: int | None = None
    label = ""
    for i, tag in enumerate(tags):
        prefix, tag_label = _split_tag(tag)
        if prefix == "I" and start is not None and tag_label == label:
            continue
        if start is not None:
            mentions.append(Mention(start, i, label))
            start = None
        if prefix == OUTSIDE:
            continue
        if prefix == "I":
            repairs += 1
        start, label = i, tag_label
    if start is not None:
        mentions.append(Mention(start, len(tags), label))
    return mentions, repairs


def entity_scores(
    gold: Sequence[Sequence[Mention]], pred: Sequence[Sequence[Mention]]
) -> dict[str, Any]:
    """Strict micro and per-type precision, recall and F1 over a corpus of sentences.

    ``gold[i]`` and ``pred[i]`` are the mentions of sentence ``i``. Returns::

        {"strict": {"precision", "recall", "f1"},
         "per_type": {TYPE: {"precision", "recall", "f1", "support"}},
         "exact_match": float, "n_gold": int, "n_pred": int}

    ``per_type`` covers every type seen in gold or pred (sorted); ``support`` is the number of
    gold mentions of that type. ``exact_match`` is the share of gold mentions predicted
    exactly (boundaries and type). Raises ``ValueError`` when the sentence counts differ.
    """
    _check_same_length(gold, pred, "entity_scores")
    tp: Counter[str] = Counter()
    n_gold: Counter[str] = Counter()
    n_pred: Counter[str] = Counter()
    for g_sent, p_sent in zip(gold, pred, strict=True):
        g_count = Counter(g_sent)
        p_count = Counter(p_sent)
        for m, c in g_count.items():
            n_gold[m.label] += c
        for m, c in p_count.items():
            n_pred[m.label] += c
        for m, c in (g_count & p_count).items():
            tp[m.label] += c

    total_tp, total_gold, total_pred = sum(tp.values()), sum(n_gold.values()), sum(n_pred.values())
    precision, recall, f1 = _prf(total_tp, total_pred, total_gold)
    per_type: dict[str, dict[str, float | int]] = {}
    for label in sorted(set(n_gold) | set(n_pred)):
        p, r, f = _prf(tp[label], n_pred[label], n_gold[label])
        per_type[label] = {"precision": p, "recall": r, "f1": f, "support": n_gold[label]}
    return {
        "strict": {"precision": precision, "recall": recall, "f1": f1},
        "per_type": per_type,
        "exact_match": _ratio(total_tp, total_gold),
        "n_gold": total_gold,
        "n_pred": total_pred,
    }


def token_macro_f1(gold_tags: Sequence[Sequence[str]], pred_tags: Sequence[Sequence[str]]) -> float:
    """Macro-averaged token F1 over the IOB2 labels present in gold or pred.

    Each distinct tag (``B-X``, ``I-X`` and ``O``) is a class; the score is the unweighted mean
    of the per-class F1 (as scikit-learn's ``f1_score(average="macro")`` with that label set).
    Returns ``0.0`` when there are no tokens. Raises ``ValueError`` when the sentence counts or
    the lengths of a sentence differ.
    """
    _check_same_length(gold_tags, pred_tags, "token_macro_f1")
    tp: Counter[str] = Counter()
    n_gold: Counter[str] = Counter()
    n_pred: Counter[str] = Counter()
    for i, (g_sent, p_sent) in enumerate(zip(gold_tags, pred_tags, strict=True)):
        if len(g_sent) != len(p_sent):
            raise ValueError(
                f"token_macro_f1: sentence {i} has {len(g_sent)} gold tags "
                f"but {len(p_sent)} predicted tags"
            )
        n_gold.update(g_sent)
        n_pred.update(p_sent)
        tp.update(g for g, p in zip(g_sent, p_sent, strict=True) if g == p)
    labels = set(n_gold) | set(n_pred)
    if not labels:
        return 0.0
    return sum(_prf(tp[t], n_pred[t], n_gold[t])[2] for t in labels) / len(labels)


def perplexity(total_nll: float, n_tokens: int) -> float | None:
    """``exp(total_nll / n_tokens)``: perplexity from a summed negative log-likelihood (nats).

    Returns ``None`` when ``n_tokens`` is zero and ``inf`` when the result overflows. Raises
    ``ValueError`` when ``n_tokens`` is negative.
    """
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    if n_tokens == 0:
        return None
    try:
        return math.exp(total_nll / n_tokens)
    except OverflowError:
        return math.inf


def evaluation_report(
    gold: Sequence[Sequence[Mention]],
    pred: Sequence[Sequence[Mention]],
    n_words: Sequence[int],
    total_nll: float | None = None,
    n_masked: int = 0,
) -> dict[str, Any]:
    """The evaluation report of a corpus.

    ``n_words[i]`` is the number of words of sentence ``i`` (needed for token scores);
    ``total_nll`` is the summed negative log-likelihood over ``n_masked`` masked tokens, or
    ``None`` when no language-model loss was measured. Returns::

        {"strict": {"precision", "recall", "f1"},
         "per_type": {TYPE: {"precision", "recall", "f1", "support"}},
         "exact_match": float, "token_macro_f1": float, "perplexity": float | None,
         "n_gold": int, "n_pred": int}

    Raises ``ValueError`` when the sentence counts differ or a mention does not fit its
    sentence (the message names the sentence index).
    """
    _check_same_length(gold, pred, "evaluation_report")
    if len(n_words) != len(gold):
        raise ValueError(
            f"evaluation_report: n_words has {len(n_words)} entries for {len(gold)} sentences "
            f"(first unmatched sentence {min(len(n_words), len(gold))})"
        )
    entities = entity_scores(gold, pred)
    gold_tags: list[list[str]] = []
    pred_tags: list[list[str]] = []
    for i, (n, g_sent, p_sent) in enumerate(zip(n_words, gold, pred, strict=True)):
        for side, mentions, out in (("gold", g_sent, gold_tags), ("pred", p_sent, pred_tags)):
            try:
                out.append(mentions_to_tags(n, mentions))
            except ValueError as exc:
                raise ValueError(f"evaluation_report: sentence {i} ({side}): {exc}") from exc
    return {
        "strict": entities["strict"],
        "per_type": entities["per_type"],
        "exact_match": entities["exact_match"],
        "token_macro_f1": token_macro_f1(gold_tags, pred_tags),
        "perplexity": None if total_nll is None else perplexity(total_nll, n_masked),
        "n_gold": entities["n_gold"],
        "n_pred": entities["n_pred"],
    }
