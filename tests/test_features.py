"""Words ↔ subwords and windows (features.py): coverage, labels, owners, odd inputs.

The tiny tokenizer has a word-level vocabulary (one subword per known word), which makes the
window layouts easy to compute by hand; the real MiniLM tokenizer checks multi-subword words.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mslm_core.corpus import Mention
from mslm_core.features import (
    IGNORE,
    MAX_SUBWORDS_PER_WORD,
    B,
    I,
    O,
    WindowBuilder,
)

TYPES = {"Chemical": 0, "Disease": 1}
# words of the tiny vocabulary (see conftest): each is exactly one subword
VOCAB = ["the", "patient", "has", "breast", "cancer", "no", "sign", "of", "diabetes", "or"]
CLS, SEP = 2, 3  # tiny vocabulary ids


def words(n: int) -> list[str]:
    return [VOCAB[i % len(VOCAB)] for i in range(n)]


@pytest.fixture(scope="module")
def tiny_tok():
    """A word-level tokenizer built like conftest's ``tiny_encoder`` one (without the model,
    which these tests do not need)."""
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted({*VOCAB, "."})]
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)


@pytest.fixture(scope="module")
def minilm_tok():
    from transformers import AutoTokenizer

    from mslm_core.model import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("minilm"))


@pytest.fixture(scope="module")
def tiny12(tiny_tok):
    """max_length 12 = [CLS] + 10 words + [SEP]."""
    return WindowBuilder(tiny_tok, max_length=12)


def word_ids(tok, ws: list[str]) -> list[int]:
    return [tok.convert_tokens_to_ids(w) for w in ws]


# --------------------------------------------------------------------------- builder


def test_builder_reads_special_tokens_and_body(tiny12, minilm_tok):
    assert tiny12.prefix == [CLS] and tiny12.suffix == [SEP] and tiny12.body == 10
    b = WindowBuilder(minilm_tok, max_length=64)
    assert b.prefix == [minilm_tok.cls_token_id] and b.suffix == [minilm_tok.sep_token_id]
    assert b.body == 62


def test_builder_refuses_a_max_length_without_room(tiny_tok):
    WindowBuilder(tiny_tok, max_length=10)  # body 8 is the minimum
    with pytest.raises(ValueError, match="max_length=9"):
        WindowBuilder(tiny_tok, max_length=9)


# --------------------------------------------------------------------------- training


@pytest.mark.parametrize(
    ("n", "ranges"),
    [
        (1, [(0, 1)]),
        (10, [(0, 10)]),
        (11, [(0, 10), (10, 11)]),
        (25, [(0, 10), (10, 20), (20, 25)]),
        (30, [(0, 10), (10, 20), (20, 30)]),
    ],
)
def test_training_windows_cover_every_word_exactly_once(tiny12, tiny_tok, n, ranges):
    ws = words(n)
    wins = tiny12.training_windows([ws], [[]], TYPES)
    assert [(w.word_start, w.word_end) for w in wins] == ranges
    covered = np.concatenate([w.word_index[w.word_index >= 0] for w in wins])
    assert covered.tolist() == list(range(n))
    for w in wins:
        assert len(w) <= 12
        assert w.sentence == 0
        expected = [CLS, *word_ids(tiny_tok, ws[w.word_start : w.word_end]), SEP]
        assert w.input_ids.tolist() == expected
        assert w.word_index[0] == -1 and w.word_index[-1] == -1
        assert w.mentions == []
        # no mention: every word is O at its (only) subword, specials ignored
        assert w.labels.tolist() == [IGNORE] + [O] * (len(w) - 2) + [IGNORE]


def test_training_window_backs_off_to_keep_a_fitting_mention_whole(tiny12):
    # mention = words 8..11 would be cut by the first window (words 0..9)
    ws = words(25)
    wins = tiny12.training_windows([ws], [[Mention(8, 12, "Disease")]], TYPES)
    assert [(w.word_start, w.word_end) for w in wins] == [(0, 8), (8, 18), (18, 25)]
    assert wins[0].mentions == [] and wins[2].mentions == []
    assert wins[1].mentions == [(1, 5, TYPES["Disease"])]
    assert wins[1].labels.tolist() == [IGNORE, B, I, I, I] + [O] * 6 + [IGNORE]
    assert all(len(w) <= 12 for w in wins)


def test_training_window_not_cut_at_a_mention_that_ends_at_the_edge(tiny12):
    # mention words 8..9 ends exactly at the first window's edge: no back-off needed
    wins = tiny12.training_windows([words(15)], [[Mention(8, 10, "Chemical")]], TYPES)
    assert [(w.word_start, w.word_end) for w in wins] == [(0, 10), (10, 15)]
    assert wins[0].mentions == [(9, 11, TYPES["Chemical"])]
    assert wins[0].labels[9:11].tolist() == [B, I]


def test_mention_longer_than_a_window_is_split_and_continues_with_i(tiny12):
    # 12-word mention (words 3..14) cannot fit in 10 positions: it is cut, and the
    # continuation in the next window is labelled I (never B)
    ws = words(25)
    wins = tiny12.training_windows([ws], [[Mention(3, 15, "Disease")]], TYPES)
    assert [(w.word_start, w.word_end) for w in wins] == [(0, 3), (3, 13), (13, 23), (23, 25)]
    d = TYPES["Disease"]
    assert wins[1].mentions == [(1, 11, d)]
    assert wins[1].labels.tolist() == [IGNORE, B] + [I] * 9 + [IGNORE]
    assert wins[2].mentions == [(1, 3, d)]
    assert wins[2].labels.tolist() == [IGNORE, I, I] + [O] * 8 + [IGNORE]
    covered = np.concatenate([w.word_index[w.word_index >= 0] for w in wins])
    assert covered.tolist() == list(range(25))


def test_two_mentions_and_types_in_one_window(tiny12):
    ms = [Mention(0, 1, "Chemical"), Mention(2, 4, "Disease"), Mention(5, 6, "Disease")]
    (win,) = tiny12.training_windows([words(7)], [ms], TYPES)
    assert win.mentions == [(1, 2, 0), (3, 5, 1), (6, 7, 1)]
    assert win.labels.tolist() == [IGNORE, B, O, B, I, O, B, O, IGNORE]


def test_labels_only_at_first_subwords_with_a_wordpiece_tokenizer(minilm_tok):
    ws = ["Cisplatin", "caused", "nephrotoxicity", "and", "hypomagnesaemia", "in", "rats", "."]
    ms = [Mention(0, 1, "Chemical"), Mention(2, 3, "Disease"), Mention(4, 5, "Disease")]
    (win,) = WindowBuilder(minilm_tok, max_length=64).training_windows([ws], [ms], TYPES)
    enc = minilm_tok(ws, is_split_into_words=True)
    assert win.input_ids.tolist() == enc["input_ids"]  # nothing dropped or added
    wids = enc.word_ids()
    assert win.word_index.tolist() == [-1 if w is None else w for w in wids]
    assert max(wids.count(j) for j in range(len(ws))) > 1  # the test needs split words
    tags = [B, O, B, O, B, O, O, O]
    expected = []
    for pos, w in enumerate(wids):
        first = w is not None and wids.index(w) == pos
        expected.append(tags[w] if first else IGNORE)
    assert win.labels.tolist() == expected
    # each mention covers every subword of its word
    for (a, b, t), m in zip(win.mentions, ms, strict=True):
        assert [wids[p] for p in range(a, b)] == [m.start] * (b - a)
        assert wids.count(m.start) == b - a
        assert t == TYPES[m.label]


def test_long_sentence_with_minilm_is_windowed_without_truncation(minilm_tok):
    text = (
        "Mutations in the BRCA1 gene predispose carriers to hereditary breast and ovarian "
        "cancer , while cisplatin-induced nephrotoxicity remains dose limiting ."
    )
    base = text.split(" ")
    ws = base * 6
    ms = [Mention(i * len(base) + 9, i * len(base) + 13, "Disease") for i in range(6)]
    builder = WindowBuilder(minilm_tok, max_length=32)
    wins = builder.training_windows([ws], [ms], TYPES)
    assert len(wins) > 1
    flat = minilm_tok(ws, is_split_into_words=True, add_special_tokens=False)["input_ids"]
    got = []
    for w in wins:
        assert len(w) <= 32
        assert w.input_ids[0] == minilm_tok.cls_token_id
        assert w.input_ids[-1] == minilm_tok.sep_token_id
        got.extend(w.input_ids[1:-1].tolist())
        # each mention fits in 30 positions, so none is cut
        for a, b, _ in w.mentions:
            first_word = int(w.word_index[a])
            assert any(m.start == first_word for m in ms)
            last_word = int(w.word_index[b - 1])
            assert any(m.end == last_word + 1 for m in ms)
    assert got == flat
    assert sum(len(w.mentions) for w in wins) == 6


# --------------------------------------------------------------------------- prediction


def test_prediction_windows_overlap_and_owners_hand_computed(tiny12):
    # body 10, stride 5: windows start every 4 words (advance while < 5 subwords)
    short, long_ = words(5), words(20)
    wins, owners = tiny12.prediction_windows([short, long_])
    assert [(w.sentence, w.word_start, w.word_end) for w in wins] == [
        (0, 0, 5),
        (1, 0, 10),
        (1, 4, 14),
        (1, 8, 18),
        (1, 12, 20),
    ]
    assert owners[0] == [0] * 5
    # word j's owner: where min(distance to an inner left edge, to an inner right edge) is
    # largest; e.g. word 6: window 0 has 3 words to its right edge, window 1 has 2 to its
    # left -> window 0; word 7: 2 vs 3 -> window 1.
    assert owners[1] == [1] * 7 + [2] * 4 + [3] * 4 + [4] * 5
    for w in wins:
        assert len(w) <= 12 and w.labels is None and w.mentions == []


def test_prediction_single_window_when_the_sentence_fits(tiny12, tiny_tok):
    ws = words(10)
    wins, owners = tiny12.prediction_windows([ws])
    assert len(wins) == 1 and owners == [[0] * 10]
    assert wins[0].input_ids.tolist() == [CLS, *word_ids(tiny_tok, ws), SEP]


def test_prediction_owner_reads_a_mention_away_from_the_edge(minilm_tok):
    builder = WindowBuilder(minilm_tok, max_length=24)
    ws = ("the patient developed acute renal failure after cisplatin therapy " * 6).split()
    wins, owners = builder.prediction_windows([ws])
    assert len(wins) > 2
    for j, r in enumerate(owners[0]):
        win = wins[r]
        assert win.word_start <= j < win.word_end
        assert (win.word_index == j).any()  # the owner really holds the word's subwords
        assert len(win) <= 24
    for a, b in itertools.pairwise(wins):
        assert b.word_start < a.word_end  # consecutive windows overlap


# --------------------------------------------------------------------------- layouts


def _margin(counts, ranges, r, j):
    n = len(counts)
    a, b = ranges[r]
    left = sum(counts[a:j]) if a > 0 else float("inf")
    right = sum(counts[j + 1 : b]) if b < n else float("inf")
    return min(left, right)


@st.composite
def counts_and_mentions(draw, max_count=10):
    counts = draw(st.lists(st.integers(0, max_count), min_size=0, max_size=40))
    n = len(counts)
    mentions, j = [], 0
    while j < n:
        if draw(st.booleans()):
            length = draw(st.integers(1, 6))
            end = min(n, j + length)
            mentions.append(Mention(j, end, "Disease"))
            j = end + draw(st.integers(0, 3))
        else:
            j += 1
    return counts, mentions


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(counts_and_mentions())
def test_training_layout_properties(tiny_tok, data):
    builder = WindowBuilder(tiny_tok, max_length=12)  # body 10
    counts, mentions = data
    n = len(counts)
    ranges = builder.training_layout(counts, mentions)
    if n == 0:
        assert ranges == [(0, 0)]
        return
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    for (_, b), (c, _) in itertools.pairwise(ranges):
        assert b == c  # consecutive, non-overlapping: every word exactly once
    for a, b in ranges:
        assert a < b
        assert sum(counts[a:b]) <= builder.body
    cuts = {b for _, b in ranges[:-1]}
    for m in mentions:
        if sum(counts[m.start : m.end]) <= builder.body:
            assert not any(m.start < c < m.end for c in cuts), (m, ranges)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 10), min_size=0, max_size=40))
def test_prediction_layout_properties(tiny_tok, counts):
    builder = WindowBuilder(tiny_tok, max_length=12)  # body 10, stride 5
    n = len(counts)
    ranges, owner = builder.prediction_layout(counts)
    assert len(owner) == n
    if sum(counts) <= builder.body:
        assert ranges == [(0, n)]
        return
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    for (a, b), (c, d) in itertools.pairwise(ranges):
        # starts move forward with no gap; ends never move back (a window may add no new
        # word when the next word still does not fit, e.g. counts [4, 5, 6])
        assert a < c <= b <= d
    for a, b in ranges:
        assert sum(counts[a:b]) <= builder.body
    for j in range(n):
        r = owner[j]
        a, b = ranges[r]
        assert a <= j < b
        best = max(
            _margin(counts, ranges, k, j) for k, (a2, b2) in enumerate(ranges) if a2 <= j < b2
        )
        assert _margin(counts, ranges, r, j) == best
        # ties go to the earlier window
        assert r == min(
            k
            for k, (a2, b2) in enumerate(ranges)
            if a2 <= j < b2 and _margin(counts, ranges, k, j) == best
        )


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(1, 3), min_size=11, max_size=60))
def test_prediction_windows_overlap_when_words_are_short(tiny_tok, counts):
    builder = WindowBuilder(tiny_tok, max_length=12)
    ranges, _ = builder.prediction_layout(counts)
    if sum(counts) > builder.body:
        assert len(ranges) > 1
        for (a, b), (c, d) in itertools.pairwise(ranges):
            assert a < c < b <= d  # overlapping; see the layout test for equal ends


# --------------------------------------------------------------------------- odd inputs


def test_empty_sentences_do_not_crash(tiny12):
    assert tiny12.training_windows([[]], [[]], TYPES) == []
    wins, owners = tiny12.prediction_windows([[]])
    assert owners == [[]]
    assert [w.input_ids.tolist() for w in wins] == [[CLS, SEP]]
    assert tiny12.subwords([[], ["the"], []]) == [
        [],
        [word_ids(tiny12.tokenizer.tokenizer, ["the"])],
        [],
    ]


def test_empty_sentences_between_others_keep_their_indices(tiny12):
    sents = [["the", "patient"], [], ["cancer"]]
    ms = [[Mention(1, 2, "Disease")], [], [Mention(0, 1, "Disease")]]
    wins = tiny12.training_windows(sents, ms, TYPES)
    the, patient, cancer = word_ids(tiny12.tokenizer.tokenizer, ["the", "patient", "cancer"])
    assert [(w.sentence, w.input_ids.tolist()) for w in wins] == [
        (0, [CLS, the, patient, SEP]),
        (2, [CLS, cancer, SEP]),
    ]
    assert wins[1].labels.tolist() == [IGNORE, B, IGNORE]
    pwins, owners = tiny12.prediction_windows(sents)
    assert [w.sentence for w in pwins] == [0, 1, 2]
    assert owners == [[0, 0], [], [2]]


@pytest.mark.parametrize("blank", ["\u200b", "\t", " ", "\u00ad"])
def test_words_without_subwords_do_not_crash(tiny12, blank):
    ws = ["the", blank, "patient", blank, "cancer"]
    assert [len(x) for x in tiny12.subwords([ws])[0]] == [1, 0, 1, 0, 1]
    ms = [Mention(1, 2, "Disease"), Mention(3, 5, "Disease")]
    (win,) = tiny12.training_windows([ws], [ms], TYPES)
    assert win.input_ids.tolist() == [CLS, *word_ids(tiny12.tokenizer.tokenizer, ws[::2]), SEP]
    assert win.word_index.tolist() == [-1, 0, 2, 4, -1]
    # the blank-only mention has no subword to point at; the other keeps its real part
    assert win.mentions == [(3, 4, TYPES["Disease"])]
    # the blank words get no label; the mention's first real word is I here (its B sat on
    # the blank word), which decoding reads as the start of a mention (docs/method.md §4)
    labels = win.labels.tolist()
    assert labels[:3] == [IGNORE, O, O] and labels[4] == IGNORE
    assert labels[3] in (B, I)
    pwins, owners = tiny12.prediction_windows([ws, [blank]])
    assert owners == [[0] * 5, [1]]
    assert pwins[1].input_ids.tolist() == [CLS, SEP]
    assert tiny12.training_windows([[blank]], [[]], TYPES)[0].labels.tolist() == [IGNORE] * 2


def test_blank_words_in_a_long_sentence_keep_every_real_word_covered(tiny12):
    ws = []
    for i in range(30):
        ws.append(VOCAB[i % len(VOCAB)])
        if i % 3 == 0:
            ws.append("\u200b")
    real = [j for j, w in enumerate(ws) if w != "\u200b"]
    wins = tiny12.training_windows([ws], [[]], TYPES)
    covered = np.concatenate([w.word_index[w.word_index >= 0] for w in wins])
    assert covered.tolist() == real
    assert all(len(w) <= 12 for w in wins)
    pwins, owners = tiny12.prediction_windows([ws])
    assert len(owners[0]) == len(ws)
    for j, r in enumerate(owners[0]):
        assert pwins[r].word_start <= j < pwins[r].word_end


def test_pathological_word_is_capped_at_max_subwords(minilm_tok):
    word = "x1y2z3w4v5u6t7s8r9q0p1o2n3m4l5k6j7i8h9g0f1e2d3c4"
    full = minilm_tok([word], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    assert len(full) > MAX_SUBWORDS_PER_WORD
    builder = WindowBuilder(minilm_tok, max_length=64)
    (per_word,) = builder.subwords([["a", word, "b"]])
    assert [len(x) for x in per_word] == [1, MAX_SUBWORDS_PER_WORD, 1]
    assert per_word[1] == full[:MAX_SUBWORDS_PER_WORD]


@pytest.mark.parametrize("mode", ["training", "prediction"])
def test_no_window_exceeds_max_length_even_for_a_long_word(minilm_tok, mode):
    word = "pneumonoultramicroscopicsilicovolcanoconiosis"  # 17 word pieces
    builder = WindowBuilder(minilm_tok, max_length=16)  # body 14
    ws = ["the", "patient", "has", word, "today"]
    if mode == "training":
        wins = builder.training_windows([ws], [[Mention(3, 4, "Disease")]], TYPES)
    else:
        wins, _ = builder.prediction_windows([ws])
    assert max(len(w) for w in wins) <= 16


# --------------------------------------------------------------------------- packing


def test_packing_groups_consecutive_sentences_that_fit_one_window(tiny12):
    # 10 subwords fit a window: 4 + 5 | 3 + 6 | 11 (alone, cut into windows as usual) | 2
    sents = [words(4), words(5), words(3), words(6), words(11), words(2)]
    packing = tiny12.packing(tiny12.subwords(sents))
    assert packing.ranges == [(0, 2), (2, 4), (4, 5), (5, 6)]
    assert packing.run_of == [0, 0, 1, 1, 2, 3]
    assert packing.offsets == [0, 4, 0, 3, 0, 0]
    assert packing.concat(sents)[1] == words(3) + words(6)


def test_packing_never_mixes_groups(tiny12):
    sents = [words(2), words(2), words(2), words(2)]
    packing = tiny12.packing(tiny12.subwords(sents), groups=[0, 0, 1, 1])
    assert packing.ranges == [(0, 2), (2, 4)]
    assert tiny12.packing(tiny12.subwords(sents)).ranges == [(0, 4)]


def test_packed_mentions_shift_to_their_run(tiny12):
    sents = [words(3), words(4)]
    ms = [[Mention(1, 2, "Disease")], [Mention(0, 2, "Chemical"), Mention(3, 4, "Disease")]]
    runs, packed, _ = tiny12.pack(sents, ms)
    assert runs == [words(3) + words(4)]
    assert packed == [
        [Mention(1, 2, "Disease"), Mention(3, 5, "Chemical"), Mention(6, 7, "Disease")]
    ]
    (win,) = tiny12.training_windows(runs, packed, TYPES)
    tags = [t for t in win.labels.tolist() if t != IGNORE]
    assert tags == [O, B, O, B, I, O, B]


def test_first_subword_mask(minilm_tok):
    builder = WindowBuilder(minilm_tok, max_length=64)
    ws = ["the", "nephrotoxicity", "of", "cisplatin"]
    (win,), _ = builder.prediction_windows([ws])
    first = win.first_subword_mask
    assert first.sum() == len(ws) and not first[0] and not first[-1]  # not [CLS] / [SEP]
    assert [int(win.word_index[p]) for p in np.nonzero(first)[0]] == [0, 1, 2, 3]
