"""PubTator: ``PMID|t|title`` and ``PMID|a|abstract`` lines, then one
``PMID<TAB>start<TAB>end<TAB>mention<TAB>type[<TAB>identifier[<TAB>...]]`` line per mention, a
blank line between documents.

Offsets count code points into ``title + " " + abstract``. The title and the abstract each
become one sentence (a mention may not cross from one into the other). The identifier (the
concept: ``D003920``, ``D004829+D003294``; ``-`` or empty for none) is kept on the mention;
further columns (BC5CDR's composite parts) are not. Relation lines
(``PMID<TAB>CID<TAB>id<TAB>id``) are counted in a warning.

A mention whose text does not match its offsets is refused, naming the line; with
``trust_offsets`` the offsets are taken and every such line is logged as repaired (the
original NCBI-disease training file has one: line 3248, ``" plus "`` written as spaces).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CorpusError
from ._io import IssueCollector, StrPath, atomic_write, numbered_lines
from ._shared import CharSpan, label_problem, sentence_from_spans
from .formats import Format, Predictions, RenderOptions, register
from .model import Corpus, SentenceList, Sink

if TYPE_CHECKING:
    from ..types import Entity

log = logging.getLogger(__name__)

#: A title or abstract line; the PubTator sniffer (below) matches its start.
TEXT_LINE = re.compile(r"([^\s|]+)\|([ta])\|(.*)")
_OFFSET = re.compile(r"[0-9]+")
NO_CONCEPT = "-"  # the concept id column of a mention that is not linked
# Characters that end a line for some reader (str.splitlines) or break the tab-separated
# mention lines: written as spaces, which keeps every offset and every word.
_BREAKS = str.maketrans(dict.fromkeys("\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029", " "))


@dataclass
class _Document:
    pmid: str
    line: int
    title: str
    abstract: str | None = None
    mentions: list[tuple[int, list[str]]] = field(default_factory=list)  # line, columns


def _spans(
    doc: _Document, issues: IssueCollector, trust_offsets: bool = False
) -> tuple[list[tuple[str, list[CharSpan]]], int]:
    """The title and the abstract with their spans, and the number of relation lines."""
    title, abstract = doc.title, doc.abstract or ""
    text = title if doc.abstract is None else f"{title} {abstract}"
    in_title: list[CharSpan] = []
    in_abstract: list[CharSpan] = []
    relations = 0
    for number, cols in doc.mentions:
        if len(cols) >= 3 and not _OFFSET.fullmatch(cols[1]) and not _OFFSET.fullmatch(cols[2]):
            relations += 1
            continue
        if len(cols) < 5:
            issues.add(
                number,
                "expected a mention line: PMID, start, end, mention, type separated by tabs "
                f"(found {len(cols)} columns)",
            )
            continue
        pmid, start_col, end_col, mention, etype = cols[:5]
        bad = [
            (n, v) for n, v in (("start", start_col), ("end", end_col)) if not _OFFSET.fullmatch(v)
        ]
        if pmid != doc.pmid:
            issues.add(number, f"PMID {pmid!r} is not the document's ({doc.pmid})", "pmid")
        elif bad:
            issues.add(number, f"{bad[0][0]} {bad[0][1]!r} is not an offset", bad[0][0])
        elif not 0 <= int(start_col) < int(end_col) <= len(text):
            issues.add(
                number,
                f"mention [{start_col}, {end_col}) is empty or outside the document's text "
                f"[0, {len(text)}] (title, a space, abstract)",
                "end" if int(start_col) < len(text) else "start",
            )
        elif text[int(start_col) : int(end_col)] != mention and not trust_offsets:
            start, end = int(start_col), int(end_col)
            issues.add(
                number,
                f"mention {mention!r} does not match the offsets, which hold "
                f"{text[start:end]!r} (to take the offsets, read with trust_offsets: "
                "mslm convert --trust-offsets)",
                "mention",
            )
        elif problem := label_problem(etype):
            issues.add(number, problem, "type")
        elif int(end_col) <= len(title) or int(start_col) > len(title):
            start, end = int(start_col), int(end_col)
            if text[start:end] != mention:
                log.warning(  # no text: a corpus may be patient data
                    "%s line %d: the mention column differs from the text at its offsets; "
                    "the offsets were taken (trust_offsets)",
                    issues.path,
                    number,
                )
            column = cols[5].strip() if len(cols) > 5 else ""
            concept = None if column in ("", NO_CONCEPT) else column
            shift = 0 if end <= len(title) else len(title) + 1
            target = in_title if end <= len(title) else in_abstract
            target.append(CharSpan(start - shift, end - shift, etype, number, concept))
        else:
            issues.add(number, "mention crosses from the title into the abstract", "start")
    return [(title, in_title), (abstract, in_abstract)], relations


def read_pubtator(path: StrPath, trust_offsets: bool = False) -> Corpus:
    """Read a PubTator file into a :class:`Corpus` (see :func:`fill_pubtator`)."""
    sink = SentenceList()
    fill_pubtator(path, sink, trust_offsets)
    return sink.corpus(os.fspath(path))


def fill_pubtator(path: StrPath, sink: Sink, trust_offsets: bool = False) -> None:
    """Read a PubTator file: the title and the abstract of each document are sentences.
    ``trust_offsets``: a mention column that differs from the text at its offsets is
    replaced by that text (logged per line) instead of refused.

    Raises :class:`CorpusError` listing up to :data:`MAX_ISSUES` problems (line and column:
    ``pmid``, ``start``, ``end``, ``mention``, ``type``), or when the file holds no sentence.
    """
    name = os.fspath(path)
    issues = IssueCollector(name)
    relations = 0
    doc: _Document | None = None

    def report(where: int, message: str) -> None:
        issues.add(where, message)

    def finish() -> None:
        nonlocal doc, relations
        if doc is None:
            return
        units, n_relations = _spans(doc, issues, trust_offsets)
        relations += n_relations
        for text, spans in units:
            sentence, n_stripped = sentence_from_spans(text, spans, report)
            sink.stripped += n_stripped
            if sentence is not None:
                sink.add(sentence)
        doc = None

    for number, line in numbered_lines(name, issues):
        if not line.strip():
            finish()
            continue
        match = TEXT_LINE.fullmatch(line)
        if match is not None:
            pmid, kind, body = match.groups()
            if kind == "t":
                finish()
                doc = _Document(pmid, number, body)
            elif doc is None or doc.pmid != pmid or doc.abstract is not None or doc.mentions:
                issues.add(number, f"abstract of {pmid} without its title line just before")
            else:
                doc.abstract = body
            continue
        if doc is None:
            issues.add(number, "expected a title line (PMID|t|title) to start a document")
            continue
        doc.mentions.append((number, line.split("\t")))
    finish()

    issues.raise_if_any()
    if not sink.count:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")
    if relations:
        log.warning(
            "%s: %d relation lines not kept (a corpus holds mentions only)", name, relations
        )


def _document_lines(
    doc_id: str, text: str, mentions: Iterable[tuple[int, int, str, str | None]]
) -> Iterator[str]:
    """One document: the text as its title, an empty abstract, its mention lines — six
    columns, the last the concept id, ``-`` while mentions are not linked (PubTator's readers,
    ``bioc.pubtator`` among them, take a 5-column line for a relation)."""
    flat = text.translate(_BREAKS)
    yield f"{doc_id}|t|{flat}\n{doc_id}|a|\n"
    for start, end, label, concept in mentions:
        concept = (concept or NO_CONCEPT).translate(_BREAKS)
        yield f"{doc_id}\t{start}\t{end}\t{flat[start:end]}\t{label}\t{concept}\n"
    yield "\n"


def write_pubtator(corpus: Corpus, path: StrPath) -> None:
    """Write ``corpus`` as PubTator: one document per sentence (its index as PMID), the
    sentence as the title and an empty abstract. Tabs and line breaks in a text are written
    as spaces (offsets and words unchanged). Raises :class:`CorpusError` when a type holds
    whitespace, which the format cannot carry; nothing is written then."""
    name = os.fspath(path)
    issues = IssueCollector(name)
    for i, sentence in enumerate(corpus.sentences):
        for k, m in enumerate(sentence.mentions):
            if label_problem(m.label):
                issues.add(
                    None,
                    f"sentence {i}: type {m.label!r} cannot be written in PubTator",
                    f"sentences[{i}].mentions[{k}]",
                )
    issues.raise_if_any()
    lines = (
        line
        for i, s in enumerate(corpus.sentences)
        for line in _document_lines(str(i), s.text, s.linked_char_mentions())
    )
    atomic_write(name, lines)


def predictions_to_pubtator(
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    ids: Sequence[str] | None = None,
) -> str:
    """Predictions as PubTator text: one document per text (``ids[i]``, or its index in
    ``texts``, as PMID),
    the text as the title, one mention line per entity, its concept id in the 6th column
    (``-`` when it has none). Tabs and line breaks in a text are written as spaces, so offsets
    still index the submitted string."""
    return "".join(
        line
        for i, (text, ents) in enumerate(zip(texts, entities, strict=True))
        for line in _document_lines(
            ids[i] if ids is not None else str(i),
            text,
            ((e.start, e.end, e.type, e.concept.id if e.concept else None) for e in ents),
        )
    )


def _sniff(head: bytes) -> bool:
    """A first line ``PMID|t|…`` or ``PMID|a|…``."""
    return TEXT_LINE.match(head.split(b"\n", 1)[0].decode("utf-8", "replace")) is not None


def _render(texts: Sequence[str], entities: Sequence[Sequence[Entity]], o: RenderOptions) -> str:
    return predictions_to_pubtator(texts, entities, o.ids)


register(
    Format(
        "pubtator",
        fill_pubtator,
        write_pubtator,
        extensions=(".pubtator",),
        suffix=".pubtator",
        also_reads=(".txt",),
        sniff=_sniff,
        sniff_rank=40,
        fill_trusting=fill_pubtator,
        predictions=Predictions(_render, "text/plain; charset=utf-8", "PubTator text"),
    )
)
