"""Corpus data model: mentions over words, sentences with character offsets, corpora."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..types import Mention

__all__ = ["Corpus", "CorpusSummary", "Mention", "Sentence", "SentenceList", "Sink", "Tally"]


@dataclass
class Sentence:
    """One sentence: its text, the character span of each word, and its gold mentions.

    ``words[i] == text[word_spans[i][0]:word_spans[i][1]]``. Mentions are sorted and never
    overlap. A CoNLL sentence gets ``text = " ".join(words)``. ``annotated``: the types its
    corpus annotates, when it is one of several a job trains on (``typemap``); None: every
    type the mentions could have (what a corpus read from a file means).
    """

    text: str
    word_spans: list[tuple[int, int]]
    mentions: list[Mention] = field(default_factory=list)
    annotated: frozenset[str] | None = None
    # (modifier, head): indexes into ``mentions`` of the relations its corpus annotates
    # (a dose and its drug, a value and its test: mslm_core.relations)
    relations: list[tuple[int, int]] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        return [self.text[a:b] for a, b in self.word_spans]

    @classmethod
    def from_words(cls, words: list[str], mentions: list[Mention]) -> Sentence:
        """A sentence from pre-split words; ``text`` is the words joined by single spaces.

        Raises ``ValueError`` when a mention is empty, outside the words, or overlaps another.
        """
        spans: list[tuple[int, int]] = []
        pos = 0
        for word in words:
            spans.append((pos, pos + len(word)))
            pos += len(word) + 1
        ordered = sorted(mentions)
        previous_end = 0
        for m in ordered:
            if not 0 <= m.start < m.end <= len(words):
                raise ValueError(f"mention {m} is empty or outside the {len(words)} words")
            if m.start < previous_end:
                raise ValueError(f"mention {m} overlaps the mention before it")
            previous_end = m.end
        return cls(" ".join(words), spans, ordered)

    def tags(self) -> list[str]:
        """The IOB2 tag of each word (``O``, ``B-label``, ``I-label``)."""
        tags = ["O"] * len(self.word_spans)
        for m in self.mentions:
            tags[m.start] = f"B-{m.label}"
            for i in range(m.start + 1, m.end):
                tags[i] = f"I-{m.label}"
        return tags

    def char_mentions(self) -> list[tuple[int, int, str]]:
        """Mentions as ``(start, end, label)`` character offsets into ``text`` (end exclusive)."""
        return [(a, b, label) for a, b, label, _ in self.linked_char_mentions()]

    def linked_char_mentions(self) -> list[tuple[int, int, str, str | None]]:
        """:meth:`char_mentions` with each mention's concept (``None``: not linked)."""
        return [
            (self.word_spans[m.start][0], self.word_spans[m.end - 1][1], m.label, m.concept)
            for m in self.mentions
        ]


@dataclass
class Corpus:
    """A list of annotated sentences and what reading them found.

    ``repairs`` counts CoNLL ``I-X`` tags that had to start a new mention (after ``O``, at the
    start of a sentence, or after another type); ``stripped`` counts JSONL entities whose
    leading or trailing whitespace was trimmed.
    """

    sentences: list[Sentence]
    path: str | None = None
    repairs: int = 0
    stripped: int = 0

    @property
    def types(self) -> list[str]:
        """The entity types seen in the mentions, sorted."""
        return sorted({m.label for s in self.sentences for m in s.mentions})

    @property
    def n_mentions(self) -> int:
        """The number of mentions over all sentences."""
        return sum(len(s.mentions) for s in self.sentences)

    @property
    def n_words(self) -> int:
        """The number of words over all sentences."""
        return sum(len(s.word_spans) for s in self.sentences)

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[Sentence]:
        return iter(self.sentences)

    def stats(self) -> dict[str, Any]:
        """Counts: sentences, words, mentions, mentions per type, repairs and stripped."""
        per_type = Counter(m.label for s in self.sentences for m in s.mentions)
        return _stats(len(self.sentences), self.n_words, per_type, self.repairs, self.stripped)


def _stats(
    sentences: int, words: int, per_type: Counter[str], repairs: int, stripped: int
) -> dict[str, Any]:
    """The shape of :meth:`Corpus.stats` (types sorted; a type counted 0 times left out)."""
    kept = {t: n for t, n in sorted(per_type.items()) if n > 0}
    return {
        "sentences": sentences,
        "words": words,
        "mentions": sum(kept.values()),
        "mentions_per_type": kept,
        "repairs": repairs,
        "stripped": stripped,
    }


class Sink:
    """Where a reader puts the sentences it reads: :class:`SentenceList` keeps them (a
    :class:`Corpus`), :class:`Tally` only counts them, so that a corpus of any size is checked
    in the memory of one sentence (one task, one document).

    With a ``type_map``, each mention's type is renamed as it says (types it does not name
    stay). A sentence read with a ``key`` (a Label Studio JSON-MIN row with a task id) replaces the
    sentence of an earlier row with that key when its ``rank`` is higher, and is dropped when
    it is lower: JSON-MIN has one row per annotation and only the latest counts.
    """

    def __init__(self, type_map: Mapping[str, str] | None = None) -> None:
        self.count = 0  # sentences kept, replacements not counted twice
        self.repairs = 0
        self.stripped = 0
        self.superseded = 0
        self.type_map = dict(type_map or {})  # a type read -> the type kept
        self._latest: dict[str, tuple[Any, int]] = {}  # key -> best rank, slot

    def add(self, sentence: Sentence, key: str | None = None, rank: Any = None) -> None:
        if self.type_map:
            mapped = [
                replace(m, label=self.type_map.get(m.label, m.label)) for m in sentence.mentions
            ]
            sentence = replace(sentence, mentions=mapped)
        if key is None:
            self._append(sentence, keyed=False)
            self.count += 1
            return
        seen = self._latest.get(key)
        if seen is None:
            self._latest[key] = (rank, self._append(sentence, keyed=True))
            self.count += 1
            return
        self.superseded += 1
        best, slot = seen
        if rank > best:
            self._latest[key] = (rank, slot)
            self._replace(slot, sentence)

    def _append(self, sentence: Sentence, keyed: bool) -> int:
        raise NotImplementedError

    def _replace(self, slot: int, sentence: Sentence) -> None:
        raise NotImplementedError


class SentenceList(Sink):
    """A sink that keeps the sentences: :meth:`corpus` is what was read."""

    def __init__(self, type_map: Mapping[str, str] | None = None) -> None:
        super().__init__(type_map)
        self.sentences: list[Sentence] = []

    def _append(self, sentence: Sentence, keyed: bool) -> int:
        self.sentences.append(sentence)
        return len(self.sentences) - 1

    def _replace(self, slot: int, sentence: Sentence) -> None:
        self.sentences[slot] = sentence

    def corpus(self, path: str | None) -> Corpus:
        return Corpus(self.sentences, path=path, repairs=self.repairs, stripped=self.stripped)


@dataclass(frozen=True)
class CorpusSummary:
    """What :class:`Tally` counted: :meth:`Corpus.stats` and :attr:`Corpus.types` of the
    corpus, without the corpus."""

    stats: dict[str, Any]
    types: list[str]


class Tally(Sink):
    """A sink that counts words and mentions per type and keeps no sentence (only, for a
    keyed sentence, its word count and labels, which a later row may replace)."""

    def __init__(self, type_map: Mapping[str, str] | None = None) -> None:
        super().__init__(type_map)
        self.words = 0
        self.per_type: Counter[str] = Counter()
        self._keyed: dict[int, tuple[int, tuple[str, ...]]] = {}

    def _append(self, sentence: Sentence, keyed: bool) -> int:
        counted = self._count(sentence)
        if keyed:
            self._keyed[self.count] = counted
        return self.count

    def _replace(self, slot: int, sentence: Sentence) -> None:
        words, labels = self._keyed[slot]
        self.words -= words
        self.per_type.subtract(labels)
        self._keyed[slot] = self._count(sentence)

    def _count(self, sentence: Sentence) -> tuple[int, tuple[str, ...]]:
        words, labels = len(sentence.word_spans), tuple(m.label for m in sentence.mentions)
        self.words += words
        self.per_type.update(labels)
        return words, labels

    def summary(self) -> CorpusSummary:
        stats = _stats(self.count, self.words, self.per_type, self.repairs, self.stripped)
        return CorpusSummary(stats, list(stats["mentions_per_type"]))
