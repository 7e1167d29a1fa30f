"""Tests of mslm_core.metrics: hand-computed cases, IOB2 decoding, and seqeval/sklearn oracles."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from conftest import DATA, missing_data

from mslm_core.corpus import Mention
from mslm_core.metrics import (
    entity_scores,
    evaluation_report,
    mentions_to_tags,
    overlap_scores,
    perplexity,
    tags_to_mentions,
    token_macro_f1,
)

M = Mention


# --------------------------------------------------------------------------- hand-computed


def _pt(p: float, r: float, f: float, support: int) -> dict[str, float]:
    return {"precision": p, "recall": r, "f1": f, "support": support}


ENTITY_CASES = [
    pytest.param(
        [[M(0, 2, "D"), M(3, 4, "C")]],
        [[M(0, 2, "D"), M(3, 4, "C")]],
        (1.0, 1.0, 1.0),
        {"C": _pt(1.0, 1.0, 1.0, 1), "D": _pt(1.0, 1.0, 1.0, 1)},
        (1.0, 2, 2),
        id="perfect",
    ),
    pytest.param(
        [[M(0, 2, "D")], [M(1, 2, "D")]],
        [[], []],
        (0.0, 0.0, 0.0),
        {"D": _pt(0.0, 0.0, 0.0, 2)},
        (0.0, 2, 0),
        id="empty-pred",
    ),
    pytest.param(
        [[], []],
        [[M(0, 1, "D")], []],
        (0.0, 0.0, 0.0),
        {"D": _pt(0.0, 0.0, 0.0, 0)},
        (0.0, 0, 1),
        id="empty-gold",
    ),
    pytest.param(
        [[], []],
        [[], []],
        (0.0, 0.0, 0.0),
        {},
        (0.0, 0, 0),
        id="both-empty",
    ),
    pytest.param(
        [[M(0, 2, "D"), M(4, 5, "D")]],
        [[M(0, 3, "D"), M(4, 5, "D")]],
        (0.5, 0.5, 0.5),
        {"D": _pt(0.5, 0.5, 0.5, 2)},
        (0.5, 2, 2),
        id="boundary-off-by-one-end",
    ),
    pytest.param(
        [[M(1, 3, "D")]],
        [[M(0, 3, "D")]],
        (0.0, 0.0, 0.0),
        {"D": _pt(0.0, 0.0, 0.0, 1)},
        (0.0, 1, 1),
        id="boundary-off-by-one-start",
    ),
    pytest.param(
        [[M(0, 2, "D")], [M(1, 2, "C")]],
        [[M(0, 2, "C")], [M(1, 2, "C")]],
        (0.5, 0.5, 0.5),
        {"C": _pt(0.5, 1.0, 2 / 3, 1), "D": _pt(0.0, 0.0, 0.0, 1)},
        (0.5, 2, 2),
        id="wrong-type",
    ),
    pytest.param(
        [[M(0, 2, "D")]],
        [[M(0, 2, "D"), M(0, 2, "D")]],
        (0.5, 1.0, 2 / 3),
        {"D": _pt(0.5, 1.0, 2 / 3, 1)},
        (1.0, 1, 2),
        id="duplicate-prediction",
    ),
    pytest.param(
        [[M(0, 1, "D")], []],
        [[], [M(0, 1, "D")]],
        (0.0, 0.0, 0.0),
        {"D": _pt(0.0, 0.0, 0.0, 1)},
        (0.0, 1, 1),
        id="other-sentence-does-not-count",
    ),
    pytest.param(
        [[M(0, 1, "D"), M(2, 3, "D"), M(4, 6, "C")]],
        [[M(0, 1, "D"), M(2, 4, "D")]],
        (0.5, 1 / 3, 0.4),
        {"C": _pt(0.0, 0.0, 0.0, 1), "D": _pt(0.5, 0.5, 0.5, 2)},
        (1 / 3, 3, 2),
        id="mixed",
    ),
]


@pytest.mark.parametrize(("gold", "pred", "strict", "per_type", "totals"), ENTITY_CASES)
def test_entity_scores_hand_computed(gold, pred, strict, per_type, totals):
    got = entity_scores(gold, pred)
    assert set(got) == {"strict", "per_type", "exact_match", "n_gold", "n_pred"}
    assert got["strict"] == pytest.approx(
        {"precision": strict[0], "recall": strict[1], "f1": strict[2]}
    )
    assert list(got["per_type"]) == sorted(per_type)
    for label, expected in per_type.items():
        assert got["per_type"][label] == pytest.approx(expected)
        assert isinstance(got["per_type"][label]["support"], int)
    exact, n_gold, n_pred = totals
    assert got["exact_match"] == pytest.approx(exact)
    assert (got["n_gold"], got["n_pred"]) == (n_gold, n_pred)
    assert isinstance(got["n_gold"], int) and isinstance(got["n_pred"], int)


def test_entity_scores_sentence_count_mismatch_names_index():
    with pytest.raises(ValueError, match="sentence 1"):
        entity_scores([[], []], [[]])
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([], [[M(0, 1, "D")]])


def test_token_macro_f1_hand_computed():
    gold = [["B-D", "I-D", "O", "O"]]
    pred = [["B-D", "O", "O", "B-C"]]
    # B-D: 1, I-D: 0, O: P=R=1/2 -> 1/2, B-C: 0  => (1 + 0 + 0.5 + 0) / 4
    assert token_macro_f1(gold, pred) == pytest.approx(0.375)
    assert token_macro_f1([["O", "B-D"]], [["O", "B-D"]]) == 1.0
    assert token_macro_f1([], []) == 0.0
    assert token_macro_f1([[]], [[]]) == 0.0


def test_token_macro_f1_length_mismatch_names_sentence():
    with pytest.raises(ValueError, match="sentence 1"):
        token_macro_f1([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="sentence 1"):
        token_macro_f1([["O"], ["O"]], [["O"]])


# --------------------------------------------------------------------------- IOB2 codec


@pytest.mark.parametrize(
    ("tags", "mentions", "repairs"),
    [
        ([], [], 0),
        (["O", "O"], [], 0),
        (["B-D", "I-D", "O"], [M(0, 2, "D")], 0),
        (["B-D", "B-D"], [M(0, 1, "D"), M(1, 2, "D")], 0),
        (["O", "B-C", "I-C", "I-C"], [M(1, 4, "C")], 0),
        (["I-D", "I-D", "O"], [M(0, 2, "D")], 1),
        (["O", "I-D"], [M(1, 2, "D")], 1),
        (["B-D", "I-C"], [M(0, 1, "D"), M(1, 2, "C")], 1),
        (
            ["B-D", "I-D", "I-C", "I-C", "O", "I-D"],
            [M(0, 2, "D"), M(2, 4, "C"), M(5, 6, "D")],
            2,
        ),
        (["B-Dis-ease", "I-Dis-ease"], [M(0, 2, "Dis-ease")], 0),
    ],
)
def test_tags_to_mentions(tags, mentions, repairs):
    assert tags_to_mentions(tags) == (mentions, repairs)


@pytest.mark.parametrize("bad", ["X-D", "B-", "B", "I", "o", ""])
def test_tags_to_mentions_rejects_non_iob2(bad):
    with pytest.raises(ValueError, match="IOB2"):
        tags_to_mentions(["O", bad])


def test_mentions_to_tags():
    assert mentions_to_tags(0, []) == []
    assert mentions_to_tags(5, [M(3, 5, "C"), M(0, 1, "D"), M(1, 2, "D")]) == [
        "B-D",
        "B-D",
        "O",
        "B-C",
        "I-C",
    ]


@pytest.mark.parametrize(
    "mentions",
    [[M(2, 4, "D")], [M(1, 1, "D")], [M(-1, 1, "D")], [M(0, 2, "D"), M(1, 3, "C")]],
    ids=["past-end", "empty", "negative", "overlap"],
)
def test_mentions_to_tags_rejects(mentions):
    with pytest.raises(ValueError):
        mentions_to_tags(3, mentions)


def test_decoding_matches_seqeval_chunker_on_random_tags():
    """Repairs follow conlleval (seqeval's default chunker): I-X after O/another type starts."""
    get_entities = pytest.importorskip("seqeval.metrics.sequence_labeling").get_entities
    rng = random.Random(7)
    alphabet = ["O", "B-D", "I-D", "B-C", "I-C"]
    total_repairs = 0
    for _ in range(500):
        tags = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        mentions, repairs = tags_to_mentions(tags)
        expected = sorted(M(s, e + 1, t) for t, s, e in get_entities(tags))
        assert mentions == expected
        total_repairs += repairs
        # encoding the decoded mentions gives well-formed tags that decode without repairs
        assert tags_to_mentions(mentions_to_tags(len(tags), mentions)) == (mentions, 0)
    assert total_repairs > 0


# --------------------------------------------------------------------------- perplexity


def test_perplexity():
    assert perplexity(0.0, 5) == 1.0
    assert perplexity(10 * math.log(4.0), 10) == pytest.approx(4.0)
    assert perplexity(3.0, 0) is None
    assert perplexity(1e6, 1) == math.inf
    with pytest.raises(ValueError):
        perplexity(1.0, -1)


# --------------------------------------------------------------------------- report

REPORT_KEYS = {
    "strict",
    "overlap",
    "per_type",
    "exact_match",
    "token_macro_f1",
    "perplexity",
    "n_gold",
    "n_pred",
}


def test_evaluation_report_contract():
    gold = [[M(0, 2, "D")], [M(1, 2, "C")]]
    pred = [[M(0, 2, "D")], [M(0, 2, "C")]]
    report = evaluation_report(gold, pred, [4, 3], total_nll=2 * math.log(3.0), n_masked=2)
    assert set(report) == REPORT_KEYS
    scores = entity_scores(gold, pred)
    for key in ("strict", "exact_match", "n_gold", "n_pred"):
        assert report[key] == scores[key]
    # per type: the strict scores, and the overlap ones beside them
    overlap = overlap_scores(gold, pred)
    for label, entry in report["per_type"].items():
        assert {k: v for k, v in entry.items() if k != "overlap"} == scores["per_type"][label]
        assert entry["overlap"] == overlap["per_type"][label]
    assert report["overlap"] == {k: overlap[k] for k in ("precision", "recall", "f1")}
    assert report["overlap"]["f1"] == 1.0  # the C prediction shares a word with the gold C
    # gold tags B-D I-D O O | O B-C O ; pred B-D I-D O O | B-C I-C O
    expected_tokens = token_macro_f1(
        [["B-D", "I-D", "O", "O"], ["O", "B-C", "O"]],
        [["B-D", "I-D", "O", "O"], ["B-C", "I-C", "O"]],
    )
    assert report["token_macro_f1"] == pytest.approx(expected_tokens)
    assert report["perplexity"] == pytest.approx(3.0)
    for value in (*report["strict"].values(), report["exact_match"], report["token_macro_f1"]):
        assert 0.0 <= value <= 1.0


def test_evaluation_report_without_loss():
    assert evaluation_report([[]], [[]], [2])["perplexity"] is None
    assert evaluation_report([[]], [[]], [2], total_nll=1.0, n_masked=0)["perplexity"] is None


def test_evaluation_report_errors_name_sentence():
    with pytest.raises(ValueError, match="sentence 1"):
        evaluation_report([[], []], [[]], [1, 1])
    with pytest.raises(ValueError, match="sentence 1"):
        evaluation_report([[], []], [[], []], [1])
    with pytest.raises(ValueError, match=r"sentence 1 \(gold\)"):
        evaluation_report([[], [M(0, 3, "D")]], [[], []], [2, 2])
    with pytest.raises(ValueError, match=r"sentence 0 \(pred\)"):
        evaluation_report([[]], [[M(0, 1, "D"), M(0, 1, "D")]], [2])


# --------------------------------------------------------------------------- oracles


def _read_iob(path: Path) -> list[list[str]]:
    """Tags of a ``TOKEN<TAB>TAG`` file, one list per blank-line separated sentence."""
    sentences: list[list[str]] = []
    current: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
        else:
            current.append(line.rsplit("\t", 1)[1])
    if current:
        sentences.append(current)
    return sentences


def _perturb(
    gold: list[list[Mention]], n_words: list[int], seed: int
) -> tuple[list[list[Mention]], dict[str, int]]:
    """Predictions from gold: drop ~10 %, shift a boundary of ~10 %, retype ~10 % (when there are
    two types), and add spurious one-word mentions on O words, ~5 % as many as gold mentions."""
    rng = random.Random(seed)
    types = sorted({m.label for sent in gold for m in sent})
    n_mentions = sum(len(sent) for sent in gold)
    n_outside = sum(n_words) - sum(m.end - m.start for sent in gold for m in sent)
    p_spurious = 0.05 * n_mentions / max(n_outside, 1)
    counts = dict.fromkeys(("drop", "shift", "retype", "spurious"), 0)
    pred: list[list[Mention]] = []
    for mentions, n in zip(gold, n_words, strict=True):
        taken = [False] * n
        for m in mentions:
            taken[m.start : m.end] = [True] * (m.end - m.start)
        out: list[Mention] = []
        for m in mentions:
            r = rng.random()
            if r < 0.10:
                counts["drop"] += 1
                taken[m.start : m.end] = [False] * (m.end - m.start)
                continue
            if r < 0.20:
                shifts = [(-1, 0), (1, 0), (0, -1), (0, 1)]
                rng.shuffle(shifts)
                for ds, de in shifts:  # the first shift that stays in the sentence, unoverlapped
                    start, end = m.start + ds, m.end + de
                    if 0 <= start < end <= n and all(
                        not taken[i] or m.start <= i < m.end for i in range(start, end)
                    ):
                        taken[m.start : m.end] = [False] * (m.end - m.start)
                        taken[start:end] = [True] * (end - start)
                        m = Mention(start, end, m.label)
                        counts["shift"] += 1
                        break
            elif r < 0.30 and len(types) > 1:
                m = Mention(m.start, m.end, rng.choice([t for t in types if t != m.label]))
                counts["retype"] += 1
            out.append(m)
        for i in range(n):
            if not taken[i] and rng.random() < p_spurious:
                out.append(Mention(i, i + 1, rng.choice(types)))
                taken[i] = True
                counts["spurious"] += 1
        pred.append(sorted(out))
    return pred, counts


@pytest.mark.parametrize(("corpus", "n_types"), [("NCBI-disease-IOB", 1), ("BC5CDR-IOB", 2)])
def test_oracle_against_seqeval_and_sklearn(corpus, n_types):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    iob2 = pytest.importorskip("seqeval.scheme").IOB2
    sk_f1 = pytest.importorskip("sklearn.metrics").f1_score
    path = DATA / corpus / "devel.tsv"
    if not path.is_file():
        missing_data(f"{path} not present")

    gold_tags = _read_iob(path)
    gold, n_words = [], []
    for tags in gold_tags:
        mentions, repairs = tags_to_mentions(tags)
        assert repairs == 0
        assert mentions_to_tags(len(tags), mentions) == tags  # lossless round trip
        gold.append(mentions)
        n_words.append(len(tags))
    pred, counts = _perturb(gold, n_words, seed=20240611)
    assert counts["drop"] and counts["shift"] and counts["spurious"]
    assert bool(counts["retype"]) == (n_types > 1)
    pred_tags = [mentions_to_tags(n, p) for n, p in zip(n_words, pred, strict=True)]

    report = evaluation_report(gold, pred, n_words)
    assert set(report) == REPORT_KEYS
    assert report["perplexity"] is None
    assert len(report["per_type"]) == n_types
    assert 0.6 < report["strict"]["f1"] < 0.9  # the perturbation really changed something

    kw = {"mode": "strict", "scheme": iob2}
    strict = report["strict"]
    assert strict["precision"] == pytest.approx(
        seqeval_metrics.precision_score(gold_tags, pred_tags, **kw), abs=1e-9
    )
    assert strict["recall"] == pytest.approx(
        seqeval_metrics.recall_score(gold_tags, pred_tags, **kw), abs=1e-9
    )
    assert strict["f1"] == pytest.approx(
        seqeval_metrics.f1_score(gold_tags, pred_tags, **kw), abs=1e-9
    )
    oracle = seqeval_metrics.classification_report(gold_tags, pred_tags, output_dict=True, **kw)
    types = sorted(k for k in oracle if not k.endswith(" avg"))
    assert list(report["per_type"]) == types
    for label in types:
        ours, theirs = report["per_type"][label], oracle[label]
        assert ours["precision"] == pytest.approx(theirs["precision"], abs=1e-9)
        assert ours["recall"] == pytest.approx(theirs["recall"], abs=1e-9)
        assert ours["f1"] == pytest.approx(theirs["f1-score"], abs=1e-9)
        assert ours["support"] == theirs["support"]
    assert report["n_gold"] == sum(oracle[t]["support"] for t in types)
    assert report["exact_match"] == pytest.approx(strict["recall"], abs=1e-12)

    flat_gold = [t for sent in gold_tags for t in sent]
    flat_pred = [t for sent in pred_tags for t in sent]
    labels = sorted(set(flat_gold) | set(flat_pred))
    expected = sk_f1(flat_gold, flat_pred, labels=labels, average="macro", zero_division=0)
    assert report["token_macro_f1"] == pytest.approx(expected, abs=1e-9)
    assert token_macro_f1(gold_tags, pred_tags) == pytest.approx(expected, abs=1e-9)
