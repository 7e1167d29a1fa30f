"""Words ↔ subwords, sentences packed into windows, and windows for sentences longer than
``max_length``.

A sentence is tokenised once with the fast tokenizer (``is_split_into_words=True``), giving
each word its subword ids. Short consecutive sentences may be *packed* into one run of words
that fits a window (:class:`Packing`), so that each sentence is read with its neighbours as
context at no extra cost. Windows are then assembled from whole words of a sentence or run:
for training, consecutive non-overlapping windows (cut outside mentions where possible); for
prediction, overlapping windows in which every word has one *owner* window — the one where it
sits furthest from an edge — so a mention cut by one window edge is read from the other
window. Nothing is ever silently truncated.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .partial import word_allowed
from .tokenizer import as_word_tokenizer
from .typemap import OUTSIDE, is_plain, label_set
from .types import Mention

BIO_LABELS = ("B", "I", "O")
B, I, O = 0, 1, 2
IGNORE = -100
# A pathological "word" (thousands of letters, no space) keeps at most this many subwords:
# detection reads its first subword, classification the mean of these.
MAX_SUBWORDS_PER_WORD = 32


T = TypeVar("T")


@dataclass(frozen=True)
class Packing:
    """Consecutive sentences grouped into runs ``ranges[r] = (first, end)``; each sentence's
    run and the index of its first word in the run."""

    ranges: list[tuple[int, int]]
    run_of: list[int]
    offsets: list[int]

    @classmethod
    def build(cls, ranges: list[tuple[int, int]], lengths: Sequence[int]) -> Packing:
        """``lengths``: words per sentence."""
        run_of, offsets = [], []
        for r, (a, b) in enumerate(ranges):
            offset = 0
            for i in range(a, b):
                run_of.append(r)
                offsets.append(offset)
                offset += lengths[i]
        return cls(ranges, run_of, offsets)

    @classmethod
    def single(cls, n: int) -> Packing:
        """Every sentence a run of its own (no packing)."""
        return cls([(i, i + 1) for i in range(n)], list(range(n)), [0] * n)

    def concat(self, per_sentence: Sequence[list[T]]) -> list[list[T]]:
        """Per-sentence lists (words, their subwords) → per-run lists, in order."""
        return [[x for i in range(a, b) for x in per_sentence[i]] for a, b in self.ranges]

    def mentions(self, per_sentence: Sequence[Sequence[Mention]]) -> list[list[Mention]]:
        """Each sentence's mentions, shifted to its run's word indices."""
        return [
            [
                Mention(m.start + self.offsets[i], m.end + self.offsets[i], m.label)
                for i in range(a, b)
                for m in per_sentence[i]
            ]
            for a, b in self.ranges
        ]


@dataclass
class Window:
    """One model input: subwords of ``words[word_start:word_end]`` of sentence ``sentence``.

    ``input_ids``: [T] including special tokens. ``word_index``: [T] sentence-level word index
    of each subword, -1 for special tokens. ``labels``: [T] BIO id at the first subword of each
    word, -100 elsewhere (training only). ``mentions``: (subword start, subword end, type id)
    of the gold mentions inside the window (training only; a mention cut by the window edge
    contributes its part; type id -1: its label lists several types). ``allowed``: [T, L]
    the tags each first subword may take (partial labels, ``mslm_core.partial``; training on
    several corpora only), False elsewhere.
    """

    sentence: int
    word_start: int
    word_end: int
    input_ids: npt.NDArray[np.int64]
    word_index: npt.NDArray[np.int32]
    labels: npt.NDArray[np.int64] | None = None
    mentions: list[tuple[int, int, int]] = field(default_factory=list)
    allowed: npt.NDArray[np.bool_] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def special_mask(self) -> npt.NDArray[np.bool_]:
        return self.word_index < 0

    @property
    def first_subword_mask(self) -> npt.NDArray[np.bool_]:
        """[T] True at the first subword of each word."""
        first = self.word_index >= 0
        first[1:] &= self.word_index[1:] != self.word_index[:-1]
        return first

    def first_subword(self) -> dict[int, int]:
        """sentence word index → position of its first subword in this window."""
        out: dict[int, int] = {}
        for pos, w in enumerate(self.word_index.tolist()):
            if w >= 0 and w not in out:
                out[w] = pos
        return out


class WindowBuilder:
    """Turns word lists into model windows for one tokenizer and ``max_length``."""

    def __init__(
        self,
        tokenizer: Any,
        max_length: int = 128,
        stride_fraction: float = 0.5,
        styles: Sequence[str] = (),
    ) -> None:
        """``tokenizer``: a ``transformers`` fast tokenizer or a
        :class:`~mslm_core.tokenizer.WordTokenizer`. ``styles``: names (a corpus's) that a
        window may open with, after the tokenizer's own prefix, so that a model trained on
        several corpora reads each one's conventions (``TrainConfig.source_styles``); the
        style ``""`` is none. Every style gets the same room for text, so a sentence is cut
        into the same windows whatever it is read as."""
        self.tokenizer = as_word_tokenizer(tokenizer)
        ((ids, wids),) = self.tokenizer.encode_words([["x"]], add_special_tokens=True)
        first = wids.index(0)
        last = len(wids) - 1 - wids[::-1].index(0)
        self.prefix = list(ids[:first])
        self.suffix = list(ids[last + 1 :])
        self.max_length = max_length
        self.prefixes: dict[str, list[int]] = {"": self.prefix}
        for style in styles:
            if not style.split():
                raise ValueError("a style is a non-empty name")
            ((style_ids, _),) = self.tokenizer.encode_words([style.split()], False)
            self.prefixes[style] = self.prefix + list(style_ids)
        longest = max(len(p) for p in self.prefixes.values())
        self.body = max_length - longest - len(self.suffix)
        if self.body < 8:
            raise ValueError(f"max_length={max_length} leaves fewer than 8 positions for text")
        self.stride_fraction = stride_fraction

    # -- subwords ---------------------------------------------------------------------------
    def subwords(self, sentences: list[list[str]]) -> list[list[list[int]]]:
        """Per sentence, per word, its subword ids (at most MAX_SUBWORDS_PER_WORD, and never
        more than fit in one window)."""
        out: list[list[list[int]]] = []
        nonempty = [i for i, words in enumerate(sentences) if words]
        enc = self.tokenizer.encode_words([sentences[i] for i in nonempty], False)
        cap = min(MAX_SUBWORDS_PER_WORD, self.body)  # one word always fits one window
        by_index = {}
        for k, i in enumerate(nonempty):
            per_word: list[list[int]] = [[] for _ in sentences[i]]
            for tok, w in zip(*enc[k], strict=True):
                if w is not None and len(per_word[w]) < cap:
                    per_word[w].append(tok)
            by_index[i] = per_word
        for i, words in enumerate(sentences):
            out.append(by_index.get(i, [[] for _ in words]))
        return out

    def packing(
        self, per_word: Sequence[list[list[int]]], groups: Sequence[Hashable] | None = None
    ) -> Packing:
        """Pack consecutive sentences (their :meth:`subwords`) greedily into runs that fit one
        window; a run never mixes ``groups`` (e.g. two texts) and a sentence that does not fit
        a window alone is a run of its own (cut into windows as usual)."""
        ranges: list[tuple[int, int]] = []
        start, used = 0, 0
        for i, words in enumerate(per_word):
            n = sum(len(w) for w in words)
            same_group = groups is None or groups[i] == groups[start]
            if i > start and (used + n > self.body or not same_group):
                ranges.append((start, i))
                start, used = i, 0
            used += n
        if per_word:
            ranges.append((start, len(per_word)))
        return Packing.build(ranges, [len(words) for words in per_word])

    def pack(
        self,
        sentences: Sequence[list[str]],
        mentions: Sequence[Sequence[Mention]],
        groups: Sequence[Hashable] | None = None,
    ) -> tuple[list[list[str]], list[list[Mention]], list[int]]:
        """Training corpora packed: the runs' words, their mentions, and the index of each
        run's first sentence. A run never mixes ``groups`` (e.g. two corpora)."""
        packing = self.packing(self.subwords(list(sentences)), groups)
        firsts = [a for a, _ in packing.ranges]
        return packing.concat(sentences), packing.mentions(mentions), firsts

    # -- window layouts ---------------------------------------------------------------------
    def training_layout(self, counts: list[int], mentions: list[Mention]) -> list[tuple[int, int]]:
        """Consecutive, non-overlapping word ranges that each fit; cut outside mentions when
        a mention fits in a window."""
        inside = [False] * (len(counts) + 1)  # inside[j]: a mention continues at word j
        for m in mentions:
            for j in range(m.start + 1, m.end):
                inside[j] = True
        ranges, start = [], 0
        while start < len(counts):
            end, used = start, 0
            while end < len(counts) and used + counts[end] <= self.body:
                used += counts[end]
                end += 1
            end = max(end, start + 1)  # a single over-long word is already capped
            if end < len(counts) and inside[end]:
                back = end
                while back > start + 1 and inside[back]:
                    back -= 1
                if back > start and not inside[back]:
                    end = back
            ranges.append((start, end))
            start = end
        return ranges or [(0, 0)]

    def prediction_layout(self, counts: list[int]) -> tuple[list[tuple[int, int]], list[int]]:
        """Overlapping word ranges, and the owner range of each word."""
        n = len(counts)
        if sum(counts) <= self.body:
            return [(0, n)], [0] * n
        ranges: list[tuple[int, int]] = []
        start = 0
        stride = max(1, int(self.body * self.stride_fraction))
        while True:
            end, used = start, 0
            while end < n and used + counts[end] <= self.body:
                used += counts[end]
                end += 1
            end = max(end, start + 1)
            ranges.append((start, end))
            if end >= n:
                break
            nxt, used = start, 0
            while nxt < end and used + counts[nxt] < stride:
                used += counts[nxt]
                nxt += 1
            start = max(nxt, start + 1)
        # owner of word j: the window where j is furthest (in subwords) from an inner edge;
        # the sentence's own start and end are not edges. Ties go to the earlier window.
        # Each window visits only its own words: linear in the words (windows overlap about
        # twice), however long the sentence.
        cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        big = int(cum[-1]) + 1
        best = np.full(n, -1, np.int64)
        best_margin = np.full(n, -1, np.int64)
        for r, (a, b) in enumerate(ranges):
            j = np.arange(a, b)
            left = cum[j] - cum[a] if a > 0 else np.full(b - a, big)
            right = cum[b] - cum[j + 1] if b < n else np.full(b - a, big)
            margin = np.minimum(left, right)
            better = margin > best_margin[a:b]  # ties stay with the earlier window
            best[a:b][better] = r
            best_margin[a:b][better] = margin[better]
        return ranges, best.tolist()

    # -- windows ----------------------------------------------------------------------------
    @property
    def styles(self) -> list[str]:
        """The styles a window may open with (``""``, none, first)."""
        return list(self.prefixes)

    def _prefix(self, style: str) -> list[int]:
        try:
            return self.prefixes[style]
        except KeyError:
            known = ", ".join(repr(s) for s in self.prefixes)
            raise ValueError(f"unknown style {style!r} (this model's: {known})") from None

    def _window(
        self, sentence: int, per_word: list[list[int]], start: int, end: int, style: str = ""
    ) -> Window:
        ids = list(self._prefix(style))
        widx = [-1] * len(ids)
        for j in range(start, end):
            ids.extend(per_word[j])
            widx.extend([j] * len(per_word[j]))
        ids.extend(self.suffix)
        widx.extend([-1] * len(self.suffix))
        return Window(sentence, start, end, np.asarray(ids, np.int64), np.asarray(widx, np.int32))

    def training_windows(
        self,
        sentences: list[list[str]],
        mentions: list[list[Mention]],
        type_ids: dict[str, int],
        unannotated: Sequence[frozenset[int]] | None = None,
        styles: Sequence[str] | None = None,
    ) -> list[Window]:
        """Windows with their labels. ``unannotated``: per sentence (run), the type ids its
        corpus leaves unannotated — given, every window gets the tags each word may take
        (``allowed``), and mention labels may list several types (``typemap``); a mention
        that may be no entity (``O`` listed) is then neither tagged nor masked as one.
        ``styles``: per sentence (run), the style its windows open with (None: none)."""
        out = []
        for s, (per_word, ments) in enumerate(zip(self.subwords(sentences), mentions, strict=True)):
            counts = [len(x) for x in per_word]
            entities = [m for m in ments if OUTSIDE not in label_set(m.label)]
            tags = [O] * len(per_word)
            for m in entities:
                tags[m.start] = B
                for j in range(m.start + 1, m.end):
                    tags[j] = I
            allowed = (
                None
                if unannotated is None
                else word_allowed(len(per_word), ments, type_ids, unannotated[s])
            )
            for a, b in self.training_layout(counts, ments):
                if a == b:
                    continue
                win = self._window(s, per_word, a, b, "" if styles is None else styles[s])
                labels = np.full(len(win), IGNORE, np.int64)
                first = win.first_subword()
                for j, pos in first.items():
                    # the first word of a window continuing a mention is still labelled I
                    labels[pos] = tags[j]
                win.labels = labels
                if allowed is not None:
                    win.allowed = np.zeros((len(win), allowed.shape[1]), bool)
                    for j, pos in first.items():
                        win.allowed[pos] = allowed[j]
                for m in entities:
                    lo, hi = max(m.start, a), min(m.end, b)
                    if lo >= hi:
                        continue
                    positions = np.nonzero((win.word_index >= lo) & (win.word_index < hi))[0]
                    if len(positions):
                        # a type the model was not given (a dev mention of a type that no
                        # training sentence has) is no type it can be taught: -1, as a
                        # mention of several types is
                        type_id = type_ids.get(m.label, -1) if is_plain(m.label) else -1
                        win.mentions.append((int(positions[0]), int(positions[-1]) + 1, type_id))
                out.append(win)
        return out

    def prediction_windows(
        self,
        sentences: list[list[str]],
        subwords: list[list[list[int]]] | None = None,
        styles: Sequence[str] | None = None,
    ) -> tuple[list[Window], list[list[int]]]:
        """All windows of all sentences, and per sentence, per word, the index (into the
        returned list) of the word's owner window. ``subwords``: the sentences'
        :meth:`subwords`, when the caller has them already; ``styles``: per sentence, the
        style its windows open with (None: none)."""
        windows: list[Window] = []
        owners: list[list[int]] = []
        for s, per_word in enumerate(self.subwords(sentences) if subwords is None else subwords):
            counts = [len(x) for x in per_word]
            ranges, owner = self.prediction_layout(counts)
            base = len(windows)
            style = "" if styles is None else styles[s]
            for a, b in ranges:
                windows.append(self._window(s, per_word, a, b, style))
            owners.append([base + r for r in owner])
        return windows, owners
