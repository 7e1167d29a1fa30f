"""Masking strategies (docs/method.md §1 and §5): choose positions, then corrupt them.

A strategy only *chooses*: given a window and a seeded generator it returns the per-subword
``mask_type`` (0 = not masked, 1 = BLM, 2 = ELM). :func:`corrupt` then replaces the chosen
positions. Strategies are registered under the names of the training strategies that use them
(config.STRATEGIES); an unknown name lists the valid ones. Each builds itself for a training
run from its configuration and what one MSLM masking pass over the training windows counted
(:func:`plan_masking`): the trainer never asks which strategy it has.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from .errors import ConfigError, UnknownNameError
from .features import Window
from .weights import BLM, ELM, NOT_MASKED, mask_specific_weights

if TYPE_CHECKING:
    from .config import TrainConfig


_S = TypeVar("_S", bound="MaskingStrategy")


@dataclass(frozen=True)
class MaskCounts:
    """One MSLM masking pass over the training windows with the training seed: the ELM- and
    BLM-masked tokens (``N_ELM``, ``N_BLM`` of docs/method.md §2) and the maskable tokens."""

    n_elm: int
    n_blm: int
    n_tokens: int

    @property
    def rate(self) -> float:
        """The share of tokens MSLM masks: the budget the comparison strategies get."""
        return (self.n_elm + self.n_blm) / max(1, self.n_tokens)


class MaskingStrategy:
    """Base class: ``choose(window, rng) -> mask_type`` (int8 array, one per subword)."""

    name = ""

    def choose(self, window: Window, rng: np.random.Generator) -> npt.NDArray[np.int8]:
        raise NotImplementedError

    @classmethod
    def for_training(
        cls, config: TrainConfig, counts: MaskCounts, sentences: Sequence[list[str]]
    ) -> MaskingStrategy:
        """This strategy as ``config`` trains with it (``sentences``: the words of each
        training window's sentence or run)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """What the run's manifest records of it beyond the counts."""
        return {}


_REGISTRY: dict[str, type[MaskingStrategy]] = {}


def register(name: str) -> Callable[[type[_S]], type[_S]]:
    def deco(cls: type[_S]) -> type[_S]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def strategy_names() -> list[str]:
    return sorted(_REGISTRY)


def build_strategy(name: str, **kwargs: Any) -> MaskingStrategy:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("masking strategy", name, strategy_names()) from None
    return factory(**kwargs)


def _candidates(window: Window) -> npt.NDArray[np.intp]:
    """Positions that may be masked: every non-special token."""
    return np.nonzero(~window.special_mask)[0]


@register("mslm")
@dataclass
class JointElmBlm(MaskingStrategy):
    """Joint ELM-BLM (docs/method.md §1).

    ELM: mask ``ceil(elm_rate * n)`` of the window's ``n`` mentions, every subword of each.
    BLM: every other non-special token outside an ELM-masked mention, with prob. ``blm_rate``.
    """

    elm_rate: float = 1.0
    blm_rate: float = 0.075

    @classmethod
    def for_training(
        cls, config: TrainConfig, counts: MaskCounts, sentences: Sequence[list[str]]
    ) -> MaskingStrategy:
        return cls(elm_rate=config.elm_rate, blm_rate=config.blm_rate)

    def choose(self, window: Window, rng: np.random.Generator) -> npt.NDArray[np.int8]:
        mask_type = np.zeros(len(window), np.int8)
        n = len(window.mentions)
        k = math.ceil(self.elm_rate * n - 1e-9) if n else 0
        if k:
            for idx in rng.choice(n, size=k, replace=False):
                start, end, _ = window.mentions[int(idx)]
                mask_type[start:end] = ELM
        if self.blm_rate > 0:
            cand = _candidates(window)
            cand = cand[mask_type[cand] == NOT_MASKED]
            draw = rng.random(len(cand)) < self.blm_rate
            mask_type[cand[draw]] = BLM
        return mask_type


def _budget(window: Window, rate: float) -> int:
    return math.ceil(rate * int((~window.special_mask).sum()) - 1e-9)


class _Budgeted(MaskingStrategy):
    """A comparison strategy (docs/method.md §5): the same masking budget as MSLM's unless the
    configuration sets ``mask_rate``."""

    mask_rate: float

    if TYPE_CHECKING:
        # Each subclass is a dataclass whose fields besides mask_rate have defaults, so it is
        # built with mask_rate alone, by keyword (PMIMasking's first field is not mask_rate).
        def __init__(self, *, mask_rate: float) -> None: ...

    @classmethod
    def for_training(
        cls, config: TrainConfig, counts: MaskCounts, sentences: Sequence[list[str]]
    ) -> MaskingStrategy:
        return cls(mask_rate=config.mask_rate or counts.rate)

    def describe(self) -> dict[str, Any]:
        return {"mask_rate": self.mask_rate}


@register("span")
@dataclass
class SpanMasking(_Budgeted):
    """SPAN (§5): spans of 2–4 tokens at random start positions until ``ceil(rate·|s|)``
    tokens are masked. A span is never shorter than ``min_span``: a budget below it (short
    sentences) is rounded up to one span, and a span is cut to the remaining budget only while
    that remainder is at least ``min_span``."""

    mask_rate: float = 0.15
    min_span: int = 2
    max_span: int = 4

    def choose(self, window: Window, rng: np.random.Generator) -> npt.NDArray[np.int8]:
        mask_type = np.zeros(len(window), np.int8)
        cand = _candidates(window)
        if not len(cand):
            return mask_type
        budget, last = _budget(window, self.mask_rate), int(cand[-1])
        if len(cand) >= self.min_span:
            budget = max(budget, self.min_span)
        used = 0
        for start in rng.permutation(cand):
            if budget - used < self.min_span:
                break
            length = int(rng.integers(self.min_span, self.max_span + 1))
            length = min(length, budget - used)
            end = int(start) + length
            if end - 1 > last or mask_type[start:end].any():
                continue
            mask_type[start:end] = BLM
            used += length
        return mask_type


@register("random")
@dataclass
class RandomMasking(_Budgeted):
    """RANDOM (§5): plain BERT token masking, each non-special token with prob. ``mask_rate``."""

    mask_rate: float = 0.15

    def choose(self, window: Window, rng: np.random.Generator) -> npt.NDArray[np.int8]:
        mask_type = np.zeros(len(window), np.int8)
        cand = _candidates(window)
        mask_type[cand[rng.random(len(cand)) < self.mask_rate]] = BLM
        return mask_type


@dataclass
class PMIVocabulary:
    """Word n-grams (2–4 words, lower-cased) seen at least ``min_count`` times, ranked by the
    PMI measure of Levine et al. (2020): the smallest log-ratio of the n-gram's probability to
    the product of its parts' probabilities over every segmentation into ≥ 2 parts."""

    rank: dict[tuple[str, ...], int] = field(default_factory=dict)
    scores: dict[tuple[str, ...], float] = field(default_factory=dict)

    @classmethod
    def build(
        cls, sentences: Iterable[list[str]], min_count: int = 5, max_n: int = 4
    ) -> PMIVocabulary:
        counts: list[Counter[tuple[str, ...]]] = [Counter() for _ in range(max_n + 1)]
        for words in sentences:
            low = [w.lower() for w in words]
            for n in range(1, max_n + 1):
                for i in range(len(low) - n + 1):
                    counts[n][tuple(low[i : i + n])] += 1
        totals = [max(1, sum(c.values())) for c in counts]

        def logp(gram: tuple[str, ...]) -> float:
            return math.log(counts[len(gram)][gram] / totals[len(gram)])

        scores: dict[tuple[str, ...], float] = {}
        for n in range(2, max_n + 1):
            for gram, c in counts[n].items():
                if c < min_count:
                    continue
                whole = logp(gram)
                scores[gram] = min(
                    whole - sum(logp(gram[a:b]) for a, b in seg) for seg in _segmentations(n)
                )
        ordered = sorted(scores, key=lambda g: (-scores[g], g))
        return cls(rank={g: i for i, g in enumerate(ordered)}, scores=scores)

    def __len__(self) -> int:
        return len(self.rank)


def _segmentations(n: int) -> list[list[tuple[int, int]]]:
    """Every way to cut ``range(n)`` into at least two contiguous parts."""
    out = []
    for cuts in range(1, 2 ** (n - 1)):
        bounds = [0] + [i + 1 for i in range(n - 1) if cuts >> i & 1] + [n]
        out.append(list(itertools.pairwise(bounds)))
    return out


@register("pmi")
@dataclass
class PMIMasking(_Budgeted):
    """PMI (§5): mask vocabulary n-grams found in the window, highest ranked first, whole words
    only, until ``ceil(rate·|s|)`` tokens are masked; the rest of the budget goes to random
    single words (as PMI-Masking treats words outside the vocabulary)."""

    vocabulary: PMIVocabulary = field(default_factory=PMIVocabulary)
    words: Callable[[Window], list[str]] | None = None
    mask_rate: float = 0.15

    @classmethod
    def for_training(
        cls, config: TrainConfig, counts: MaskCounts, sentences: Sequence[list[str]]
    ) -> MaskingStrategy:
        """The vocabulary of the training split; a window's words are its sentence's."""
        return cls(
            vocabulary=PMIVocabulary.build(sentences),
            words=lambda w: sentences[w.sentence][w.word_start : w.word_end],
            mask_rate=config.mask_rate or counts.rate,
        )

    def describe(self) -> dict[str, Any]:
        return {"mask_rate": self.mask_rate, "pmi_vocabulary": len(self.vocabulary)}

    def choose(self, window: Window, rng: np.random.Generator) -> npt.NDArray[np.int8]:
        if self.words is None:
            raise ConfigError("PMI masking needs the words of each window (words=...)")
        mask_type = np.zeros(len(window), np.int8)
        budget = _budget(window, self.mask_rate)
        words = [w.lower() for w in self.words(window)]
        first = window.word_start
        # subword positions of each word of the window
        positions: list[npt.NDArray[np.intp]] = [
            np.nonzero(window.word_index == first + j)[0] for j in range(len(words))
        ]
        found = []
        for n in range(2, 5):
            for i in range(len(words) - n + 1):
                r = self.vocabulary.rank.get(tuple(words[i : i + n]))
                if r is not None:
                    found.append((r, i, n))
        found.sort()
        singles = [(None, int(i), 1) for i in rng.permutation(len(words))]
        used = 0
        taken = np.zeros(len(words), bool)
        for _, i, n in [*found, *singles]:
            if used >= budget:
                break
            if taken[i : i + n].any():
                continue
            pos = np.concatenate(positions[i : i + n]) if n else np.empty(0, np.int64)
            if not len(pos) or used + len(pos) > budget:
                continue
            mask_type[pos] = BLM
            taken[i : i + n] = True
            used += len(pos)
        return mask_type


def corrupt(
    input_ids: npt.NDArray[np.int64],
    mask_type: npt.NDArray[np.int8],
    mask_token_id: int,
    rng: np.random.Generator,
    replace: str = "mask",
    vocab_size: int | None = None,
    special_ids: Iterable[int] = (),
) -> npt.NDArray[np.int64]:
    """Masked copy of ``input_ids``. ``replace="mask"`` puts the mask token at every chosen
    position (docs/method.md §1, our default); ``"bert"`` does 80 % mask / 10 % random token /
    10 % unchanged."""
    out = input_ids.copy()
    chosen = np.nonzero(mask_type != NOT_MASKED)[0]
    if replace == "mask":
        out[chosen] = mask_token_id
        return out
    if replace != "bert":
        raise UnknownNameError("mask replacement", replace, ["bert", "mask"])
    if vocab_size is None:
        raise ConfigError("replace='bert' needs vocab_size")
    draw = rng.random(len(chosen))
    out[chosen[draw < 0.8]] = mask_token_id
    rand_pos = chosen[(draw >= 0.8) & (draw < 0.9)]
    specials = np.asarray(sorted(set(special_ids)), np.int64)
    tokens = rng.integers(0, vocab_size, size=len(rand_pos))
    if len(specials):
        # redraw the rare special ids so a random replacement is always a real word piece
        bad = np.isin(tokens, specials)
        while bad.any():
            tokens[bad] = rng.integers(0, vocab_size, size=int(bad.sum()))
            bad = np.isin(tokens, specials)
    out[rand_pos] = tokens
    return out


@dataclass
class MaskingPlan:
    """How a training run masks: the strategy (None: no masking), the weights ``(w_blm,
    w_elm)`` of the masked-LM loss, and what the manifest records."""

    strategy: MaskingStrategy | None
    weights: tuple[float, float]
    info: dict[str, Any]


def count_masks(config: TrainConfig, windows: Sequence[Window]) -> MaskCounts:
    """One ELM-BLM pass over the training windows with the training seed (docs/method.md §2)."""
    counter = JointElmBlm(elm_rate=config.elm_rate, blm_rate=config.blm_rate)
    n_elm = n_blm = n_tokens = 0
    for i, w in enumerate(windows):
        mt = counter.choose(w, np.random.default_rng([config.seed, i]))
        n_elm += int((mt == ELM).sum())
        n_blm += int((mt == BLM).sum())
        n_tokens += int((~w.special_mask).sum())
    return MaskCounts(n_elm, n_blm, n_tokens)


def plan_masking(
    config: TrainConfig, windows: Sequence[Window], sentences: Sequence[list[str]]
) -> MaskingPlan:
    """The masking of a training run: its strategy built from ``config`` and the counts of
    one MSLM pass (its budget, for the comparison strategies), and the mask-specific weights
    when the strategy weights its loss. ``sentences``: the words the windows were cut from."""
    name = config.masking_strategy
    if name is None:
        return MaskingPlan(None, (1.0, 1.0), {})
    counts = count_masks(config, windows)
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("masking strategy", name, strategy_names()) from None
    strategy = factory.for_training(config, counts, sentences)
    weights = (
        mask_specific_weights(counts.n_elm, counts.n_blm, config.weight_rule)
        if config.weighted
        else (1.0, 1.0)
    )
    info: dict[str, Any] = {
        "n_elm": counts.n_elm,
        "n_blm": counts.n_blm,
        "n_tokens": counts.n_tokens,
    }
    info.update(strategy.describe())
    info["weights"] = {"blm": weights[0], "elm": weights[1]}
    return MaskingPlan(strategy, weights, info)
