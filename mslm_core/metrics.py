"""Evaluation metrics for entity extraction: strict entity scores, token macro-F1, perplexity.

Mentions are compared as :class:`~mslm_core.corpus.Mention` objects (word indices, end
exclusive). A predicted mention counts as correct only if its start, end *and* label equal
those of a gold mention in the same sentence ("strict" matching, as seqeval's
``mode="strict"`` with the IOB2 scheme). All scores are fractions in ``[0, 1]``; a ratio whose
denominator is zero is reported as ``0.0``.

Matching is one-to-one: each gold mention can be matched by at most one prediction, so a
duplicated prediction counts once as a true positive and once as a false positive.
*Overlap* matching (reported beside strict) pairs a prediction with a gold mention of its type
whose words it shares at least one of, each at most once.

A corpus that annotates only some types (one of several a job trains on, ``typemap``) is
judged on those alone: :func:`judge` leaves out predictions of types it does not annotate,
accepts any listed type of a label such as ``"Procedure|Test"``, and neither rewards nor
counts a prediction of a mention that may be no entity (``"O|Result"``). Per type, the types
such a label links are one row (:func:`type_rows`): a corpus that does not say whether a
procedure is a Test cannot score Procedure and Test apart.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from .corpus import Mention
from .typemap import SEPARATOR, is_plain, label_set

__all__ = [
    "entity_scores",
    "evaluation_report",
    "judge",
    "mentions_to_tags",
    "overlap_scores",
    "perplexity",
    "prf",
    "tags_to_mentions",
    "token_macro_f1",
    "type_rows",
]

OUTSIDE = "O"


def _ratio(num: float, den: float) -> float:
    """``num / den``, or ``0.0`` when ``den`` is zero."""
    return num / den if den else 0.0


def prf(
    tp: float, n_pred: float, n_gold: float, tp_gold: float | None = None
) -> tuple[float, float, float]:
    """Precision, recall and F1 from true positives and the two totals (zero-division → 0.0).
    ``tp_gold``, when given, is the number of gold mentions hit, for recall, where a match is
    not one-to-one in counting (overlap: ``tp`` is then the predictions that hit)."""
    precision = _ratio(tp, n_pred)
    recall = _ratio(tp if tp_gold is None else tp_gold, n_gold)
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


M = TypeVar("M")


def judge(
    gold: Sequence[Mention], pred: Sequence[M], annotated: Collection[str] | None = None
) -> tuple[list[Mention], list[M]]:
    """One sentence's gold and predicted mentions as its corpus can judge them.

    ``annotated``: the types the corpus annotates (None: every type) — predictions of other
    types are left out (a prediction's own label may list types too: one annotated is
    enough). A gold label listing several types (``"Procedure|Test"``) takes a
    prediction of any of them on its exact span: the prediction is relabelled as the gold, so
    that strict matching counts it. A gold mention that may be no entity (``"O|Result"``) is
    not counted, and neither is a prediction of it (exact span, a listed type). ``pred`` items
    need ``start``, ``end`` and ``label`` (dataclasses: ``Mention``, ``ScoredMention``)."""
    if annotated is None and all(is_plain(g.label) for g in gold):
        return list(gold), list(pred)
    by_span = {(g.start, g.end): g.label for g in gold if not is_plain(g.label)}
    kept: list[M] = []
    for p in pred:
        label: str = p.label  # type: ignore[attr-defined]
        if annotated is not None and not label_set(label) & set(annotated):
            continue
        span = (p.start, p.end)  # type: ignore[attr-defined]
        gold_label = by_span.get(span)
        if gold_label is not None and (label == gold_label or label in label_set(gold_label)):
            if OUTSIDE in label_set(gold_label):
                continue  # a mention that may be no entity: found, but not counted
            p = replace(p, label=gold_label)  # type: ignore[type-var]
        kept.append(p)
    return [g for g in gold if OUTSIDE not in label_set(g.label)], kept


def type_rows(labels: Iterable[str]) -> dict[str, str]:
    """The per-type row each label is scored in: its own, unless a label listing types
    (``"Procedure|Test"``) links it to others — then the row of all the types linked, named
    like such a label (``"Procedure|Test"``), that ``Procedure``, ``Test`` and
    ``Procedure|Test`` mentions all count in. Scored apart, a prediction of ``Test`` that
    misses a ``Procedure|Test`` mention would count against ``Test``'s precision and a found one
    for ``Procedure|Test``'s, whose precision would always be 1. ``O`` links nothing."""
    types_of = {label: sorted(label_set(label) - {OUTSIDE}) or [label] for label in labels}
    parent: dict[str, str] = {}

    def root(t: str) -> str:
        while parent.setdefault(t, t) != t:
            t = parent[t]
        return t

    for types in types_of.values():
        for t in types[1:]:
            parent[root(t)] = root(types[0])
    members: dict[str, set[str]] = {}
    for types in types_of.values():
        for t in types:
            members.setdefault(root(t), set()).add(t)
    return {
        label: SEPARATOR.join(sorted(members[root(types[0])])) for label, types in types_of.items()
    }


def _same_type(pred_label: str, gold_label: str) -> bool:
    return pred_label == gold_label or pred_label in label_set(gold_label)


def overlap_scores(
    gold: Sequence[Sequence[Mention]], pred: Sequence[Sequence[Mention]]
) -> dict[str, Any]:
    """Micro and per-type precision, recall and F1 when a prediction is right as soon as it
    shares a word with a gold mention of its type (one-to-one, predictions in order, each
    taking the first such gold mention left). Per type (rows as :func:`entity_scores`'s):
    recall by the gold's label, precision by the prediction's."""
    _check_same_length(gold, pred, "overlap_scores")
    row = type_rows(m.label for sent in (*gold, *pred) for m in sent)
    hit_gold: Counter[str] = Counter()
    hit_pred: Counter[str] = Counter()
    n_gold: Counter[str] = Counter()
    n_pred: Counter[str] = Counter()
    for g_sent, p_sent in zip(gold, pred, strict=True):
        taken = [False] * len(g_sent)
        n_gold.update(row[g.label] for g in g_sent)
        for p in sorted(p_sent):
            n_pred[row[p.label]] += 1
            for k, g in enumerate(g_sent):
                if (
                    not taken[k]
                    and p.start < g.end
                    and g.start < p.end
                    and _same_type(p.label, g.label)
                ):
                    taken[k] = True
                    hit_gold[row[g.label]] += 1
                    hit_pred[row[p.label]] += 1
                    break
    total = sum(hit_gold.values())
    precision, recall, f1 = prf(total, sum(n_pred.values()), sum(n_gold.values()))
    per_type = {}
    for label in sorted(set(n_gold) | set(n_pred)):
        prec, rec, f = prf(hit_pred[label], n_pred[label], n_gold[label], hit_gold[label])
        per_type[label] = {"precision": prec, "recall": rec, "f1": f}
    return {"precision": precision, "recall": recall, "f1": f1, "per_type": per_type}


def entity_scores(
    gold: Sequence[Sequence[Mention]], pred: Sequence[Sequence[Mention]]
) -> dict[str, Any]:
    """Strict micro and per-type precision, recall and F1 over a corpus of sentences.

    ``gold[i]`` and ``pred[i]`` are the mentions of sentence ``i``. Returns::

        {"strict": {"precision", "recall", "f1"},
         "per_type": {TYPE: {"precision", "recall", "f1", "support"}},
         "exact_match": float, "n_gold": int, "n_pred": int}

    ``per_type`` covers every type seen in gold or pred (sorted; types that a label listing
    several links share one row, :func:`type_rows`); ``support`` is the number of gold mentions
    of that type. ``exact_match`` is the share of gold mentions predicted
    exactly (boundaries and type). Raises ``ValueError`` when the sentence counts differ.
    """
    _check_same_length(gold, pred, "entity_scores")
    row = type_rows(m.label for sent in (*gold, *pred) for m in sent)
    tp: Counter[str] = Counter()
    n_gold: Counter[str] = Counter()
    n_pred: Counter[str] = Counter()
    for g_sent, p_sent in zip(gold, pred, strict=True):
        g_count = Counter(g_sent)
        p_count = Counter(p_sent)
        for m, c in g_count.items():
            n_gold[row[m.label]] += c
        for m, c in p_count.items():
            n_pred[row[m.label]] += c
        for m, c in (g_count & p_count).items():
            tp[row[m.label]] += c

    total_tp, total_gold, total_pred = sum(tp.values()), sum(n_gold.values()), sum(n_pred.values())
    precision, recall, f1 = prf(total_tp, total_pred, total_gold)
    per_type: dict[str, dict[str, float | int]] = {}
    for label in sorted(set(n_gold) | set(n_pred)):
        p, r, f = prf(tp[label], n_pred[label], n_gold[label])
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
    return sum(prf(tp[t], n_pred[t], n_gold[t])[2] for t in labels) / len(labels)


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
    annotated: Sequence[Collection[str] | None] | None = None,
) -> dict[str, Any]:
    """The evaluation report of a corpus.

    ``n_words[i]`` is the number of words of sentence ``i`` (needed for token scores);
    ``total_nll`` is the summed negative log-likelihood over ``n_masked`` masked tokens, or
    ``None`` when no language-model loss was measured; ``annotated[i]``: the types sentence
    ``i``'s corpus annotates (:func:`judge`; None: all). Returns::

        {"strict": {"precision", "recall", "f1"},
         "overlap": {"precision", "recall", "f1"},
         "per_type": {TYPE: {"precision", "recall", "f1", "support",
                             "overlap": {"precision", "recall", "f1"}}},
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
    if annotated is not None:
        judged = [judge(g, p, a) for g, p, a in zip(gold, pred, annotated, strict=True)]
        gold, pred = [g for g, _ in judged], [p for _, p in judged]
    entities = entity_scores(gold, pred)
    overlap = overlap_scores(gold, pred)
    for label, scores in entities["per_type"].items():
        scores["overlap"] = overlap["per_type"][label]
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
        "overlap": {k: overlap[k] for k in ("precision", "recall", "f1")},
        "per_type": entities["per_type"],
        "exact_match": entities["exact_match"],
        "token_macro_f1": token_macro_f1(gold_tags, pred_tags),
        "perplexity": None if total_nll is None else perplexity(total_nll, n_masked),
        "n_gold": entities["n_gold"],
        "n_pred": entities["n_pred"],
    }
