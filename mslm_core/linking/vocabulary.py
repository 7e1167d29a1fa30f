"""Vocabularies: the concepts a site links entities to, each with an id, a preferred name and
synonyms. Read from TSV (``id<TAB>name[<TAB>synonym|synonym…]``) or OBO (``[Term]`` stanzas:
``id:``, ``name:``, ``synonym: "…"``; obsolete terms left out), or built from an annotated
corpus's mention → concept pairs. Problems are reported like a corpus's: file, line, field."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable
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


@dataclass
class Concept:
    id: str
    name: str
    synonyms: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """The preferred name first, then the synonyms, each once."""
        return list(dict.fromkeys([self.name, *self.synonyms]))


@dataclass
class Vocabulary:
    """Concepts by id, in the order read. ``name`` names the vocabulary (``MeSH``); ``source``
    says where it came from (a file, a corpus) for provenance."""

    name: str
    concepts: dict[str, Concept]
    source: str = ""

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
    if any(ch.isspace() for ch in value) or not value.isprintable():
        return f"id {value!r} holds whitespace or control characters"
    return None


def read_tsv(path: StrPath, name: str | None = None) -> Vocabulary:
    """``id<TAB>name[<TAB>synonym|synonym…]`` per line; blank lines and lines starting with
    ``#`` are skipped. An id seen again adds its names as synonyms."""
    source = os.fspath(path)
    issues = IssueCollector(source)
    concepts: dict[str, Concept] = {}
    header = ""
    for number, line in numbered_lines(source, issues):
        if number == 1 and line.startswith("# "):
            header = line[2:].strip()
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) not in (2, 3):
            issues.add(number, f"expected 2 or 3 tab-separated columns, found {len(cols)}")
            continue
        cid, label = cols[0].strip(), cols[1].strip()
        synonyms = [s.strip() for s in cols[2].split("|")] if len(cols) == 3 else []
        if problem := _valid_id(cid):
            issues.add(number, problem, "id")
        elif not label:
            issues.add(number, "empty name", "name")
        elif any(not s for s in synonyms):
            issues.add(number, "an empty synonym (two '|' in a row, or one at an end)", "synonyms")
        else:
            add_names(concepts, cid, label, synonyms)
    issues.raise_if_any()
    if not concepts:
        raise CorpusError.single(source, None, "no concept found (empty vocabulary)")
    # a first line "# NAME: PROVENANCE" (as write_tsv writes it) names the vocabulary and
    # says where it came from
    own, _, provenance = header.partition(": ")
    if own and provenance and len(own) <= 100:
        return Vocabulary(name or own, concepts, provenance)
    return Vocabulary(name or _stem(source), concepts, source)


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
        elif not term.obsolete:
            add_names(concepts, term.id, term.name, term.synonyms)

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


def from_corpora(corpora: Iterable[Corpus], name: str, source: str = "") -> Vocabulary:
    """The mention → concept pairs of annotated corpora: each concept named by its mentions
    (the most frequent first). Composite ids (:data:`COMPOSITE`) and mentions without a
    concept (none, or :data:`NO_ID`) are left out."""
    seen: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for corpus in corpora:
        for sentence in corpus:
            for a, b, _, concept in sentence.linked_char_mentions():
                if concept and concept != NO_ID and not COMPOSITE.search(concept):
                    seen[concept][sentence.text[a:b]] += 1
    concepts = {}
    for cid, counts in seen.items():
        ordered = sorted(counts, key=lambda n: (-counts[n], n))
        concepts[cid] = Concept(cid, ordered[0], ordered[1:])
    return Vocabulary(name, concepts, source)


def add_names(concepts: dict[str, Concept], cid: str, label: str, synonyms: list[str]) -> None:
    """Concept ``cid`` named ``label`` with ``synonyms``; when it is there already, the names
    it lacks become synonyms."""
    found = concepts.get(cid)
    if found is None:
        concepts[cid] = Concept(cid, label, list(synonyms))
    else:
        found.synonyms.extend(n for n in [label, *synonyms] if n not in found.names)
