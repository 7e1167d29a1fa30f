"""Annotated corpora: CoNLL-IOB and JSONL with character offsets, read, written, converted.

Two on-disk formats are supported:

``conll``
    One token per line, ``TOKEN<TAB>TAG`` (or ``TOKEN TAG`` separated by whitespace when the
    line has no tab), tags in IOB2 (``O``, ``B-Type``, ``I-Type``), a blank line between
    sentences, ``-DOCSTART-`` lines ignored. This is the format of the BLURB NER corpora.
``jsonl``
    One JSON object per line, ``{"text": str, "entities": [{"start", "end", "label"}]}`` with
    character offsets into ``text`` (code points, end exclusive). Words are cut with
    :func:`mslm_core.text.word_spans`, the splitter used at prediction time, so that training
    and serving see the same words; entity boundaries always cut words.

Readers stream the file line by line and report up to :data:`MAX_ISSUES` problems at once in a
:class:`~mslm_core.errors.CorpusError`, each naming the file, the 1-based line and, for JSONL,
the field. Writers are atomic: the file is written next to its destination and then moved
over it, so a failed write never leaves a half-written corpus behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeAlias

from .errors import CorpusError, CorpusIssue
from .text import word_spans

StrPath: TypeAlias = "str | os.PathLike[str]"

#: How many problems a reader collects before it stops and raises.
MAX_ISSUES = 20

#: Format names accepted by :func:`read_corpus`, :func:`write_corpus` and :func:`convert`.
FORMATS = ("conll", "jsonl")

#: File extensions (lower case) and the format they imply.
EXTENSIONS: dict[str, str] = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".tsv": "conll",
    ".conll": "conll",
    ".iob": "conll",
    ".iob2": "conll",
    ".txt": "conll",
    ".bio": "conll",
}

#: File stems (lower case) recognised by :func:`load_splits`, per split.
SPLIT_NAMES: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "dev": ("dev", "devel", "validation"),
    "test": ("test",),
}

DOCSTART = "-DOCSTART-"

_IOB2_TAG = re.compile(r"([BI])-(\S+)")
_OTHER_SCHEME_TAG = re.compile(r"([ESLU])-\S+")
_BOM = "\ufeff"


@dataclass(frozen=True, order=True)
class Mention:
    """An entity mention over words: ``words[start:end]`` (end exclusive), typed ``label``."""

    start: int
    end: int
    label: str


@dataclass
class Sentence:
    """One sentence: its text, the character span of each word, and its gold mentions.

    ``words[i] == text[word_spans[i][0]:word_spans[i][1]]``. Mentions are sorted and never
    overlap. A CoNLL sentence gets ``text = " ".join(words)``.
    """

    text: str
    word_spans: list[tuple[int, int]]
    mentions: list[Mention] = field(default_factory=list)

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
        return [
            (self.word_spans[m.start][0], self.word_spans[m.end - 1][1], m.label)
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
        return {
            "sentences": len(self.sentences),
            "words": self.n_words,
            "mentions": sum(per_type.values()),
            "mentions_per_type": {t: per_type[t] for t in sorted(per_type)},
            "repairs": self.repairs,
            "stripped": self.stripped,
        }


class _Issues:
    """Collects the problems of one file; raises once :data:`MAX_ISSUES` are collected."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[CorpusIssue] = []

    def add(self, line: int | None, message: str, field: str | None = None) -> None:
        self.items.append(CorpusIssue(self.path, line, message, field))
        if len(self.items) >= MAX_ISSUES:
            raise CorpusError(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise CorpusError(self.items)


def _lines(path: str, issues: _Issues) -> Iterator[tuple[int, str]]:
    """``(line number, text without line terminator)`` for each line that is valid UTF-8.

    Reads in binary and decodes line by line, so an encoding error names its line; a UTF-8
    byte-order mark at the start of the file is dropped.
    """
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise CorpusError.single(path, None, "file not found") from None
    except IsADirectoryError:
        raise CorpusError.single(path, None, "is a directory, not a corpus file") from None
    except OSError as e:
        raise CorpusError.single(path, None, f"cannot open: {e.strerror or e}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                issues.add(number, f"invalid UTF-8 (byte {e.start + 1} of the line)")
                continue
            if number == 1 and text.startswith(_BOM):
                text = text[1:]
            yield number, text.rstrip("\r\n")


def _tag_problem(tag: str) -> str:
    """The message for a tag that is not IOB2."""
    if _OTHER_SCHEME_TAG.fullmatch(tag):
        return (
            f"tag {tag!r} is a BIOES/BILOU tag; only IOB2 tags (O, B-TYPE, I-TYPE) are "
            "supported, convert the file to IOB2 first"
        )
    return f"invalid tag {tag!r}; only IOB2 tags (O, B-TYPE, I-TYPE) are supported"


def read_conll(path: StrPath) -> Corpus:
    """Read a CoNLL/IOB2 file (one ``TOKEN<TAB>TAG`` per line, blank line between sentences).

    Lines without a tab are split on runs of whitespace; either way a line must have exactly
    two fields. ``-DOCSTART-`` lines are skipped. An ``I-X`` tag after ``O``, at the start of
    a sentence or after another type starts a new mention and is counted in
    ``Corpus.repairs``. Raises :class:`CorpusError` listing up to :data:`MAX_ISSUES` problems,
    or when the file holds no sentence.
    """
    name = os.fspath(path)
    issues = _Issues(name)
    sentences: list[Sentence] = []
    repairs = 0
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
            sentences.append(Sentence.from_words(words, mentions))
        words, mentions = [], []

    for number, line in _lines(name, issues):
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
        if prefix == "I" and open_label == label:
            words.append(token)
            continue
        if prefix == "I":
            repairs += 1
        close_mention()
        open_start, open_label = len(words), label
        words.append(token)
    end_sentence()

    issues.raise_if_any()
    if not sentences:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")
    return Corpus(sentences, path=name, repairs=repairs)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _entity_problem(text: str, entity: object, where: str) -> tuple[str, str] | None:
    """``(message, field)`` for the first problem of one JSONL entity, ``None`` if valid."""
    if not isinstance(entity, dict):
        return f"entity must be an object, found {_type_name(entity)}", where
    for key in ("start", "end"):
        if key not in entity:
            return f"missing {key!r}", f"{where}.{key}"
        if not _is_int(entity[key]):
            return f"{key!r} must be an integer, found {_type_name(entity[key])}", f"{where}.{key}"
    label = entity.get("label")
    if "label" not in entity:
        return "missing 'label'", f"{where}.label"
    if not isinstance(label, str):
        return f"'label' must be a string, found {_type_name(label)}", f"{where}.label"
    if not label.strip():
        return "'label' is empty", f"{where}.label"
    if any(c.isspace() for c in label):
        return f"'label' {label!r} contains whitespace", f"{where}.label"
    start, end = entity["start"], entity["end"]
    if not 0 <= start <= len(text):
        return f"start {start} is outside the text [0, {len(text)}]", f"{where}.start"
    if not 0 <= end <= len(text):
        return f"end {end} is outside the text [0, {len(text)}]", f"{where}.end"
    if start >= end:
        return f"start {start} is not before end {end}", f"{where}.end"
    if not text[start:end].strip():
        return f"entity [{start}, {end}) is only whitespace", where
    return None


def _read_entities(
    text: str, entities: list[Any], number: int, issues: _Issues
) -> tuple[list[tuple[int, int, str]], int] | None:
    """The validated, trimmed ``(start, end, label)`` spans of one line's entities and how
    many were trimmed; ``None`` when the line has problems (already added to ``issues``)."""
    spans: list[tuple[int, int, str, int]] = []  # start, end, label, index in the line
    stripped = 0
    ok = True
    for i, entity in enumerate(entities):
        problem = _entity_problem(text, entity, f"entities[{i}]")
        if problem is not None:
            issues.add(number, *problem)
            ok = False
            continue
        start: int = entity["start"]
        end: int = entity["end"]
        label: str = entity["label"]
        trimmed_start, trimmed_end = start, end
        while text[trimmed_start].isspace():
            trimmed_start += 1
        while text[trimmed_end - 1].isspace():
            trimmed_end -= 1
        if (trimmed_start, trimmed_end) != (start, end):
            stripped += 1
        spans.append((trimmed_start, trimmed_end, label, i))
    if not ok:
        return None
    spans.sort()
    by_index = {i: (start, end) for start, end, _, i in spans}
    reach, reach_i = -1, -1  # the furthest end so far, and whose it is
    for start, end, _, i in spans:
        if start < reach:
            # Name the entity that comes later in the line, against the earlier one.
            later, earlier = max(i, reach_i), min(i, reach_i)
            (a, b), (c, d) = by_index[later], by_index[earlier]
            issues.add(
                number,
                f"entity [{a}, {b}) overlaps entities[{earlier}] [{c}, {d})",
                f"entities[{later}]",
            )
            ok = False
        if end > reach:
            reach, reach_i = end, i
    if not ok:
        return None
    return [(s, e, label) for s, e, label, _ in spans], stripped


def read_jsonl(path: StrPath) -> Corpus:
    """Read a JSONL corpus: one ``{"text": ..., "entities": [...]}`` object per line.

    Blank lines are skipped, and so is a text without words (empty or whitespace) that has
    no entities. Entities with leading/trailing whitespace are trimmed and counted in
    ``Corpus.stripped``. Words come from :func:`~mslm_core.text.word_spans` with every entity
    boundary as a cut, and a mention is the words inside its entity. Raises
    :class:`CorpusError` listing up to :data:`MAX_ISSUES` problems (line and field), or when
    the file holds no sentence.
    """
    name = os.fspath(path)
    issues = _Issues(name)
    sentences: list[Sentence] = []
    stripped = 0
    for number, line in _lines(name, issues):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            issues.add(number, f"invalid JSON: {e.msg} (column {e.colno})")
            continue
        if not isinstance(record, dict):
            issues.add(number, f"expected a JSON object, found {_type_name(record)}")
            continue
        text, entities = record.get("text"), record.get("entities")
        line_ok = True
        if "text" not in record:
            issues.add(number, "missing 'text'", "text")
            line_ok = False
        elif not isinstance(text, str):
            issues.add(number, f"'text' must be a string, found {_type_name(text)}", "text")
            line_ok = False
        if "entities" not in record:
            issues.add(
                number, "missing 'entities' (use [] for a text without entities)", "entities"
            )
            line_ok = False
        elif not isinstance(entities, list):
            found = _type_name(entities)
            issues.add(number, f"'entities' must be a list, found {found}", "entities")
            line_ok = False
        if not line_ok:
            continue
        assert isinstance(text, str) and isinstance(entities, list)
        result = _read_entities(text, entities, number, issues)
        if result is None:
            continue
        spans, n_stripped = result
        stripped += n_stripped
        cuts = [b for start, end, _ in spans for b in (start, end)]
        words = word_spans(text, boundaries=cuts)
        if not words:
            continue  # no entity either: an entity on a text without words is whitespace
        starts = {a: i for i, (a, _) in enumerate(words)}
        ends = {b: i + 1 for i, (_, b) in enumerate(words)}
        mentions = [Mention(starts[s], ends[e], label) for s, e, label in spans]
        sentences.append(Sentence(text, words, mentions))

    issues.raise_if_any()
    if not sentences:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")
    return Corpus(sentences, path=name, stripped=stripped)


def _atomic_write(path: StrPath, lines: Iterator[str]) -> None:
    """Write ``lines`` to ``path`` through a temporary file in the same directory.

    The temporary file is created with the usual permissions (0666 less the umask; those of
    ``path`` when it exists), flushed to disk, then moved over ``path`` with ``os.replace``.
    Parent directories are created. On any error the temporary file is removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as out:
            for line in lines:
                out.write(line)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
    issues = _Issues(name)
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
    _atomic_write(name, _conll_lines(corpus))


def _jsonl_lines(corpus: Corpus) -> Iterator[str]:
    for sentence in corpus.sentences:
        entities = [
            {"start": start, "end": end, "label": label}
            for start, end, label in sentence.char_mentions()
        ]
        record = {"text": sentence.text, "entities": entities}
        yield json.dumps(record, ensure_ascii=False) + "\n"


def write_jsonl(corpus: Corpus, path: StrPath) -> None:
    """Write ``corpus`` as JSONL, one ``{"text", "entities"}`` object per sentence, with the
    character offsets of :meth:`Sentence.char_mentions` (UTF-8, non-ASCII kept as is)."""
    _atomic_write(path, _jsonl_lines(corpus))


def _check_format(path: str, format: str) -> str:
    name = format.lower()
    if name not in FORMATS:
        raise CorpusError.single(
            path, None, f"unknown corpus format {format!r}; valid: {', '.join(FORMATS)}"
        )
    return name


def _sniff(path: str) -> str:
    """``jsonl`` when the first non-blank byte of the file is ``{``, else ``conll``."""
    try:
        with open(path, "rb") as handle:
            return _sniff_handle(handle)
    except FileNotFoundError:
        raise CorpusError.single(path, None, "file not found") from None
    except IsADirectoryError:
        raise CorpusError.single(path, None, "is a directory, not a corpus file") from None
    except OSError as e:
        raise CorpusError.single(path, None, f"cannot open: {e.strerror or e}") from None


def _sniff_handle(handle: IO[bytes]) -> str:
    first_chunk = True
    while chunk := handle.read(65536):
        if first_chunk and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]
        first_chunk = False
        stripped = chunk.lstrip()
        if stripped:
            return "jsonl" if stripped.startswith(b"{") else "conll"
    return "conll"


def detect_format(path: StrPath) -> str:
    """The format of ``path``: from its extension (see :data:`EXTENSIONS`), else sniffed
    from its first non-blank byte (``{`` means JSONL)."""
    name = os.fspath(path)
    by_extension = EXTENSIONS.get(Path(name).suffix.lower())
    return by_extension if by_extension is not None else _sniff(name)


def read_corpus(path: StrPath, format: str | None = None) -> Corpus:
    """Read a corpus in ``format`` (``"conll"`` or ``"jsonl"``), detected when ``None``."""
    name = os.fspath(path)
    if format is not None:
        chosen = _check_format(name, format)
    else:
        p = Path(name)
        if not p.exists():
            raise CorpusError.single(name, None, "file not found")
        if p.is_dir():
            raise CorpusError.single(name, None, "is a directory, not a corpus file")
        chosen = detect_format(name)
    return read_jsonl(name) if chosen == "jsonl" else read_conll(name)


def write_corpus(corpus: Corpus, path: StrPath, format: str | None = None) -> None:
    """Write ``corpus`` in ``format``; when ``None``, the format comes from the extension."""
    name = os.fspath(path)
    if format is not None:
        chosen = _check_format(name, format)
    else:
        suffix = Path(name).suffix.lower()
        if suffix not in EXTENSIONS:
            known = ", ".join(EXTENSIONS)
            raise CorpusError.single(
                name,
                None,
                f"cannot tell the format from the extension {suffix or '(none)'!r}; "
                f"pass format= ({', '.join(FORMATS)}) or use one of {known}",
            )
        chosen = EXTENSIONS[suffix]
    if chosen == "jsonl":
        write_jsonl(corpus, name)
    else:
        write_conll(corpus, name)


def convert(
    src: StrPath,
    dst: StrPath,
    src_format: str | None = None,
    dst_format: str | None = None,
) -> Corpus:
    """Read ``src`` and write it to ``dst`` (formats detected when ``None``); returns the
    corpus read."""
    corpus = read_corpus(src, src_format)
    write_corpus(corpus, dst, dst_format)
    return corpus


def load_splits(directory: StrPath) -> dict[str, Corpus]:
    """Read the splits of a corpus directory: ``train.*`` (required), ``dev.*``/``devel.*``/
    ``validation.*`` and ``test.*`` (optional), with an extension from :data:`EXTENSIONS`.

    Returns a dict with the keys ``"train"`` and, when present, ``"dev"`` and ``"test"``.
    Raises :class:`CorpusError` when the directory or the train split is missing, or when a
    split has more than one candidate file.
    """
    name = os.fspath(directory)
    root = Path(name)
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "directory not found"
        raise CorpusError.single(name, None, what)
    files = sorted(p for p in root.iterdir() if p.is_file())
    found: dict[str, list[Path]] = {split: [] for split in SPLIT_NAMES}
    for p in files:
        stem, suffix = p.stem.lower(), p.suffix.lower()
        if suffix not in EXTENSIONS:
            continue
        for split, stems in SPLIT_NAMES.items():
            if stem in stems:
                found[split].append(p)
    issues = _Issues(name)
    for split, candidates in found.items():
        if len(candidates) > 1:
            listed = ", ".join(p.name for p in candidates)
            issues.add(None, f"several files for the {split} split: {listed}; keep one")
    if not found["train"]:
        listed = ", ".join(p.name for p in files) or "no files"
        issues.add(
            None,
            f"no train split (train.* with one of {', '.join(EXTENSIONS)}); found: {listed}",
        )
    issues.raise_if_any()
    return {split: read_corpus(c[0]) for split, c in found.items() if c}
