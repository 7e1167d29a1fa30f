"""Decoding word tags into mentions (Viterbi and argmax), sentence packing at prediction, and
where a mention's type features are pooled."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_bundle_predict_cli import TaggingBackend

from mslm_core.features import B, I, O, WindowBuilder
from mslm_core.predict.confidence import temper
from mslm_core.predict.decoding import decode_bio, decode_tags, trim_hyphens
from mslm_core.predict.predictor import Predictor


def _valid(tags: tuple[int, ...]) -> bool:
    """No I opens the sentence or follows O."""
    return all(t != I or (j > 0 and tags[j - 1] != O) for j, t in enumerate(tags))


def _brute_force(probs: np.ndarray) -> list[int]:
    logp = np.log(probs)
    best = max(
        (t for t in itertools.product((B, I, O), repeat=len(probs)) if _valid(t)),
        key=lambda t: sum(logp[j, k] for j, k in enumerate(t)),
    )
    return list(best)


@pytest.mark.parametrize("seed", range(40))
def test_viterbi_is_the_most_probable_valid_sequence(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    probs = rng.dirichlet(np.ones(3) * 0.7, size=n)
    tags = decode_tags(probs, "viterbi")
    assert _valid(tuple(tags))
    assert tags == _brute_force(probs)


def test_viterbi_repairs_what_argmax_reads_as_an_orphan_i():
    # argmax: O I I → a mention opened by an I; viterbi: B I I (B's 0.35 beats O's 0.4 given
    # that only B lets the two confident I's count)
    probs = np.array([[0.35, 0.25, 0.40], [0.05, 0.9, 0.05], [0.05, 0.9, 0.05]])
    assert decode_tags(probs, "argmax") == [O, I, I]
    assert decode_tags(probs, "viterbi") == [B, I, I]
    # a lone weak I after a confident O is dropped rather than made a mention
    probs = np.array([[0.05, 0.05, 0.9], [0.2, 0.45, 0.35]])
    assert decode_bio(decode_tags(probs, "argmax")) == [(1, 2)]
    assert decode_bio(decode_tags(probs, "viterbi")) == []


@pytest.mark.parametrize("temperature", [0.3, 1.7, 6.0])
def test_a_temperature_never_changes_the_viterbi_path(temperature):
    rng = np.random.default_rng(7)
    for _ in range(30):
        probs = rng.dirichlet(np.ones(3), size=int(rng.integers(1, 12))).astype(np.float32)
        assert decode_tags(temper(probs, temperature), "viterbi") == decode_tags(probs, "viterbi")


def test_empty_sentence_decodes_to_nothing():
    assert decode_tags(np.zeros((0, 3)), "viterbi") == []


def test_unknown_decoding_is_refused(tiny_encoder):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_encoder))
    with pytest.raises(ValueError, match="decoding must be one of viterbi, argmax"):
        Predictor(TaggingBackend(tok), WindowBuilder(tok, 16), ["Disease"], decoding="crf")


# --------------------------------------------------------------------------- packing


TEXTS = [
    "The patient has breast cancer. No sign of diabetes. breast cancer again.",
    "breast cancer",
    "",
    "The patient. The patient has breast cancer and breast cancer. " * 6,
]


@pytest.mark.parametrize("max_length", [12, 23, 64])
def test_packing_reads_the_same_mentions_with_a_context_free_model(tiny_encoder, max_length):
    """A model that ignores context must find exactly the same entities whether a text's
    sentences are read one by one or packed into shared windows: packing changes only what
    a word can see, never which word a probability belongs to."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_encoder))

    def predictor(pack: bool) -> Predictor:
        return Predictor(
            TaggingBackend(tok), WindowBuilder(tok, max_length), ["Disease"], pack=pack
        )

    alone, packed = predictor(False).annotate(TEXTS), predictor(True).annotate(TEXTS)
    assert packed == alone
    assert sum(len(x) for x in packed) == 2 + 1 + 12
    for text, entities in zip(TEXTS, packed, strict=True):
        assert all(text[e.start : e.end] == "breast cancer" for e in entities)


class CountingBackend(TaggingBackend):
    def __init__(self, tokenizer):
        super().__init__(tokenizer)
        self.windows = 0

    def features(self, ids, mask):
        self.windows += len(ids)
        return super().features(ids, mask)


def test_packing_reads_a_texts_short_sentences_in_fewer_windows_and_never_mixes_texts(
    tiny_encoder,
):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_encoder))
    texts = ["The patient. Breast cancer. No sign. The patient.", "Breast cancer."]
    counts = {}
    for pack in (False, True):
        backend = CountingBackend(tok)
        Predictor(backend, WindowBuilder(tok, 64), ["Disease"], pack=pack).annotate(texts)
        counts[pack] = backend.windows
    assert counts == {False: 5, True: 2}  # one window per text, not one per sentence


class SplitWordTypes:
    """Every word is a one-word mention; type features say type 1 at the subword ``first``
    and type 0 at every other subword."""

    def __init__(self, first: int):
        self.first = first

    def features(self, ids, mask):
        probs = np.zeros((*ids.shape, 3), np.float32)
        probs[..., B] = 0.9
        probs[..., O] = 0.1
        feats = np.zeros((*ids.shape, 2), np.float32)
        feats[..., 0] = np.where(ids == self.first, 0.0, 5.0)
        feats[..., 1] = np.where(ids == self.first, 5.0, 0.0)
        return probs, feats

    def classify(self, pooled):
        return np.exp(pooled) / np.exp(pooled).sum(-1, keepdims=True)


@pytest.mark.parametrize(("first_only", "expected"), [(True, "B"), (False, "A")])
def test_a_mention_is_typed_from_its_first_subwords_or_all(first_only, expected):
    from transformers import AutoTokenizer

    from mslm_core.model import resolve_encoder

    tok = AutoTokenizer.from_pretrained(resolve_encoder("minilm"))
    pieces = tok("nephrotoxicity", add_special_tokens=False)["input_ids"]
    assert len(pieces) >= 3  # one word, several subwords
    predictor = Predictor(
        SplitWordTypes(pieces[0]),
        WindowBuilder(tok, 16),
        ["A", "B"],
        first_subword_types=first_only,
    )
    (ents,) = predictor.annotate(["nephrotoxicity"])
    assert [(e.text, e.type) for e in ents] == [("nephrotoxicity", expected)]


class HyphenBackend(TaggingBackend):
    """ "breast" → B, "cancer" and "-" → I (a tagger that carries a mention onto a hyphen)."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer)
        self.hyphen = tokenizer.convert_tokens_to_ids("-")

    def features(self, ids, mask):
        probs, feats = super().features(ids, mask)
        probs[..., 1] = np.where((ids == self.i) | (ids == self.hyphen), 0.95, 0.05)
        return probs, feats


def test_a_mention_never_ends_on_a_hyphen(tiny_encoder, tmp_path):
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "-", "breast", "cancer", "induced"]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    predictor = Predictor(HyphenBackend(tok), WindowBuilder(tok, 32), ["Disease"])
    text = "breast-induced breast cancer- and breast - cancer -"
    (ents,) = predictor.annotate([text])
    assert [e.text for e in ents] == ["breast", "breast cancer", "breast - cancer"]
    assert trim_hyphens(["-", "-"], [(0, 2)]) == []  # nothing but hyphens: no mention
