"""Notes to annotate in bulk, read from a file: each note an id and its text.

Formats: the catalogue :data:`NOTES`, each format a :class:`NoteFormat` registered at the end
of this module (its reader, the extensions that imply it, how its content is told, one line of
help that the API's document, ``mslm annotate``/``mslm bulk`` and docs/bulk.md show). A file's
format is the one given, else told by its name, else by its first bytes.

A text file is read in the encoding ``mslm_core.charsets`` tells or is given, so every format
but Parquet comes in any encoding. A line or document that cannot be read does not stop the
others: it is returned as a :class:`NoteProblem` (where, what), and the caller records it and
goes on.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import charsets
from .errors import ConfigError
from .text import character_problem

ID_COLUMNS = ("id", "note_id")
TEXT_COLUMNS = ("text", "note_text")


@dataclass(frozen=True)
class Note:
    id: str
    text: str


@dataclass(frozen=True)
class NoteProblem:
    """A note that could not be read: ``where`` is ``line N`` or ``document N``; ``id`` the
    note's id when it could be read."""

    where: str
    reason: str
    id: str | None = None


#: A format's reader: the notes of a file (and a problem for each one it cannot read); the
#: longest note it may build (a BioC document's passages are placed at their offsets).
ReadNotes = Callable[[Path, int], Iterator[Note | NoteProblem]]


@dataclass(frozen=True)
class NoteFormat:
    """A notes format. ``extensions`` (lower case, with the dot) imply it. ``magic``: the first
    bytes of any file of it (told before anything is decoded); ``sniff``: whether a text's
    first characters (up to 4,096, a byte-order mark and leading blanks removed) are of this
    format — asked in the catalogue's order, the first to say yes wins; a format with neither
    is told by its name only, or is the fallback (``fallback``). ``text``: read from text in
    any encoding (else from its own bytes). ``help``: what a file of it holds, in one line."""

    name: str
    read: ReadNotes
    extensions: tuple[str, ...]
    help: str
    sniff: Callable[[str], bool] | None = None
    magic: bytes | None = None
    text: bool = True
    fallback: bool = False


#: The notes formats, in the order their content is told.
NOTES: dict[str, NoteFormat] = {}


def register(fmt: NoteFormat) -> NoteFormat:
    if fmt.name in NOTES:
        raise ValueError(f"notes format {fmt.name!r} is registered twice")
    NOTES[fmt.name] = fmt
    return fmt


def formats_help() -> str:
    """Every notes format and its help, for a flag's or a field's description."""
    return "; ".join(f"{f.name}: {f.help}" for f in NOTES.values())


_PUBTATOR_LINE = re.compile(r"([^\s|]+)\|([ta])\|(.*)")


def _header_names(line: str, delimiter: str) -> list[str]:
    return [c.strip().strip('"').strip().lower() for c in line.split(delimiter)]


def _by_magic(path: Path) -> str | None:
    """The format whose magic number ``path`` starts with, if any."""
    with open(path, "rb") as binary:
        head = binary.read(16)
    return next((f.name for f in NOTES.values() if f.magic and head.startswith(f.magic)), None)


def _by_name(name: str) -> str | None:
    suffix = Path(name).suffix.lower()
    return next((f.name for f in NOTES.values() if suffix in f.extensions), None)


@dataclass(frozen=True)
class NotesSource:
    """A notes file made ready to read: ``path`` (UTF-8 text, or the Parquet file itself),
    its ``format``, how its bytes were read (``encoding``; None: Parquet) and the bytes that
    did not decode (the first :data:`~mslm_core.charsets.MAX_REPORTED`, and their count)."""

    path: Path
    format: str
    encoding: charsets.Encoding | None
    undecodable: list[charsets.Undecodable]
    undecodable_count: int


def prepare_notes(
    path: Path,
    scratch: Path,
    filename: str | None = None,
    format: str | None = None,
    encoding: str | None = None,
) -> NotesSource:
    """``path`` ready for :func:`read_notes`: Parquet as it is; text in ``encoding`` or the one
    ``mslm_core.charsets`` tells, written to ``scratch`` as UTF-8 unless it is UTF-8 already;
    its format ``format``, else told by ``filename`` (or its own name) and its content."""
    name = filename or path.name
    fmt = format or _by_name(name) or _by_magic(path)
    told = None
    if fmt is None or NOTES[fmt].text:
        told = charsets.detect(path, encoding, name)
    source, count = path, 0
    undecodable: list[charsets.Undecodable] = []
    if told is not None and (told.name != "utf-8" or told.confidence is not None):
        source = scratch
        undecodable, count = charsets.to_utf8(path, scratch, told.name)
    fmt = fmt or detect_note_format(source, name)
    return NotesSource(source, fmt, told, undecodable, count)


def detect_note_format(path: Path, name: str | None = None) -> str:
    """The format by the file's name (a format's ``extensions``), else by its first bytes (a
    ``magic`` number, then each ``sniff`` in the catalogue's order), else the fallback."""
    told = _by_name(name or path.name) or _by_magic(path)
    if told is not None:
        return told
    with open(path, encoding="utf-8", errors="replace") as handle:
        head = handle.read(4096).lstrip("\ufeff \t\r\n")
    for fmt in NOTES.values():
        if fmt.sniff is not None and fmt.sniff(head):
            return fmt.name
    return next(f.name for f in NOTES.values() if f.fallback)


#: The longest note a BioC document may spread its passages' offsets over (its gaps are
#: filled with spaces, so that a small file with huge offsets would become a huge note).
MAX_NOTE_CHARS = 10_000_000


def read_notes(
    path: Path, format: str, max_chars: int = MAX_NOTE_CHARS
) -> Iterator[Note | NoteProblem]:
    """The notes of ``path`` in file order, and a problem for each one that cannot be read.
    ``max_chars``: a BioC document whose passages' offsets reach past it is a problem, never
    built (a note of another format is as long as its bytes in the file)."""
    if format not in NOTES:
        raise ValueError(f"unknown notes format {format!r}; valid: {', '.join(NOTES)}")
    items = NOTES[format].read(path, max_chars)
    for k, item in enumerate(items, 1):
        yield _usable(item, k)


def _usable(item: Note | NoteProblem, k: int) -> Note | NoteProblem:
    """The note, or a problem when its id or text holds what no store or answer can (a NUL,
    a lone surrogate: ``mslm_core.text.character_problem``); a problem's id is dropped then."""
    if isinstance(item, NoteProblem):
        if item.id is not None and character_problem(item.id):
            return NoteProblem(item.where, item.reason)
        return item
    for part, value in (("id", item.id), ("text", item.text)):
        problem = character_problem(value)
        if problem is not None:
            bad_id = part == "id"
            return NoteProblem(
                f"note {k}", f"its {part} holds {problem}", None if bad_id else item.id
            )
    return item


def _lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """(line number, line) with ``None`` for a line that is not UTF-8."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                yield number, raw.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
            except UnicodeDecodeError:
                yield number, None


def _text(path: Path) -> Iterator[Note | NoteProblem]:
    for number, line in _lines(path):
        if line is None:
            yield NoteProblem(f"line {number}", "not UTF-8 text", str(number))
        elif line.strip():
            yield Note(str(number), line)


def _jsonl(path: Path) -> Iterator[Note | NoteProblem]:
    for number, line in _lines(path):
        where = f"line {number}"
        if line is None:
            yield NoteProblem(where, "not UTF-8 text")
            continue
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield NoteProblem(where, f"not JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(row, dict):
            yield NoteProblem(where, f"a JSON {type(row).__name__}, not an object")
            continue
        raw_id = row.get("id", row.get("note_id", number))
        if isinstance(raw_id, bool) or not isinstance(raw_id, int | str) or raw_id == "":
            yield NoteProblem(where, "field 'id': must be a string or an integer")
            continue
        text = row.get("text", row.get("note_text"))
        if not isinstance(text, str):
            got = "missing" if text is None else f"a {type(text).__name__}"
            yield NoteProblem(where, f"field 'text': {got}, not a string", str(raw_id))
            continue
        yield Note(str(raw_id), text)


def _columns(names: list[str], where: str) -> tuple[int | None, int]:
    """The indexes of the id column (None: none) and of the text column among ``names``."""
    lowered = [n.strip().lower() for n in names]
    text = next((lowered.index(c) for c in TEXT_COLUMNS if c in lowered), None)
    if text is None:
        raise ConfigError(
            f"{where}: no text column (one named {' or '.join(TEXT_COLUMNS)}); "
            f"the columns are {', '.join(repr(n) for n in names[:20])}"
        )
    found = next((lowered.index(c) for c in ID_COLUMNS if c in lowered), None)
    return found, text


def _delimited(path: Path, delimiter: str, max_chars: int) -> Iterator[Note | NoteProblem]:
    """CSV or TSV with a header (RFC 4180 quoting: a quoted field may span lines)."""
    # a field may be as long as a note, and a little more, to be refused as too long
    csv.field_size_limit(max(csv.field_size_limit(), max_chars + 1))
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise ConfigError(f"the header line: {exc}") from None
        if header is None:
            return
        id_at, text_at = _columns(header, "the header line")
        width, number, line = len(header), 0, 1
        while True:
            start = line + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield NoteProblem(
                    f"line {start}", f"not {'CSV' if delimiter == ',' else 'TSV'}: {exc}"
                )
                return  # the reader cannot find the next record after a broken quote
            line = reader.line_num
            number += 1
            if not any(field.strip() for field in row):
                continue
            where = f"record {number} (line {start})"
            if len(row) != width:
                got = f"{len(row)} fields, the header {width}"
                yield NoteProblem(
                    where, got, row[id_at] if id_at is not None and id_at < len(row) else None
                )
                continue
            note_id = row[id_at].strip() if id_at is not None else str(number)
            if not note_id:
                yield NoteProblem(where, "an empty id")
                continue
            yield Note(note_id, row[text_at])


def _parquet(path: Path, batch_rows: int = 1024) -> Iterator[Note | NoteProblem]:
    """A Parquet file's id and text columns, a batch of rows at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        yield NoteProblem("file", f"not a Parquet file: {type(exc).__name__}")
        return
    names = list(table.schema_arrow.names)
    id_at, text_at = _columns(names, "the Parquet schema")
    columns = [names[text_at]] + ([names[id_at]] if id_at is not None else [])
    number = 0
    for batch in table.iter_batches(batch_size=batch_rows, columns=columns):
        texts = batch.column(0).to_pylist()
        ids = batch.column(1).to_pylist() if id_at is not None else [None] * len(texts)
        for raw_id, text in zip(ids, texts, strict=True):
            number += 1
            where = f"row {number}"
            note_id = str(number) if id_at is None else raw_id
            if isinstance(note_id, bool) or not isinstance(note_id, int | str) or note_id == "":
                yield NoteProblem(
                    where, f"column {names[id_at or 0]!r}: not a string or an integer"
                )
                continue
            if not isinstance(text, str):
                got = "null" if text is None else f"a {type(text).__name__}"
                yield NoteProblem(
                    where, f"column {names[text_at]!r}: {got}, not a string", str(note_id)
                )
                continue
            yield Note(str(note_id), text)


def _fhir(path: Path) -> Iterator[Note | NoteProblem]:
    from .fhir import notes_of

    for n in notes_of(path.read_text(encoding="utf-8")):
        if n.text is None or n.id is None:
            yield NoteProblem(n.where, n.problem or "no text", n.id)
        else:
            yield Note(n.id, n.text)


def _pubtator(path: Path) -> Iterator[Note | NoteProblem]:
    current: list[str | None] = []  # pmid, title, abstract

    def done() -> Iterator[Note | NoteProblem]:
        if current:
            pmid, title, abstract = current
            text = title if abstract is None else f"{title} {abstract}"
            yield Note(str(pmid), text or "")

    for number, line in _lines(path):
        if line is None:
            yield NoteProblem(f"line {number}", "not UTF-8 text")
            continue
        m = _PUBTATOR_LINE.match(line)
        if m is None:
            if not line.strip():  # a document ends
                yield from done()
                current = []
            continue  # a mention or relation line: not part of the note's text
        pmid, kind, text = m.groups()
        if kind == "t":
            yield from done()
            current = [pmid, text, None]
        elif current and current[0] == pmid:
            current[2] = text
        else:
            yield NoteProblem(f"line {number}", f"abstract of {pmid} without its title", pmid)
    yield from done()


def _bioc(path: Path, max_chars: int) -> Iterator[Note | NoteProblem]:
    from bioc import biocjson, biocxml

    with open(path, encoding="utf-8", errors="replace") as handle:
        head = handle.read(64).lstrip("\ufeff \t\r\n")
    try:
        if head.startswith("<"):
            with open(path, encoding="utf-8") as handle:
                collection = biocxml.load(handle)
        else:
            with open(path, encoding="utf-8") as handle:
                collection = biocjson.load(handle)
    except Exception as exc:  # the whole file: nothing can be read from it
        yield NoteProblem("file", f"not a BioC collection: {type(exc).__name__}: {exc}")
        return
    for k, document in enumerate(collection.documents, 1):
        doc_id = str(document.id or k)
        pieces: list[str] = []
        end = 0
        for passage in document.passages:
            piece = passage.text or ""
            offset = int(passage.offset or 0)
            if offset < end:
                offset = end + (1 if end else 0)
            if offset + len(piece) > max_chars:  # checked before any space is made
                break
            pieces += [" " * (offset - end), piece]
            end = offset + len(piece)
        else:
            yield Note(doc_id, "".join(pieces))
            continue
        yield NoteProblem(
            f"document {k}",
            f"its passages reach past {max_chars:,} characters (their offsets; "
            "MSLM_MAX_TEXT_CHARS)",
            doc_id,
        )


def _header_sniff(delimiter: str) -> Callable[[str], bool]:
    def sniff(head: str) -> bool:
        first = head.split("\n", 1)[0]
        return bool(set(_header_names(first, delimiter)) & set(TEXT_COLUMNS))

    return sniff


_COLUMNS_HELP = (
    "a header naming the text column (text or note_text) and, when there is one, the id column "
    "(id or note_id; none: the record's number); RFC 4180 quoting: a quoted field holds the "
    "delimiter, doubled quotes and line breaks"
)
register(
    NoteFormat(
        "parquet",
        lambda path, _: _parquet(path),
        (".parquet",),
        "the columns of csv (id or note_id, text or note_text), read a batch of rows at a time",
        magic=b"PAR1",
        text=False,
    )
)
register(
    NoteFormat(
        "fhir",
        lambda path, _: _fhir(path),
        (),
        "FHIR R4 DocumentReference resources (one, a Bundle, or NDJSON): a note each, its id "
        "the resource's, its text the attachment's data",
        sniff=lambda head: head.startswith("{") and '"resourceType"' in head,
    )
)
register(
    NoteFormat(
        "bioc",
        _bioc,
        (".xml",),
        "a BioC collection (JSON or XML): a note a document, its passages at their offsets",
        sniff=lambda head: (
            head.startswith("<")
            or (head.startswith("{") and '"documents"' in head and "\n{" not in head[:200])
        ),
    )
)
register(
    NoteFormat(
        "jsonl",
        lambda path, _: _jsonl(path),
        (".jsonl", ".ndjson"),
        'one JSON object a line, {"id", "text"} (or note_id, note_text); no id: the line number',
        sniff=lambda head: head.startswith("{"),
    )
)
register(
    NoteFormat(
        "tsv",
        lambda path, max_chars: _delimited(path, "\t", max_chars),
        (".tsv", ".tab"),
        "tab-separated, " + _COLUMNS_HELP,
        sniff=_header_sniff("\t"),
    )
)
register(
    NoteFormat(
        "csv",
        lambda path, max_chars: _delimited(path, ",", max_chars),
        (".csv",),
        "comma-separated, " + _COLUMNS_HELP,
        sniff=_header_sniff(","),
    )
)
register(
    NoteFormat(
        "pubtator",
        lambda path, _: _pubtator(path),
        (".pubtator", ".pub"),
        "a note a document, its title and abstract",
        sniff=lambda head: bool(_PUBTATOR_LINE.match(head.split("\n", 1)[0])),
    )
)
register(
    NoteFormat(
        "text",
        lambda path, _: _text(path),
        (".txt",),
        "one note a line, its line number as id (empty lines skipped)",
        fallback=True,
    )
)

#: The formats' names (the API's enum, the commands' choices, the client's list).
NOTE_FORMATS = tuple(NOTES)
