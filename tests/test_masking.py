"""Masking strategies (docs/method.md §1 and §5) on hand-built windows, and ``corrupt``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mslm_core.errors import ConfigError, UnknownNameError
from mslm_core.features import Window
from mslm_core.masking import (
    BLM,
    ELM,
    NOT_MASKED,
    JointElmBlm,
    PMIMasking,
    PMIVocabulary,
    RandomMasking,
    SpanMasking,
    _segmentations,
    build_strategy,
    corrupt,
    strategy_names,
)

CLS, SEP, MASK = 101, 102, 103


def make_window(
    subwords_per_word: list[int], mentions: list[tuple[int, int, int]] = (), word_start: int = 0
) -> Window:
    """[CLS] words… [SEP]; word j gets ``subwords_per_word[j]`` subwords with ids 1000+pos.

    ``mentions`` are given over *word* indices (start, end, type) and converted to subword
    spans, as ``WindowBuilder`` does.
    """
    ids, widx = [CLS], [-1]
    for j, k in enumerate(subwords_per_word):
        for _ in range(k):
            widx.append(word_start + j)
            ids.append(1000 + len(ids))
    ids.append(SEP)
    widx.append(-1)
    widx_arr = np.asarray(widx, np.int32)
    spans = []
    for a, b, t in mentions:
        pos = np.nonzero((widx_arr >= word_start + a) & (widx_arr < word_start + b))[0]
        spans.append((int(pos[0]), int(pos[-1]) + 1, t))
    return Window(
        sentence=0,
        word_start=word_start,
        word_end=word_start + len(subwords_per_word),
        input_ids=np.asarray(ids, np.int64),
        word_index=widx_arr,
        mentions=spans,
    )


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs [a, b) of masked positions."""
    out, start = [], None
    for i, m in enumerate([*mask.tolist(), 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


# 10 words, some with several subwords; three mentions (word spans 1-3, 4-5, 7-9).
THREE_MENTIONS = make_window([1, 2, 1, 1, 3, 1, 1, 1, 2, 1], [(1, 3, 0), (4, 5, 1), (7, 9, 0)])


# --------------------------------------------------------------------------- ELM / BLM


def _elm_masked_mentions(window: Window, mask_type: np.ndarray) -> int:
    n = 0
    for a, b, _ in window.mentions:
        span = mask_type[a:b]
        if (span == ELM).all():
            n += 1
        else:
            assert not (span == ELM).any(), "a mention is masked whole or not at all"
    return n


@pytest.mark.parametrize(
    ("elm_rate", "expected"),
    [(0.25, 1), (0.33, 1), (0.34, 2), (0.5, 2), (0.75, 3), (1.0, 3), (0.0, 0)],
)
def test_elm_masks_ceil_rate_times_n_whole_mentions(elm_rate, expected):
    strategy = JointElmBlm(elm_rate=elm_rate, blm_rate=0.0)
    for seed in range(30):
        mt = strategy.choose(THREE_MENTIONS, np.random.default_rng(seed))
        assert _elm_masked_mentions(THREE_MENTIONS, mt) == expected
        # with blm_rate 0 nothing but whole mentions is masked
        in_mentions = np.zeros(len(THREE_MENTIONS), bool)
        for a, b, _ in THREE_MENTIONS.mentions:
            in_mentions[a:b] = True
        assert not mt[~in_mentions].any()
        assert set(np.unique(mt).tolist()) <= {NOT_MASKED, ELM}


def test_elm_rate_one_masks_every_subword_of_every_mention_with_type_2():
    mt = JointElmBlm(elm_rate=1.0, blm_rate=0.0).choose(THREE_MENTIONS, np.random.default_rng(0))
    expected = np.zeros(len(THREE_MENTIONS), np.int8)
    # words 1-2 -> subwords 2..4, word 4 -> 6..8, words 7-8 -> 11..13
    expected[2:5] = ELM
    expected[6:9] = ELM
    expected[11:14] = ELM
    assert [tuple(m[:2]) for m in THREE_MENTIONS.mentions] == [(2, 5), (6, 9), (11, 14)]
    np.testing.assert_array_equal(mt, expected)


def test_elm_choice_of_mentions_varies_with_the_seed():
    strategy = JointElmBlm(elm_rate=0.25, blm_rate=0.0)
    chosen = set()
    for seed in range(60):
        mt = strategy.choose(THREE_MENTIONS, np.random.default_rng(seed))
        chosen.add(tuple(i for i, (a, _, _) in enumerate(THREE_MENTIONS.mentions) if mt[a]))
    assert chosen == {(0,), (1,), (2,)}


def test_no_mentions_means_no_elm():
    window = make_window([1] * 12)
    for rate in (0.25, 1.0):
        mt = JointElmBlm(elm_rate=rate, blm_rate=0.3).choose(window, np.random.default_rng(1))
        assert not (mt == ELM).any()


def test_blm_rate_one_masks_everything_else_and_never_specials():
    strategy = JointElmBlm(elm_rate=0.5, blm_rate=1.0)
    for seed in range(20):
        mt = strategy.choose(THREE_MENTIONS, np.random.default_rng(seed))
        assert mt[0] == NOT_MASKED and mt[-1] == NOT_MASKED  # [CLS], [SEP]
        assert _elm_masked_mentions(THREE_MENTIONS, mt) == 2
        # ELM and BLM disjoint; every other non-special token is BLM
        body = mt[1:-1]
        assert set(np.unique(body).tolist()) == {BLM, ELM}
        assert (body != NOT_MASKED).all()


def test_blm_never_lands_inside_an_elm_masked_mention():
    strategy = JointElmBlm(elm_rate=0.34, blm_rate=0.5)
    for seed in range(50):
        mt = strategy.choose(THREE_MENTIONS, np.random.default_rng(seed))
        for a, b, _ in THREE_MENTIONS.mentions:
            span = mt[a:b]
            assert (span == ELM).all() or not (span == ELM).any()


def test_blm_rate_zero_masks_no_blm():
    window = make_window([1] * 40, [(3, 5, 0)])
    strategy = JointElmBlm(elm_rate=1.0, blm_rate=0.0)
    for seed in range(20):
        assert not (strategy.choose(window, np.random.default_rng(seed)) == BLM).any()


@pytest.mark.parametrize("blm_rate", [0.075, 0.15, 0.5])
def test_blm_rate_is_the_masking_probability(blm_rate):
    window = make_window([1] * 50)  # no mentions: 50 candidates per draw
    strategy = JointElmBlm(elm_rate=1.0, blm_rate=blm_rate)
    total = masked = 0
    for seed in range(1000):
        mt = strategy.choose(window, np.random.default_rng(seed))
        assert mt[0] == NOT_MASKED and mt[-1] == NOT_MASKED
        masked += int((mt == BLM).sum())
        total += 50
    # binomial std over 50 000 draws is < 0.0023; allow 4 std
    assert masked / total == pytest.approx(blm_rate, abs=0.01)


def test_same_seed_same_mask_different_seed_different_mask():
    window = make_window([1, 2] * 20, [(2, 4, 0), (10, 13, 1), (20, 21, 0), (30, 33, 1)])
    strategy = JointElmBlm(elm_rate=0.5, blm_rate=0.3)
    a = strategy.choose(window, np.random.default_rng(1234))
    b = strategy.choose(window, np.random.default_rng(1234))
    c = strategy.choose(window, np.random.default_rng(1235))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.int8 and len(a) == len(window)


def test_special_tokens_never_masked_by_any_strategy():
    window = make_window([1, 3, 1, 2] * 5, [(0, 2, 0), (5, 7, 1)])
    vocab = PMIVocabulary(rank={("w0", "w1"): 0})
    strategies = [
        JointElmBlm(elm_rate=1.0, blm_rate=0.9),
        SpanMasking(mask_rate=0.9),
        RandomMasking(mask_rate=0.99),
        PMIMasking(vocabulary=vocab, words=lambda w: [f"w{j}" for j in range(20)], mask_rate=0.9),
    ]
    for strategy in strategies:
        for seed in range(20):
            mt = strategy.choose(window, np.random.default_rng(seed))
            assert not mt[window.special_mask].any(), strategy.name


# --------------------------------------------------------------------------- SPAN


@pytest.mark.parametrize(
    ("n_tokens", "rate"), [(40, 0.15), (40, 0.3), (10, 0.5), (7, 0.15), (100, 0.075), (3, 1.0)]
)
def test_span_budget_never_exceeded_and_spans_stay_inside_the_text(n_tokens, rate):
    window = make_window([1] * n_tokens)
    budget = math.ceil(rate * n_tokens - 1e-9)
    strategy = SpanMasking(mask_rate=rate)
    for seed in range(100):
        mt = strategy.choose(window, np.random.default_rng(seed))
        n = int((mt != NOT_MASKED).sum())
        assert n <= budget
        assert not mt[window.special_mask].any()
        assert set(np.unique(mt).tolist()) <= {NOT_MASKED, BLM}


def test_span_fills_the_budget_without_overlapping_spans():
    # overlapping spans would count their shared tokens twice and leave the mask short
    window = make_window([1] * 60)
    budget = math.ceil(0.15 * 60)
    strategy = SpanMasking(mask_rate=0.15)
    for seed in range(100):
        mt = strategy.choose(window, np.random.default_rng(seed))
        assert budget - 3 <= int((mt != NOT_MASKED).sum()) <= budget


@pytest.mark.parametrize("span", [2, 3, 4])
def test_span_lengths_are_whole_spans(span):
    # budget 12 is a multiple of every fixed span length: each maximal run of masked tokens
    # is one span or several adjacent ones, so its length is a multiple of the span length
    window = make_window([1] * 80)
    strategy = SpanMasking(mask_rate=0.15, min_span=span, max_span=span)
    for seed in range(100):
        mt = strategy.choose(window, np.random.default_rng(seed))
        assert int((mt != NOT_MASKED).sum()) <= 12
        for a, b in runs(mt):
            assert (b - a) % span == 0, (seed, a, b)


def test_span_lengths_vary_between_two_and_four():
    window = make_window([1] * 200)
    strategy = SpanMasking(mask_rate=0.05)  # budget 10 out of 200: runs rarely touch
    lengths = set()
    for seed in range(100):
        mt = strategy.choose(window, np.random.default_rng(seed))
        lengths.update(b - a for a, b in runs(mt))
    assert {2, 3, 4} <= lengths


def test_span_never_masks_a_span_shorter_than_min_span():
    window = make_window([1] * 5)  # budget ceil(0.15 * 5) = 1
    mt = SpanMasking(mask_rate=0.15).choose(window, np.random.default_rng(0))
    assert all(b - a >= 2 for a, b in runs(mt))


def test_span_with_no_text_masks_nothing():
    window = make_window([])
    mt = SpanMasking(mask_rate=0.5).choose(window, np.random.default_rng(0))
    assert mt.tolist() == [0, 0]


# --------------------------------------------------------------------------- RANDOM


@pytest.mark.parametrize("rate", [0.0, 0.15, 0.4])
def test_random_masking_rate(rate):
    window = make_window([1] * 50)
    strategy = RandomMasking(mask_rate=rate)
    masked = 0
    for seed in range(600):
        mt = strategy.choose(window, np.random.default_rng(seed))
        assert not mt[window.special_mask].any()
        assert set(np.unique(mt).tolist()) <= {NOT_MASKED, BLM}
        masked += int(mt.sum())
    assert masked / (600 * 50) == pytest.approx(rate, abs=0.012)
    if rate == 0.0:
        assert masked == 0


# --------------------------------------------------------------------------- PMI


def test_segmentations_of_three():
    assert sorted(_segmentations(3)) == sorted(
        [[(0, 1), (1, 3)], [(0, 2), (2, 3)], [(0, 1), (1, 2), (2, 3)]]
    )


@pytest.mark.parametrize(("n", "count"), [(2, 1), (3, 3), (4, 7)])
def test_segmentations_count_and_shape(n, count):
    segs = _segmentations(n)
    assert len(segs) == count
    assert len({tuple(s) for s in segs}) == count
    for seg in segs:
        assert len(seg) >= 2
        assert seg[0][0] == 0 and seg[-1][1] == n
        assert all(a < b for a, b in seg)
        assert all(seg[i][1] == seg[i + 1][0] for i in range(len(seg) - 1))


def test_pmi_score_of_a_bigram_by_hand():
    # 5 × "new york": p(new york) = 5/5, p(new) = p(york) = 5/10 -> log(1 / 0.25) = log 4
    vocab = PMIVocabulary.build([["New", "York"]] * 5, min_count=5)
    assert vocab.scores[("new", "york")] == pytest.approx(math.log(4))
    assert set(vocab.rank) == {("new", "york")}


def test_pmi_score_of_a_trigram_is_the_minimum_over_segmentations():
    # 5 × "a b c": T1 = 15, T2 = 10, T3 = 5.  p(abc) = 1;
    # (a)(bc): 1/(1/3 · 1/2) = 6;  (ab)(c): 6;  (a)(b)(c): 27  -> min = log 6
    vocab = PMIVocabulary.build([["a", "b", "c"]] * 5, min_count=5)
    assert vocab.scores[("a", "b", "c")] == pytest.approx(math.log(6))
    assert vocab.scores[("a", "b")] == pytest.approx(math.log(0.5 / (1 / 9)))
    assert vocab.scores[("b", "c")] == pytest.approx(math.log(4.5))
    assert len(vocab) == 3


def test_pmi_min_count_is_respected():
    assert len(PMIVocabulary.build([["new", "york"]] * 4, min_count=5)) == 0
    assert len(PMIVocabulary.build([["new", "york"]] * 5, min_count=5)) == 1
    assert len(PMIVocabulary.build([["new", "york"]] * 4, min_count=4)) == 1


def _collocation_corpus() -> list[list[str]]:
    sents = []
    fillers = ["dog", "house", "tree", "car", "book", "road", "sky", "lamp"]
    for i in range(40):
        f = fillers[i % len(fillers)]
        g = fillers[(i + 3) % len(fillers)]
        sents.append(["the", f, "saw", "the", g])  # "the" and fillers are everywhere
        if i % 4 == 0:
            sents.append(["we", "visited", "new", "york", "and", "the", "cat"])  # "new york"
        if i % 8 == 0:
            sents.append(["the", "cat", "and", "a", "dog"])
    return sents


def test_pmi_ranks_a_collocation_above_a_chance_pair():
    vocab = PMIVocabulary.build(_collocation_corpus(), min_count=5)
    assert ("new", "york") in vocab.rank and ("the", "cat") in vocab.rank
    assert vocab.rank[("new", "york")] < vocab.rank[("the", "cat")]
    assert vocab.scores[("new", "york")] > vocab.scores[("the", "cat")]
    # rank 0 is the best score; ranks are 0..len-1
    assert sorted(vocab.rank.values()) == list(range(len(vocab)))
    best = min(vocab.rank, key=vocab.rank.get)
    assert vocab.scores[best] == max(vocab.scores.values())


PMI_WORDS = ["we", "saw", "new", "york", "and", "the", "old", "city", "today"]
# "new" 1 subword, "york" 2 subwords: the n-gram costs 3 tokens; 12 tokens in all
PMI_SUBWORDS = [1, 2, 1, 2, 1, 1, 1, 2, 1]


def _pmi_window() -> Window:
    return make_window(PMI_SUBWORDS, word_start=4)  # a window in the middle of a sentence


def test_pmi_masks_the_vocabulary_ngram_first():
    window = _pmi_window()
    vocab = PMIVocabulary(rank={("new", "york"): 0})
    strategy = PMIMasking(vocabulary=vocab, words=lambda w: PMI_WORDS, mask_rate=3 / 12)
    expected = np.zeros(len(window), np.int8)
    expected[4:7] = BLM  # "new" at subword 4, "york" at 5-6
    for seed in range(20):
        np.testing.assert_array_equal(
            strategy.choose(window, np.random.default_rng(seed)), expected
        )


def test_pmi_prefers_the_higher_ranked_ngram():
    window = _pmi_window()
    vocab = PMIVocabulary(rank={("new", "york"): 1, ("old", "city"): 0})
    strategy = PMIMasking(vocabulary=vocab, words=lambda w: PMI_WORDS, mask_rate=3 / 12)
    mt = strategy.choose(window, np.random.default_rng(0))
    expected = np.zeros(len(window), np.int8)
    expected[9:12] = BLM  # "old" at 9, "city" at 10-11
    np.testing.assert_array_equal(mt, expected)


@pytest.mark.parametrize("rate", [0.1, 0.15, 0.25, 0.5, 0.9])
def test_pmi_never_exceeds_the_budget_and_masks_whole_words(rate):
    window = _pmi_window()
    vocab = PMIVocabulary(rank={("new", "york"): 0, ("the", "old", "city"): 1, ("saw", "new"): 2})
    strategy = PMIMasking(vocabulary=vocab, words=lambda w: PMI_WORDS, mask_rate=rate)
    budget = math.ceil(rate * 12 - 1e-9)
    for seed in range(50):
        mt = strategy.choose(window, np.random.default_rng(seed))
        assert int((mt != NOT_MASKED).sum()) <= budget
        assert not mt[window.special_mask].any()
        for j in range(len(PMI_WORDS)):
            word = mt[window.word_index == 4 + j]
            assert word.all() or not word.any(), "whole words only"


def test_pmi_without_words_is_a_config_error():
    with pytest.raises(ConfigError):
        PMIMasking().choose(_pmi_window(), np.random.default_rng(0))


# --------------------------------------------------------------------------- registry


def test_strategy_registry_names():
    assert strategy_names() == ["mslm", "pmi", "random", "span"]
    assert isinstance(build_strategy("span", mask_rate=0.2), SpanMasking)
    assert build_strategy("mslm", elm_rate=0.5).elm_rate == 0.5
    assert build_strategy("random").name == "random"


def test_unknown_strategy_lists_the_valid_names():
    with pytest.raises(UnknownNameError) as info:
        build_strategy("whole_word")
    message = str(info.value)
    assert "'whole_word'" in message
    for name in ("mslm", "pmi", "random", "span"):
        assert name in message
    assert info.value.valid == ["mslm", "pmi", "random", "span"]


# --------------------------------------------------------------------------- corrupt


def test_corrupt_mask_replaces_exactly_the_chosen_positions():
    ids = np.arange(100, 112, dtype=np.int64)
    mask_type = np.array([0, 1, 0, 2, 2, 0, 0, 1, 0, 0, 2, 0], np.int8)
    out = corrupt(ids, mask_type, MASK, np.random.default_rng(0))
    expected = ids.copy()
    expected[[1, 3, 4, 7, 10]] = MASK
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(ids, np.arange(100, 112))  # input untouched


def test_corrupt_with_nothing_chosen_is_a_copy():
    ids = np.arange(5, dtype=np.int64)
    out = corrupt(
        ids, np.zeros(5, np.int8), MASK, np.random.default_rng(0), replace="bert", vocab_size=10
    )
    np.testing.assert_array_equal(out, ids)
    assert out is not ids


def test_corrupt_bert_is_80_10_10():
    n = 20000
    original = 500
    ids = np.full(n, original, np.int64)
    mask_type = np.ones(n, np.int8)
    mask_type[::10] = 0  # 2000 unchosen positions stay as they are
    chosen = mask_type != 0
    out = corrupt(
        ids,
        mask_type,
        MASK,
        np.random.default_rng(7),
        replace="bert",
        vocab_size=1000,
        special_ids=(0, 101, 102, MASK),
    )
    assert (out[~chosen] == original).all()
    got = out[chosen]
    m = len(got)
    frac_mask = (got == MASK).mean()
    frac_same = (got == original).mean()
    frac_random = 1 - frac_mask - frac_same
    assert frac_mask == pytest.approx(0.8, abs=0.015)
    assert frac_same == pytest.approx(0.1, abs=0.01)  # + 1/1000 of the random draws
    assert frac_random == pytest.approx(0.1, abs=0.01)
    assert m == 18000


def test_corrupt_bert_never_draws_a_special_id():
    # vocab of 8 where 0-4 are special (MASK included): random draws must be 5, 6 or 7
    n = 5000
    ids = np.full(n, 7, np.int64)
    out = corrupt(
        ids,
        np.ones(n, np.int8),
        4,
        np.random.default_rng(3),
        replace="bert",
        vocab_size=8,
        special_ids=[0, 1, 2, 3, 4],
    )
    values = set(np.unique(out).tolist())
    assert values <= {4, 5, 6, 7}
    assert {5, 6} <= values  # the random branch happens
    assert (out == 4).mean() == pytest.approx(0.8, abs=0.03)


def test_corrupt_bert_needs_vocab_size_and_unknown_replace_is_named():
    ids = np.arange(4, dtype=np.int64)
    mt = np.ones(4, np.int8)
    with pytest.raises(ConfigError):
        corrupt(ids, mt, MASK, np.random.default_rng(0), replace="bert")
    with pytest.raises(UnknownNameError, match="bert"):
        corrupt(ids, mt, MASK, np.random.default_rng(0), replace="random")


# --------------------------------------------------------------------------- training plans


def test_one_vocabulary_every_training_strategy_masks_with_a_strategy_named_like_one():
    from mslm_core.config import STRATEGIES

    for name, strategy in STRATEGIES.items():
        assert strategy.masking is None or strategy.masking in STRATEGIES, name
        assert strategy.masking is None or strategy.masking in strategy_names(), name


@pytest.mark.parametrize("strategy", ["vanilla", "mslm", "mslm_tapt", "span", "random", "pmi"])
def test_each_strategy_builds_itself_for_a_training_run(strategy):
    from mslm_core.config import TrainConfig
    from mslm_core.masking import count_masks, plan_masking

    # 4 windows of 10 one-subword words, one 2-word mention each
    windows = [make_window([1] * 10, [(2, 4, 0)]) for _ in range(4)]
    for s, w in enumerate(windows):
        w.sentence = s
    sentences = [["the", "patient", "breast", "cancer", "and", "the", "patient", "had", "a", "x"]]
    sentences *= 4
    cfg = TrainConfig(strategy=strategy, elm_rate=1.0, blm_rate=0.1, seed=3)
    plan = plan_masking(cfg, windows, sentences)
    if strategy == "vanilla":
        assert plan.strategy is None and plan.weights == (1.0, 1.0) and plan.info == {}
        return
    counts = count_masks(cfg, windows)
    assert counts.n_elm == 8 and counts.n_tokens == 40  # every mention: 2 tokens × 4
    assert plan.info["n_elm"] == counts.n_elm and plan.info["n_blm"] == counts.n_blm
    assert plan.strategy.name == cfg.masking_strategy
    if cfg.weighted:  # MSLM's weights (eq. 2–5), from the same counts
        from mslm_core.weights import mask_specific_weights

        assert plan.weights == mask_specific_weights(counts.n_elm, counts.n_blm)
    else:  # a comparison strategy: MSLM's masking budget, unweighted
        assert plan.weights == (1.0, 1.0)
        assert plan.strategy.mask_rate == pytest.approx(counts.rate)
        assert plan.info["mask_rate"] == pytest.approx(counts.rate)
    if strategy == "pmi":
        assert plan.info["pmi_vocabulary"] > 0  # "the patient" and longer n-grams, 8 times
