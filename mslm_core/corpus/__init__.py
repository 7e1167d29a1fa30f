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

import os
from pathlib import Path
from typing import IO

from ..errors import CorpusError
from ._io import MAX_ISSUES, IssueCollector, StrPath
from .conll import DOCSTART, read_conll, write_conll
from .jsonl import read_jsonl, write_jsonl
from .model import Corpus, Mention, Sentence

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
    "SPLIT_NAMES",
    "Corpus",
    "Mention",
    "Sentence",
    "convert",
    "detect_format",
    "load_splits",
    "read_conll",
    "read_corpus",
    "read_jsonl",
    "split_paths",
    "write_conll",
    "write_corpus",
    "write_jsonl",
]
