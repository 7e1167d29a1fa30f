"""CoNLL-IOB: one ``TOKEN<TAB>TAG`` line per token, IOB2 tags, blank line between sentences."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from ..errors import CorpusError
from ._io import IssueCollector, StrPath, atomic_write, numbered_lines
from .formats import Format, register
from .model import Corpus, Mention, Sentence, SentenceList, Sink

DOCSTART = "-DOCSTART-"

_IOB2_TAG = re.compile(r"([BI])-(\S+)")
_OTHER_SCHEME_TAG = re.compile(r"([ESLU])-\S+")


def _tag_problem(tag: str) -> str:
    """The message for a tag that is not IOB2."""
    if _OTHER_SCHEME_TAG.fullmatch(tag):
        return (
            f"tag {tag!r} is a BIOES/BILOU tag; only IOB2 tags (O, B-TYPE, I-TYPE) are "
            "supported, convert the file to IOB2 first"
        )
    return f"invalid tag {tag!r}; only IOB2 tags (O, B-TYPE, I-TYPE) are supported"


def read_conll(path: StrPath) -> Corpus:
    """Read a CoNLL/IOB2 file into a :class:`Corpus` (see :func:`fill_conll`)."""
    sink = SentenceList()
    fill_conll(path, sink)
    return sink.corpus(os.fspath(path))


def fill_conll(path: StrPath, sink: Sink) -> None:
    """Read a CoNLL/IOB2 file (one ``TOKEN<TAB>TAG`` per line, blank line between sentences).

    Lines without a tab are split on runs of whitespace; either way a line must have exactly
    two fields. ``-DOCSTART-`` lines are skipped. An ``I-X`` tag after ``O``, at the start of
    a sentence or after another type starts a new mention and is counted in
    ``Corpus.repairs``. Raises :class:`CorpusError` listing up to :data:`MAX_ISSUES` problems,
    or when the file holds no sentence.
    """
    name = os.fspath(path)
    issues = IssueCollector(name)
    words: list[str] = []
    mentions: list[Mention] = []
    open_start: int | None = None  # start word of the mention being read
    open_label: str | None = None

    def close_mention() -> None:
        nonlocal open_start, open_label
        if open_start is not None and open_label is not None:
            mentions.append(Mention(open_start, len(words), open_label))
        open_start = open_label = None

    def end_sentence() -> None:
        nonlocal words, mentions
        close_mention()
        if words:
            sink.add(Sentence.from_words(words, mentions))
        words, mentions = [], []

    for number, line in numbered_lines(name, issues):
        if not line.strip():
            end_sentence()
            continue
        fields = [f.strip() for f in line.split("\t")] if "\t" in line else line.split()
        if fields[0] == DOCSTART:
            end_sentence()
            continue
        if len(fields) != 2:
            issues.add(number, f"expected 2 columns (token, tag), found {len(fields)}")
            close_mention()
            continue
        token, tag = fields
        if not token or any(c.isspace() for c in token):
            issues.add(number, f"token {token!r} is empty or contains whitespace", "token")
            close_mention()
            continue
        if tag == "O":
            close_mention()
            words.append(token)
            continue
        match = _IOB2_TAG.fullmatch(tag)
        if match is None:
            issues.add(number, _tag_problem(tag), "tag")
            close_mention()
            continue
        prefix, label = match.groups()
        if not label.isprintable():
            issues.add(number, f"tag {tag!r}: the type holds control characters", "tag")
            close_mention()
            continue
        if prefix == "I" and open_label == label:
            words.append(token)
            continue
        if prefix == "I":
            sink.repairs += 1
        close_mention()
        open_start, open_label = len(words), label
        words.append(token)
    end_sentence()

    issues.raise_if_any()
    if not sink.count:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")


def _conll_lines(corpus: Corpus) -> Iterator[str]:
    for sentence in corpus.sentences:
        if not sentence.word_spans:
            continue
        for word, tag in zip(sentence.words, sentence.tags(), strict=True):
            yield f"{word}\t{tag}\n"
        yield "\n"


def write_conll(corpus: Corpus, path: StrPath) -> None:
    """Write ``corpus`` as CoNLL/IOB2 (``word<TAB>tag``, a blank line after each sentence).

    Sentences without words are left out. Raises :class:`CorpusError` (naming the sentence
    index) when a word is empty, contains whitespace or is ``-DOCSTART-``, or a label is
    empty or contains whitespace: CoNLL cannot represent those. Nothing is written then.
    """
    name = os.fspath(path)
    issues = IssueCollector(name)
    for i, sentence in enumerate(corpus.sentences):
        for j, word in enumerate(sentence.words):
            if not word or word == DOCSTART or any(c.isspace() for c in word):
                issues.add(
                    None,
                    f"sentence {i}, word {j}: {word!r} cannot be written in CoNLL "
                    "(empty, contains whitespace or is -DOCSTART-); write JSONL instead",
                    f"sentences[{i}].words[{j}]",
                )
        for k, m in enumerate(sentence.mentions):
            if not m.label or any(c.isspace() for c in m.label):
                issues.add(
                    None,
                    f"sentence {i}: label {m.label!r} cannot be written in CoNLL "
                    "(empty or contains whitespace)",
                    f"sentences[{i}].mentions[{k}]",
                )
    issues.raise_if_any()
    atomic_write(name, _conll_lines(corpus))


register(
    Format(
        "conll",
        fill_conll,
        write_conll,
        extensions=(".tsv", ".conll", ".iob", ".iob2", ".txt", ".bio"),
        suffix=".tsv",
        sniff=None,  # what no other format recognises
    )
)
