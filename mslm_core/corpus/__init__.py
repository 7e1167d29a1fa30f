"""Annotated corpora in five formats, read, written and converted; predictions rendered in the
annotation formats clinical tools speak.

``conll``
    One token per line, ``TOKEN<TAB>TAG`` (or ``TOKEN TAG`` separated by whitespace when the
    line has no tab), tags in IOB2 (``O``, ``B-Type``, ``I-Type``), a blank line between
    sentences, ``-DOCSTART-`` lines ignored. This is the format of the BLURB NER corpora.
``jsonl``
    One JSON object per line, ``{"text": str, "entities": [{"start", "end", "label"}]}`` with
    character offsets into ``text`` (code points, end exclusive). Words are cut with
    :func:`mslm_core.text.word_spans`, the splitter used at prediction time, so that training
    and serving see the same words; entity boundaries always cut words.
``labelstudio``
    A Label Studio export (JSON or JSON-MIN): a JSON array of tasks, one sentence per task
    with a completed annotation (:mod:`.labelstudio`).
``bioc``
    A BioC collection, JSON or XML (read and written through the ``bioc`` library): one
    sentence per passage; annotation offsets count from the start of the document
    (:mod:`.bioc`).
``pubtator``
    PubTator text: ``PMID|t|title``, ``PMID|a|abstract``, tab-separated mention lines with
    offsets into ``title + " " + abstract``; title and abstract are sentences
    (:mod:`.pubtator`).

The three character-offset formats cut words the way JSONL does, so a CoNLL corpus converted
to any of them and back has the same words and mentions. A corpus is a list of sentences:
documents (BioC, PubTator) are not kept as such, nor are identifiers and relations.

Readers report up to :data:`MAX_ISSUES` problems at once in a
:class:`~mslm_core.errors.CorpusError`, each naming the file, the 1-based line and the field.
The line readers stream the file; the JSON readers stream it one task or document at a time.
Writers are atomic: the file is written next to its destination and then moved over it, so a
failed write never leaves a half-written corpus behind.

:func:`detect_format` goes by the extension (:data:`EXTENSIONS`); for ``.json`` and
``.txt``, which several formats use, and for unknown extensions it looks at the content:
a JSON array is Label Studio, a JSON object with a top-level ``documents`` key is BioC, any
other JSON object JSONL; a first line ``PMID|t|`` or ``PMID|a|`` is PubTator; anything else
CoNLL. Writing goes by the extension alone (``.json`` writes JSONL, ``.txt`` CoNLL: pass the
format for the others).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from ..errors import CorpusError
from . import formats
from ._io import MAX_ISSUES, IssueCollector, StrPath, open_binary
from ._shared import label_problem
from .model import Corpus, CorpusSummary, Mention, Sentence, SentenceList, Tally

# The formats: each module registers its own (formats.py); FORMATS lists them in this order.
# isort: off
from .conll import DOCSTART, read_conll, write_conll
from .jsonl import read_jsonl, write_jsonl
from .labelstudio import predictions_to_labelstudio, read_labelstudio, write_labelstudio
from .bioc import looks_like_xml, predictions_to_bioc, read_bioc, write_bioc
from .pubtator import predictions_to_pubtator, read_pubtator, write_pubtator

# isort: on

#: Format names accepted by :func:`read_corpus`, :func:`write_corpus` and :func:`convert`.
FORMATS = tuple(formats.formats())


def _extensions() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    implied = {ext: f.name for f in formats.formats().values() for ext in f.extensions}
    shared: dict[str, tuple[str, ...]] = {}
    for fmt in formats.formats().values():
        for ext in fmt.also_reads:
            shared[ext] = (*shared.get(ext, (implied[ext],)), fmt.name)
    return implied, shared


#: File extensions (lower case) and the format they imply; when reading, the content of a
#: file whose extension other formats also read (``.json``, ``.txt``) decides among them (see
#: :func:`detect_format`).
EXTENSIONS, _SHARED_EXTENSIONS = _extensions()

#: The extension a file of each format is stored under; :func:`detect_format` reads it back
#: as that format.
SUFFIXES: dict[str, str] = {name: fmt.suffix for name, fmt in formats.formats().items()}

#: The corpus formats that render predictions (``mslm_core.render.PREDICTIONS`` adds the
#: service's own shape and FHIR).
PREDICTION_FORMATS = tuple(
    name for name, fmt in formats.formats().items() if fmt.predictions is not None
)

#: File stems (lower case) recognised by :func:`load_splits`, per split.
SPLIT_NAMES: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "dev": ("dev", "devel", "validation"),
    "test": ("test",),
}


def _check_format(path: str, format: str) -> str:
    name = format.lower()
    if name not in FORMATS:
        raise CorpusError.single(
            path, None, f"unknown corpus format {format!r}; valid: {', '.join(FORMATS)}"
        )
    return name


def _sniff(path: str) -> tuple[str, bool]:
    """The format the content of ``path`` looks like (see :func:`detect_format`), and whether
    it is XML."""
    with open_binary(path) as handle:
        head = _head(handle)
    return formats.sniff(head), looks_like_xml(head)


_SNIFF_BYTES = 1 << 20


def _head(handle: IO[bytes]) -> bytes:
    """The first non-blank bytes of a file, up to 1 MiB, a UTF-8 byte-order mark removed."""
    head = handle.read(_SNIFF_BYTES)
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    while True:
        stripped = head.lstrip()
        if stripped or not head:
            break
        head = handle.read(_SNIFF_BYTES)  # a blank megabyte: the content starts further on
    return stripped + handle.read(_SNIFF_BYTES - len(stripped))


def detect_format(path: StrPath, name: str | None = None) -> str:
    """The format of ``path``: from the extension of ``name`` (default: of ``path``; pass
    the client's file name for an upload spooled under another name) when :data:`EXTENSIONS`
    names a single format for it, else from its content: ``[`` starts a Label Studio export,
    ``{`` a BioC collection when the object has a top-level ``documents`` key and JSONL
    otherwise, ``PMID|t|`` or ``PMID|a|`` PubTator, and anything else is CoNLL. For ``.json``
    and ``.txt`` the content only chooses among the formats that use that extension."""
    source = os.fspath(path)
    suffix = Path(source if name is None else name).suffix.lower()
    if suffix in EXTENSIONS and suffix not in _SHARED_EXTENSIONS:
        return EXTENSIONS[suffix]
    sniffed, xml = _sniff(source)
    if suffix in _SHARED_EXTENSIONS and sniffed not in _SHARED_EXTENSIONS[suffix]:
        if xml:  # XML under .txt: read as CoNLL it gives confusing errors
            raise CorpusError.single(
                source, 1, "an XML file (BioC XML?) named .txt: name it .xml, or read it as bioc"
            )
        return EXTENSIONS[suffix]  # the reader of the extension's format says what is wrong
    return sniffed


def read_corpus(
    path: StrPath,
    format: str | None = None,
    *,
    type_map: Mapping[str, str] | None = None,
    trust_offsets: bool = False,
) -> Corpus:
    """Read a corpus in ``format`` (one of :data:`FORMATS`), detected when ``None``.

    ``type_map`` renames entity types as they are read (``{"SpecificDisease": "Disease"}``;
    see :func:`parse_type_map`). ``trust_offsets`` (PubTator): a mention column that
    differs from the text at its offsets is replaced by that text, each logged, instead of
    refused."""
    name, chosen = _reader_format(path, format)
    sink = SentenceList(type_map)
    formats.fill(chosen, name, sink, trust_offsets)
    return sink.corpus(name)


def parse_type_map(text: str) -> dict[str, str]:
    """``"SpecificDisease=Disease,DiseaseClass=Disease"`` as a dict; raises ``ValueError``
    naming the item that is not ``OLD=NEW`` with two valid type names."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        old, sep, new = (s.strip() for s in item.partition("="))
        problem = "expected OLD=NEW" if not sep else label_problem(old) or label_problem(new)
        if problem:
            raise ValueError(f"type map item {item!r}: {problem}")
        out[old] = new
    return out


def scan_corpus(
    path: StrPath,
    format: str | None = None,
    *,
    type_map: Mapping[str, str] | None = None,
    trust_offsets: bool = False,
) -> CorpusSummary:
    """Check a corpus as :func:`read_corpus` does (the same :class:`CorpusError`) and count
    it (:meth:`Corpus.stats`, :attr:`Corpus.types`) without keeping it: memory stays that of
    one sentence, task or document whatever the size of the file (a Label Studio JSON-MIN
    export with task ids also keeps a word count and the labels per task, to let a later
    annotation of a task replace an earlier one)."""
    name, chosen = _reader_format(path, format)
    tally = Tally(type_map)
    formats.fill(chosen, name, tally, trust_offsets)
    return tally.summary()


def _reader_format(path: StrPath, format: str | None) -> tuple[str, str]:
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
    return name, chosen


def write_corpus(corpus: Corpus, path: StrPath, format: str | None = None) -> None:
    """Write ``corpus`` in ``format``; when ``None``, the format comes from the extension."""
    name = os.fspath(path)
    formats.get(output_format(name, format)).write(corpus, name)


def output_format(path: StrPath, format: str | None = None) -> str:
    """The format :func:`write_corpus` writes ``path`` in: ``format`` when given (checked),
    else the one its extension implies (:data:`EXTENSIONS`)."""
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
    return chosen


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
    return {split: read_corpus(path) for split, path in split_paths(directory).items()}


def split_paths(directory: StrPath) -> dict[str, Path]:
    """The files of the splits of a corpus directory, as :func:`load_splits` finds them,
    without reading them."""
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
    issues = IssueCollector(name)
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
    return {split: c[0] for split, c in found.items() if c}


__all__ = [
    "DOCSTART",
    "EXTENSIONS",
    "FORMATS",
    "MAX_ISSUES",
    "PREDICTION_FORMATS",
    "SPLIT_NAMES",
    "SUFFIXES",
    "Corpus",
    "CorpusSummary",
    "Mention",
    "Sentence",
    "convert",
    "detect_format",
    "load_splits",
    "output_format",
    "parse_type_map",
    "predictions_to_bioc",
    "predictions_to_labelstudio",
    "predictions_to_pubtator",
    "read_bioc",
    "read_conll",
    "read_corpus",
    "read_jsonl",
    "read_labelstudio",
    "read_pubtator",
    "scan_corpus",
    "split_paths",
    "write_bioc",
    "write_conll",
    "write_corpus",
    "write_jsonl",
    "write_labelstudio",
    "write_pubtator",
]
