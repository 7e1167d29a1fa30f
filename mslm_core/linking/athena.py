"""OMOP standard vocabularies as a linking vocabulary, from Athena's ``CONCEPT``,
``CONCEPT_SYNONYM`` and ``CONCEPT_RELATIONSHIP`` tables: the files of an Athena download
(tab-separated; also the comma-separated, quoted CSV of the OHDSI example datasets) or the
rows of a warehouse's vocabulary schema (``store.athena`` reads them, read only).

What each entity type is linked to is a :class:`TypeSpec`: a domain, its vocabularies and,
optionally, concept classes (:data:`DEFAULT_TYPES`: Problem → Condition in SNOMED; Drug →
Drug, RxNorm and RxNorm Extension ingredients; Test → Measurement in LOINC; Procedure →
Procedure in SNOMED, CPT4 and HCPCS; Anatomy → Spec Anatomic Site in SNOMED). The standard
concepts of those are the vocabulary; a valid non-standard concept of
:data:`SOURCE_VOCABULARIES` whose "Maps to" reaches one of them is kept as a name of it (an
ICD-10-CM condition finds its SNOMED concept, and says it came through the ICD-10-CM one).

The tables are streamed through a SQLite database on disk: an Athena download holds millions
of concepts and tens of millions of relationships, and memory stays that of a batch of rows.
The result is a TSV that :func:`~mslm_core.linking.read_tsv` reads, with its ``#types`` map."""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import sqlite3
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol

from ..corpus._io import atomic_write
from ..errors import ConfigError
from .vocabulary import MAX_NAME_CHARS, MAX_NAMES_PER_CONCEPT

log = logging.getLogger(__name__)

#: The English language concept (CONCEPT_SYNONYM.language_concept_id): other languages'
#: synonyms are left out.
ENGLISH = 4180186
#: Rows written to SQLite per transaction.
BATCH = 50_000


@dataclass(frozen=True)
class TypeSpec:
    """The standard concepts an entity type is linked to: of ``domain``, in ``vocabularies``,
    and of ``classes`` when given (None: any class)."""

    domain: str
    vocabularies: tuple[str, ...]
    classes: tuple[str, ...] | None = None

    def describe(self) -> str:
        """As the command's ``--type`` takes it: ``Domain:Vocab|Vocab[:Class|Class]``."""
        classes = f":{'|'.join(self.classes)}" if self.classes else ""
        return f"{self.domain}:{'|'.join(self.vocabularies)}{classes}"

    def prefixes(self) -> tuple[str, ...]:
        """The concepts' parts (``Domain:Vocabulary:Class``) this type is linked inside."""
        if self.classes is None:
            return tuple(f"{self.domain}:{v}:" for v in self.vocabularies)
        return tuple(f"{self.domain}:{v}:{c}" for v in self.vocabularies for c in self.classes)


DEFAULT_TYPES: dict[str, TypeSpec] = {
    "Problem": TypeSpec("Condition", ("SNOMED",)),
    "Drug": TypeSpec("Drug", ("RxNorm", "RxNorm Extension"), ("Ingredient",)),
    "Test": TypeSpec("Measurement", ("LOINC",)),
    "Procedure": TypeSpec("Procedure", ("SNOMED", "CPT4", "HCPCS")),
    "Anatomy": TypeSpec("Spec Anatomic Site", ("SNOMED",)),
}
#: The corpora's types, linked as the clinical schema's that hold them.
ALIASES = {"Disease": "Problem", "Chemical": "Drug"}
#: The vocabularies whose non-standard concepts are kept as names of what they map to.
SOURCE_VOCABULARIES = (
    "SNOMED",
    "ICD10CM",
    "ICD9CM",
    "ICD10PCS",
    "ICD9Proc",
    "MeSH",
    "LOINC",
    "RxNorm",
    "RxNorm Extension",
    "CPT4",
    "HCPCS",
)
CONCEPT_COLUMNS = (
    "concept_id",
    "concept_name",
    "domain_id",
    "vocabulary_id",
    "concept_class_id",
    "standard_concept",
    "concept_code",
    "invalid_reason",
)
SYNONYM_COLUMNS = ("concept_id", "concept_synonym_name", "language_concept_id")
RELATIONSHIP_COLUMNS = ("concept_id_1", "concept_id_2", "relationship_id", "invalid_reason")


class Tables(Protocol):
    """Where the three tables' rows come from: each a stream of tuples in the order of its
    columns (:data:`CONCEPT_COLUMNS`, :data:`SYNONYM_COLUMNS`, :data:`RELATIONSHIP_COLUMNS`)."""

    def concepts(self) -> Iterable[Sequence[str]]: ...

    def synonyms(self) -> Iterable[Sequence[str]]: ...

    def relationships(self) -> Iterable[Sequence[str]]: ...

    def describe(self) -> str: ...


class AthenaFiles:
    """The tables of an Athena download: ``CONCEPT.csv``, ``CONCEPT_SYNONYM.csv`` and
    ``CONCEPT_RELATIONSHIP.csv`` in ``path``, a folder or a zip archive of them
    (tab-separated as Athena writes them, or comma-separated and quoted as the OHDSI example
    datasets are; upper- or lower-case names and headers). A missing file or column is a
    ConfigError naming it."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.is_dir():
            self._members = {p.name.lower(): p.name for p in self.path.iterdir() if p.is_file()}
        elif zipfile.is_zipfile(self.path):
            with zipfile.ZipFile(self.path) as archive:
                names = [n for n in archive.namelist() if not n.startswith("__MACOSX/")]
            self._members = {Path(n).name.lower(): n for n in names if not n.endswith("/")}
        else:
            raise ConfigError(f"{self.path}: not a folder or zip archive of Athena tables")
        for table in ("concept", "concept_synonym", "concept_relationship"):
            self._member(table)

    def _member(self, table: str) -> str:
        for name in (f"{table}.csv", f"{table}.tsv", f"{table}.txt"):
            if name in self._members:
                return self._members[name]
        raise ConfigError(f"{self.path}: no {table.upper()}.csv (an Athena download's tables)")

    @contextlib.contextmanager
    def _open(self, table: str) -> Iterator[tuple[str, IO[str]]]:
        member = self._member(table)
        if self.path.is_dir():
            with open(self.path / member, encoding="utf-8", newline="") as handle:
                yield str(self.path / member), handle
            return
        with zipfile.ZipFile(self.path) as archive, archive.open(member) as raw:
            yield f"{self.path}:{member}", io.TextIOWrapper(raw, encoding="utf-8", newline="")

    def _rows(self, table: str, columns: Sequence[str]) -> Iterator[list[str]]:
        with self._open(table) as (where, handle):
            head = handle.readline()
            delimiter = "\t" if "\t" in head else ","
            header = [c.strip().lower() for c in next(csv.reader([head], delimiter=delimiter))]
            missing = [c for c in columns if c not in header]
            if missing:
                raise ConfigError(f"{where}:1: no column {missing[0]!r} (has {', '.join(header)})")
            at = [header.index(c) for c in columns]
            # Athena's tab-separated files are not quoted: a name may hold a quote character
            quoting: Literal[0, 3] = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
            reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
            for number, row in enumerate(reader, 2):
                if len(row) < len(header):
                    if not row:
                        continue
                    raise ConfigError(
                        f"{where}:{number}: {len(row)} columns, the header has {len(header)}"
                    )
                yield [row[i] for i in at]

    def concepts(self) -> Iterator[list[str]]:
        return self._rows("concept", CONCEPT_COLUMNS)

    def synonyms(self) -> Iterator[list[str]]:
        return self._rows("concept_synonym", SYNONYM_COLUMNS)

    def relationships(self) -> Iterator[list[str]]:
        return self._rows("concept_relationship", RELATIONSHIP_COLUMNS)

    def describe(self) -> str:
        return f"the Athena tables of {self.path.name}"


@dataclass(frozen=True)
class Counts:
    """What an import kept: standard concepts per type, non-standard concepts kept as names
    of what they map to, synonyms, and the rows read."""

    concepts: Mapping[str, int]
    mapped: int
    synonyms: int
    rows_read: int


def omop_vocabulary(
    tables: Tables,
    out: str | os.PathLike[str],
    types: Mapping[str, TypeSpec] | None = None,
    sources: Sequence[str] = SOURCE_VOCABULARIES,
    name: str = "OMOP",
    work: str | os.PathLike[str] | None = None,
) -> Counts:
    """Write the linking vocabulary of ``tables`` to the TSV ``out``: the standard concepts
    ``types`` names (default :data:`DEFAULT_TYPES`), their English synonyms, and the valid
    non-standard concepts of ``sources`` that map to them, each with its code, vocabulary and
    parts (``Domain:Vocabulary:Class``). ``work``: where the SQLite staging database goes
    (default: a temporary folder beside ``out``)."""
    types = dict(types or DEFAULT_TYPES)
    folder = Path(work) if work is not None else Path(out).resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".athena-") as tmp:
        db = sqlite3.connect(Path(tmp) / "staging.sqlite")
        try:
            return _build(db, tables, out, types, tuple(sources), name)
        finally:
            db.close()


def _build(
    db: sqlite3.Connection,
    tables: Tables,
    out: str | os.PathLike[str],
    types: dict[str, TypeSpec],
    sources: tuple[str, ...],
    name: str,
) -> Counts:
    db.executescript(
        """
        PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA temp_store = FILE;
        CREATE TABLE concept (id INTEGER PRIMARY KEY, name TEXT, part TEXT, vocabulary TEXT,
                              code TEXT, standard INTEGER);
        CREATE TABLE maps (source INTEGER, target INTEGER);
        CREATE TABLE synonym (id INTEGER, name TEXT);
        """
    )
    wanted = {(s.domain, v) for s in types.values() for v in s.vocabularies}
    classes = {(s.domain, v): s.classes for s in types.values() for v in s.vocabularies}
    read = 0

    def concepts() -> Iterator[tuple[int, str, str, str, str, int]]:
        nonlocal read
        for row in tables.concepts():
            read += 1
            cid, label, domain, vocab, klass, standard, code, invalid = row
            if invalid or not cid.isdigit() or not label.strip():
                continue
            allowed = classes.get((domain, vocab), ())
            if (
                standard == "S"
                and (domain, vocab) in wanted
                and (allowed is None or klass in allowed)
            ):
                yield int(cid), label.strip(), f"{domain}:{vocab}:{klass}", vocab, code, 1
            elif standard != "S" and vocab in sources:
                yield int(cid), label.strip(), f"{domain}:{vocab}:{klass}", vocab, code, 0

    _insert(db, "INSERT OR REPLACE INTO concept VALUES (?, ?, ?, ?, ?, ?)", concepts())

    def maps() -> Iterator[tuple[int, int]]:
        nonlocal read
        for source, target, relationship, invalid in tables.relationships():
            read += 1
            usable = source.isdigit() and target.isdigit() and source != target
            if relationship == "Maps to" and not invalid and usable:
                yield int(source), int(target)

    _insert(db, "INSERT INTO maps VALUES (?, ?)", maps())

    def synonyms() -> Iterator[tuple[int, str]]:
        nonlocal read
        for cid, label, language in tables.synonyms():
            read += 1
            if cid.isdigit() and label.strip() and language in ("", str(ENGLISH)):
                yield int(cid), label.strip()

    _insert(db, "INSERT INTO synonym VALUES (?, ?)", synonyms())
    db.executescript(
        """
        CREATE INDEX synonym_id ON synonym (id);
        -- the non-standard concepts kept: those whose "Maps to" reaches a kept standard one
        CREATE TABLE mapped AS
          SELECT m.source AS source, min(m.target) AS target
          FROM maps m JOIN concept s ON s.id = m.source AND s.standard = 0
                      JOIN concept t ON t.id = m.target AND t.standard = 1
          GROUP BY m.source;
        """
    )
    kept = {k: 0 for k in types}
    prefixes = {k: s.prefixes() for k, s in types.items()}
    rows = db.execute(
        """
        SELECT c.id, c.name, c.part, c.vocabulary, c.code, NULL
          FROM concept c WHERE c.standard = 1
        UNION ALL
        SELECT c.id, c.name, t.part, c.vocabulary, c.code, m.target
          FROM mapped m JOIN concept c ON c.id = m.source JOIN concept t ON t.id = m.target
        ORDER BY 1
        """
    )
    synonyms_written = 0
    n_mapped = 0

    def lines() -> Iterator[str]:
        nonlocal synonyms_written, n_mapped
        kinds = [f"{k}={','.join(p)}" for k, p in prefixes.items()]
        kinds += [f"{a}={','.join(prefixes[k])}" for a, k in ALIASES.items() if k in prefixes]
        yield f"# {name}: OMOP standard concepts from {_clean(tables.describe())}\n"
        yield "#types\t" + "\t".join(kinds) + "\n"
        yield "#columns\tid\tname\tsynonyms\tparts\tcode\tvocabulary\tmaps_to\n"
        for cid, label, part, vocab, code, target in rows:
            if target is None:
                for kind, allowed in prefixes.items():
                    kept[kind] += part.startswith(allowed)
            else:
                n_mapped += 1
            names = _names(db, cid, label)
            synonyms_written += len(names)
            cells = [str(cid), _clean(label), "|".join(names), part, _clean(code), vocab]
            yield "\t".join([*cells, "" if target is None else str(target)]).rstrip("\t") + "\n"

    atomic_write(out, lines())
    log.info("OMOP vocabulary: %s, %d mapped concepts, %d rows read", kept, n_mapped, read)
    return Counts(kept, n_mapped, synonyms_written, read)


def _insert(db: sqlite3.Connection, sql: str, rows: Iterable[tuple[object, ...]]) -> None:
    batch: list[tuple[object, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH:
            db.executemany(sql, batch)
            db.commit()
            batch.clear()
    if batch:
        db.executemany(sql, batch)
        db.commit()


def _names(db: sqlite3.Connection, cid: int, label: str) -> list[str]:
    """A concept's synonyms that a TSV can hold, each once, its name left out."""
    seen = {label.strip()}
    out = []
    for (synonym,) in db.execute("SELECT name FROM synonym WHERE id = ?", (cid,)):
        clean = _clean(synonym)
        if clean and clean not in seen and "|" not in clean and len(clean) <= MAX_NAME_CHARS:
            seen.add(clean)
            out.append(clean)
            if len(out) >= MAX_NAMES_PER_CONCEPT - 1:
                break
    return out


def _clean(text: str) -> str:
    """One line of printable text (a TSV cell): tabs and line breaks become spaces."""
    flat = " ".join(text.replace("\t", " ").split())
    return "".join(ch for ch in flat if ch.isprintable())


def parse_types(text: str) -> dict[str, TypeSpec]:
    """``TYPE=Domain:Vocab|Vocab[:Class|Class];…`` → the type specs (the command's
    ``--type``), starting from :data:`DEFAULT_TYPES`; a ConfigError names a bad item."""
    out = dict(DEFAULT_TYPES)
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        kind, sep, spec = item.partition("=")
        pieces = spec.split(":")
        if not sep or not kind.strip() or len(pieces) not in (2, 3) or not all(pieces[:2]):
            raise ConfigError(f"--type {item!r}: give TYPE=Domain:Vocabulary|…[:Class|…]")
        classes = tuple(pieces[2].split("|")) if len(pieces) == 3 and pieces[2] else None
        out[kind.strip()] = TypeSpec(pieces[0], tuple(pieces[1].split("|")), classes)
    return out
