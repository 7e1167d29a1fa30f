"""Vocabularies: the concepts a site links entities to, each with an id, a preferred name and
synonyms, and the parts of the vocabulary it lies in (MeSH tree numbers, OMOP domains) that
say which entity types it may be the concept of. Read from TSV (``id<TAB>name[<TAB>synonym|
synonym…]``, more columns named by a ``#columns`` line, the type → part map by a ``#types``
line: see :func:`read_tsv`) or OBO (``[Term]`` stanzas: ``id:``, ``name:``, ``synonym: "…"``;
obsolete terms left out), or built from an annotated corpus's mention → concept pairs. Problems
are reported like a corpus's: file, line, field."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..corpus._io import IssueCollector, StrPath, numbered_lines
from ..corpus.model import Corpus
from ..errors import CorpusError

_OBO_SYNONYM = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: What joins the ids of a composite mention (``D1|D2``, ``D1+D2``: one mention, several
#: concepts) in NCBI-disease and BC5CDR.
COMPOSITE = re.compile(r"[|+]")
#: BC5CDR's id of a mention it could not link.
NO_ID = "-1"
#: What a vocabulary may hold, so that indexing one costs memory and time linear in its size
#: (docs/reliability.md). Beyond them a file is refused with its line and field.
MAX_NAME_CHARS = 1000
MAX_NAMES_PER_CONCEPT = 1000
MAX_CONCEPTS = 2_000_000
MAX_ID_CHARS = 200


#: The columns a TSV vocabulary may have, in the order of a file without a ``#columns`` line
#: (``id``, ``name`` and ``synonyms`` there): what each holds is :class:`Concept`'s field.
COLUMNS = ("id", "name", "synonyms", "parts", "code", "vocabulary", "maps_to")


@dataclass
class Concept:
    """A concept: ``id`` and ``name`` (its preferred name) and its ``synonyms``; ``parts``, the
    parts of the vocabulary it lies in (MeSH tree numbers such as ``C04.557``, an OMOP
    ``Domain:Vocabulary:Class``), which :attr:`Vocabulary.types` matches entity types against;
    ``code`` and ``vocabulary`` its code in the vocabulary it comes from when ``id`` is not that
    code (an OMOP concept id: ``SNOMED`` ``22298006``); ``maps_to`` the id of the concept it
    stands for (an OMOP non-standard concept's "Maps to" standard one)."""

    id: str
    name: str
    synonyms: list[str] = field(default_factory=list)
    parts: tuple[str, ...] = ()
    code: str | None = None
    vocabulary: str | None = None
    maps_to: str | None = None
    # the names it has, for a constant-time "has it?" as lines add names
    _known: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._known.update([self.name, *self.synonyms])

    @property
    def names(self) -> list[str]:
        """The preferred name first, then the synonyms, each once."""
        return list(dict.fromkeys([self.name, *self.synonyms]))

    def add(self, names: Iterable[str]) -> int:
        """Add the names it lacks as synonyms; returns how many names it has now."""
        for n in names:
            if n not in self._known:
                self._known.add(n)
                self.synonyms.append(n)
        return len(self._known)


@dataclass
class Vocabulary:
    """Concepts by id, in the order read. ``name`` names the vocabulary (``MeSH``); ``source``
    says where it came from (a file, a corpus) for provenance; ``types``: entity type → the
    prefixes of the parts its concepts lie in (``Anatomy → ("A",)``: MeSH's tree A) — a type
    it does not name is linked to any concept."""

    name: str
    concepts: dict[str, Concept]
    source: str = ""
    types: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def allows(self, entity_type: str, concept: Concept) -> bool:
        """Whether ``concept`` may be the concept of an entity of ``entity_type``."""
        prefixes = self.types.get(entity_type)
        return prefixes is None or any(p.startswith(prefixes) for p in concept.parts)

    def __len__(self) -> int:
        return len(self.concepts)

    def names(self) -> list[tuple[str, str]]:
        """Every (concept id, name or synonym) pair."""
        return [(c.id, n) for c in self.concepts.values() for n in c.names]


@dataclass
class _Term:
    """An OBO ``[Term]`` stanza being read."""

    line: int
    id: str | None = None
    name: str = ""
    synonyms: list[str] = field(default_factory=list)
    obsolete: bool = False


def _valid_id(value: str) -> str | None:
    if not value:
        return "empty id"
    if len(value) > MAX_ID_CHARS:
        return f"id longer than {MAX_ID_CHARS} characters"
    if any(ch.isspace() for ch in value) or not value.isprintable():
        return f"id {value[:40]!r} holds whitespace or control characters"
    return None


def _name_problem(names: Iterable[str]) -> str | None:
    for n in names:
        if len(n) > MAX_NAME_CHARS:
            return f"a name longer than {MAX_NAME_CHARS} characters ({len(n)})"
        if not n.isprintable():
            return f"a name holds control characters: {n[:40]!r}"
    return None


def read_tsv(path: StrPath, name: str | None = None) -> Vocabulary:
    """A concept per line: ``id<TAB>name[<TAB>synonym|synonym…]``, or the columns a
    ``#columns`` line names (of :data:`COLUMNS`: ``parts`` ``|``-separated, an empty cell for
    none); blank lines and other lines starting with ``#`` are skipped. An id seen again adds
    its names as synonyms. A first line ``# NAME: PROVENANCE`` names the vocabulary; a
    ``#types`` line maps entity types to part prefixes, tab-separated ``TYPE=PREFIX,PREFIX``
    (``#types<TAB>Anatomy=A<TAB>Problem=C,F``)."""
    source = os.fspath(path)
    issues = IssueCollector(source)
    concepts: dict[str, Concept] = {}
    header = ""
    columns: tuple[str, ...] = COLUMNS[:3]
    types: dict[str, tuple[str, ...]] = {}
    for number, line in numbered_lines(source, issues):
        if number == 1 and line.startswith("# "):
            header = line[2:].strip()
        if line.startswith("#columns\t") or line.startswith("#types\t"):
            key, *cells = line.split("\t")
            problem = _columns(cells) if key == "#columns" else _types(cells, types)
            if isinstance(problem, tuple):
                columns = problem
            elif problem:
                issues.add(number, problem, key[1:])
            continue
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if not 2 <= len(cols) <= len(columns):
            expected = f"2 to {len(columns)}" if len(columns) > 2 else "2"
            issues.add(number, f"expected {expected} tab-separated columns, found {len(cols)}")
            continue
        row = dict(zip(columns, (c.strip() for c in cols), strict=False))
        cid, label = row["id"], row["name"]
        synonyms = [s.strip() for s in row["synonyms"].split("|")] if row.get("synonyms") else []
        if problem := _valid_id(cid):
            issues.add(number, problem, "id")
        elif not label:
            issues.add(number, "empty name", "name")
        elif problem := _name_problem([label]):
            issues.add(number, problem, "name")
        elif any(not s for s in synonyms):
            issues.add(number, "an empty synonym (two '|' in a row, or one at an end)", "synonyms")
        elif problem := _name_problem(synonyms):
            issues.add(number, problem, "synonyms")
        elif row.get("maps_to") and (problem := _valid_id(row["maps_to"])):
            issues.add(number, problem, "maps_to")
        elif problem := add_names(concepts, cid, label, synonyms):
            issues.add(number, problem, "id")
            if len(concepts) > MAX_CONCEPTS:
                break  # nothing after it is read
        else:
            _describe(concepts[cid], row)
    issues.raise_if_any()
    if not concepts:
        raise CorpusError.single(source, None, "no concept found (empty vocabulary)")
    # a first line "# NAME: PROVENANCE" (as write_tsv writes it) names the vocabulary and
    # says where it came from
    own, _, provenance = header.partition(": ")
    if own and provenance and len(own) <= 100:
        if not (own + provenance).isprintable():
            raise CorpusError.single(
                source, 1, "the '# NAME: …' line holds control characters", "name"
            )
        return Vocabulary(name or own, concepts, provenance, types)
    return Vocabulary(name or _stem(source), concepts, source, types)


def _columns(cells: list[str]) -> tuple[str, ...] | str:
    """The columns a ``#columns`` line names, or what is wrong with it."""
    given = tuple(c.strip() for c in cells)
    unknown = [c for c in given if c not in COLUMNS]
    if unknown:
        return f"unknown column {unknown[0]!r} (columns: {', '.join(COLUMNS)})"
    if given[:2] != ("id", "name") or len(set(given)) != len(given):
        return "the columns start with id and name, each named once"
    return given


def _types(cells: list[str], types: dict[str, tuple[str, ...]]) -> str | None:
    """Reads ``TYPE=PREFIX,PREFIX`` cells into ``types``; what is wrong, or None."""
    for cell in cells:
        kind, sep, prefixes = cell.partition("=")
        parts = tuple(p.strip() for p in prefixes.split(",") if p.strip())
        if not sep or not kind.strip() or not parts:
            return f"{cell!r}: give TYPE=PREFIX,PREFIX (Anatomy=A)"
        types[kind.strip()] = parts
    return None


def _describe(concept: Concept, row: dict[str, str]) -> None:
    """The parts, code, vocabulary and "maps to" of a TSV row, on its concept (a repeated id
    adds its parts)."""
    if row.get("parts"):
        new = [p for p in row["parts"].split("|") if p and p not in concept.parts]
        concept.parts = (*concept.parts, *new)
    concept.code = row.get("code") or concept.code
    concept.vocabulary = row.get("vocabulary") or concept.vocabulary
    concept.maps_to = row.get("maps_to") or concept.maps_to


def _stem(path: str) -> str:
    base = os.path.basename(path).removesuffix(".gz")
    return os.path.splitext(base)[0]


def is_obo(path: StrPath) -> bool:
    """OBO by the file name (``.obo``, ``.obo.gz``); anything else is read as TSV."""
    return os.fspath(path).lower().removesuffix(".gz").endswith(".obo")


def read_vocabulary(path: StrPath, name: str | None = None) -> Vocabulary:
    """A TSV or OBO vocabulary (:func:`is_obo`), gzip-compressed or not."""
    return (read_obo if is_obo(path) else read_tsv)(path, name)


def read_obo(path: StrPath, name: str | None = None) -> Vocabulary:
    """The ``[Term]`` stanzas of an OBO file: ``id``, ``name``, ``synonym`` (the quoted text);
    ``is_obsolete: true`` terms are left out; other stanzas (``[Typedef]``) are skipped."""
    source = os.fspath(path)
    issues = IssueCollector(source)
    concepts: dict[str, Concept] = {}
    term: _Term | None = None
    stanza = ""

    def finish() -> None:
        if term is None:
            return
        if term.id is None:
            issues.add(term.line, "[Term] without an id", "id")
        elif problem := _valid_id(term.id):
            issues.add(term.line, problem, "id")
        elif not term.name:
            issues.add(term.line, f"term {term.id} has no name", "name")
        elif problem := _name_problem([term.name, *term.synonyms]):
            issues.add(term.line, problem, "name")
        elif not term.obsolete and (
            problem := add_names(concepts, term.id, term.name, term.synonyms)
        ):
            issues.add(term.line, problem, "id")

    for number, line in numbered_lines(source, issues):
        text = line.strip()
        if text.startswith("[") and text.endswith("]"):
            finish()
            stanza = text
            term = _Term(number) if text == "[Term]" else None
            continue
        if term is None or not text or text.startswith("!"):
            continue
        key, sep, value = text.partition(":")
        if not sep:
            issues.add(number, f"expected 'tag: value' in {stanza}", None)
            continue
        value = value.split(" !", 1)[0].strip()
        if key == "id":
            term.id = value
        elif key == "name":
            term.name = value
        elif key == "synonym":
            quoted = _OBO_SYNONYM.match(value)
            if quoted is None:
                issues.add(number, 'a synonym must be quoted: synonym: "text" EXACT []', "synonym")
            else:
                term.synonyms.append(quoted.group(1).replace('\\"', '"'))
        elif key == "is_obsolete" and value == "true":
            term.obsolete = True
    finish()
    issues.raise_if_any()
    if not concepts:
        raise CorpusError.single(source, None, "no concept found (empty vocabulary)")
    return Vocabulary(name or _stem(source), concepts, source)


def from_corpora(
    corpora: Iterable[Corpus],
    name: str,
    source: str = "",
    parts: Mapping[str, tuple[str, ...]] | None = None,
) -> Vocabulary:
    """The mention → concept pairs of annotated corpora: each concept named by its mentions
    (the most frequent first). Composite ids (:data:`COMPOSITE`) and mentions without a
    concept (none, or :data:`NO_ID`) are left out. ``parts``: mention type → the parts a
    concept of its mentions lies in (BC5CDR's ``Chemical`` → MeSH's ``D``)."""
    seen: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    kinds: dict[str, set[str]] = defaultdict(set)
    for corpus in corpora:
        for sentence in corpus:
            for a, b, kind, concept in sentence.linked_char_mentions():
                if concept and concept != NO_ID and not COMPOSITE.search(concept):
                    seen[concept][sentence.text[a:b]] += 1
                    kinds[concept].add(kind)
    concepts = {}
    for cid, counts in seen.items():
        ordered = sorted(counts, key=lambda n: (-counts[n], n))
        found = sorted({p for k in kinds[cid] for p in (parts or {}).get(k, ())})
        concepts[cid] = Concept(cid, ordered[0], ordered[1:], parts=tuple(found))
    return Vocabulary(name, concepts, source)


def add_names(
    concepts: dict[str, Concept], cid: str, label: str, synonyms: list[str]
) -> str | None:
    """Concept ``cid`` named ``label`` with ``synonyms``; when it is there already, the names
    it lacks become synonyms. Returns what is wrong when a limit is passed (the concept
    count, the names of one concept), else None."""
    found = concepts.get(cid)
    if found is None:
        if len(concepts) >= MAX_CONCEPTS:
            concepts[cid] = Concept(cid, label)  # counted: the caller stops reading
            return f"more than {MAX_CONCEPTS:,} concepts"
        found = concepts[cid] = Concept(cid, label, [])
    if found.add([label, *synonyms]) > MAX_NAMES_PER_CONCEPT:
        return f"concept {cid[:40]} has more than {MAX_NAMES_PER_CONCEPT} names"
    return None
