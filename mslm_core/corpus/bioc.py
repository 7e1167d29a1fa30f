"""BioC, JSON or XML: a collection of documents, each a list of passages with document-level
offsets.

A passage (or, when it has no ``text``, each of its ``sentences``) becomes one sentence. An
annotation is ``{"infons": {"type": T}, "locations": [{"offset", "length"}], "text"}``; its
offset counts from the start of the *document*, so the passage's own ``offset`` is subtracted.
A concept identifier in the infons (:data:`IDENTIFIER_INFONS`) is kept on the mention. A
passage's (or sentence's) relation of two ``nodes`` naming its annotations' ids is a tie of a
modifier to its head (``mslm_core.relations``: the node of role ``modifier``, or of a
modifier type, the modifier); other relations (a document's, of more nodes) are counted in a
warning. The file is read as a
stream, one document at a time.

BioC XML is read and written through ``bioc`` (PyPI, the BioC project's own library): a file
whose content starts with ``<`` is XML, and a path ending in ``.xml`` is written as XML. An XML
file that declares entities (``<!ENTITY``) is refused before it is parsed: they could pull in
other files of the server (XXE) or expand without bound.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from ..errors import CorpusError
from ..types import ASSERTION_ATTRIBUTES
from ._io import IssueCollector, StrPath, _is_int, _type_name, atomic_write, open_binary
from .formats import Format, Predictions, RenderOptions, register
from .model import Corpus, SentenceList, Sink

if TYPE_CHECKING:
    from ..types import Entity

from ._shared import (
    CharSpan,
    JsonPath,
    JsonStream,
    Link,
    Report,
    json_array_lines,
    json_field,
    json_reporter,
    label_problem,
    mention_pairs,
    region_pairs,
    sentence_from_spans,
    skip_json_space,
)

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------ BioC


Unit = tuple[str, list[CharSpan], list[Link]]


def _read_unit(unit: Any, where: JsonPath, report: Report, spans_out: list[Unit]) -> None:
    """A passage or a sentence: its text, its annotations as spans into that text and its
    relations between them (two ``nodes`` whose ``refid`` name annotations; the node whose
    ``role`` is ``modifier``, or whose annotation is a modifier type, the modifier)."""
    offset, text, annotations = unit.get("offset"), unit.get("text"), unit.get("annotations", [])
    ok = True
    if not _is_int(offset) or offset < 0:
        found = "missing" if "offset" not in unit else f"found {offset!r}"
        report((*where, "offset"), f"'offset' must be an integer >= 0 ({found})")
        ok = False
    if not isinstance(text, str):
        report((*where, "text"), f"'text' must be a string, found {_type_name(text)}")
        ok = False
    if not isinstance(annotations, list):
        report(
            (*where, "annotations"),
            f"'annotations' must be a list, found {_type_name(annotations)}",
        )
        ok = False
    if not ok:
        return
    spans: list[CharSpan] = []
    for a, ann in enumerate(annotations):
        aw = (*where, "annotations", a)
        if not isinstance(ann, dict):
            report(aw, f"annotation must be an object, found {_type_name(ann)}")
            continue
        infons = ann.get("infons")
        if not isinstance(infons, dict):
            report((*aw, "infons"), f"'infons' must be an object, found {_type_name(infons)}")
            continue
        problem = label_problem(infons.get("type"))
        if problem:
            report((*aw, "infons", "type"), problem)
            continue
        locations = ann.get("locations")
        if not isinstance(locations, list) or not locations:
            report((*aw, "locations"), "'locations' must be a non-empty list")
            continue
        if len(locations) > 1:
            report(
                (*aw, "locations"),
                f"{len(locations)} locations (a discontinuous mention) cannot be read; "
                "a mention is one contiguous span",
            )
            continue
        loc = locations[0]
        lw = (*aw, "locations", 0)
        if not isinstance(loc, dict):
            report(lw, f"location must be an object, found {_type_name(loc)}")
            continue
        bad = [k for k in ("offset", "length") if not _is_int(loc.get(k))]
        if bad:
            report((*lw, bad[0]), f"{bad[0]!r} must be an integer, found {loc.get(bad[0])!r}")
            continue
        start, length = loc["offset"] - offset, loc["length"]
        if length <= 0 or start < 0 or start + length > len(text):
            report(
                (*lw, "offset"),
                f"location [{loc['offset']}, {loc['offset'] + length}) is empty or outside the "
                f"passage [{offset}, {offset + len(text)}) (offsets count from the start of "
                "the document)",
            )
            continue
        end = start + length
        if "text" in ann and ann["text"] != text[start:end]:
            report(
                (*aw, "text"),
                f"'text' {ann['text']!r} does not match the location, which holds "
                f"{text[start:end]!r}",
            )
            continue
        region = ann.get("id") if isinstance(ann.get("id"), str) else None
        spans.append(CharSpan(start, end, infons["type"], aw, _identifier(infons), region))
    spans_out.append((text, spans, _links(unit.get("relations"), where)))


def _links(relations: Any, where: JsonPath) -> list[Link]:
    out: list[Link] = []
    for r, relation in enumerate(relations if isinstance(relations, list) else []):
        nodes = relation.get("nodes") if isinstance(relation, dict) else None
        if not isinstance(nodes, list) or len(nodes) != 2:
            continue  # not a tie of two mentions: counted as a relation not kept
        ends = [
            ((*where, "relations", r, "nodes", n, "refid"), node.get("refid"), node.get("role"))
            if isinstance(node, dict)
            else ((*where, "relations", r, "nodes", n), None, None)
            for n, node in enumerate(nodes)
        ]
        if ends[1][2] == "modifier" or ends[0][2] == "head":
            ends.reverse()
        out.append((((ends[0][0], ends[0][1]), (ends[1][0], ends[1][1])), "right"))
    return out


#: Infons that hold a mention's concept identifier: ``identifier`` (PubTator Central, ours),
#: ``MESH`` (the BC5CDR BioC release), ``NCBI Gene`` (GNormPlus).
IDENTIFIER_INFONS = ("identifier", "MESH", "NCBI Gene")


def _identifier(infons: dict[str, Any]) -> str | None:
    for key in IDENTIFIER_INFONS:
        value = infons.get(key)
        if isinstance(value, str) and value.strip() and value.strip() != "-":
            return value.strip()
    return None


def _count(relations: Any) -> int:
    return len(relations) if isinstance(relations, list) else 0


def _unkept(relations: Any) -> int:
    """A unit's relations that are no tie of two mentions (:func:`_links` reads the others)."""
    if not isinstance(relations, list):
        return 0
    return sum(
        not (isinstance(r, dict) and isinstance(r.get("nodes"), list) and len(r["nodes"]) == 2)
        for r in relations
    )


def _read_document(doc: Any, report: Report) -> tuple[list[Unit], int]:
    """The units (text, spans, relations) of one document, and its number of relations not
    kept (the document's own, between passages; those of its units with no two nodes)."""
    units: list[Unit] = []
    if not isinstance(doc, dict):
        report((), f"document must be an object, found {_type_name(doc)}")
        return units, 0
    passages = doc.get("passages")
    if not isinstance(passages, list):
        report(("passages",), f"'passages' must be a list, found {_type_name(passages)}")
        return units, 0
    relations = _count(doc.get("relations"))
    if _count(doc.get("annotations")):  # refused, never dropped (they were, silently)
        report(
            ("annotations",),
            f"{_count(doc.get('annotations'))} document-level annotations: a mention must sit "
            "in the passage (or sentence) whose text holds it; move them there",
        )
    for p, passage in enumerate(passages):
        pw: JsonPath = ("passages", p)
        if not isinstance(passage, dict):
            report(pw, f"passage must be an object, found {_type_name(passage)}")
            continue
        relations += _unkept(passage.get("relations"))
        sentences = passage.get("sentences") or []
        # bioc-py writes "text": "" on a passage whose sentences hold the text: absent
        has_text = "text" in passage and not (passage["text"] == "" and sentences)
        if has_text or not sentences:
            if not has_text:
                if passage.get("annotations"):
                    report((*pw, "text"), "a passage with annotations needs its 'text'")
                continue
            if isinstance(sentences, list) and any(
                isinstance(x, dict) and x.get("annotations") for x in sentences
            ):
                report((*pw, "sentences"), "annotate the passage or its sentences, not both")
                continue
            _read_unit(passage, pw, report, units)
            continue
        if not isinstance(sentences, list):
            report((*pw, "sentences"), f"'sentences' must be a list, found {_type_name(sentences)}")
            continue
        for k, sentence in enumerate(sentences):
            sw = (*pw, "sentences", k)
            if not isinstance(sentence, dict):
                report(sw, f"sentence must be an object, found {_type_name(sentence)}")
                continue
            relations += _unkept(sentence.get("relations"))
            _read_unit(sentence, sw, report, units)
    return units, relations


def read_bioc(path: StrPath) -> Corpus:
    """Read a BioC JSON collection into a :class:`Corpus` (see :func:`fill_bioc`)."""
    sink = SentenceList()
    fill_bioc(path, sink)
    return sink.corpus(os.fspath(path))


def fill_bioc(path: StrPath, sink: Sink) -> None:
    """Read a BioC collection (JSON, or XML); every passage with text (or every sentence of a
    passage without text) is one sentence. Raises :class:`CorpusError` listing up to
    :data:`MAX_ISSUES` problems (line and field, e.g. ``documents[3].passages[1].offset``),
    or when the collection holds no sentence."""
    name = os.fspath(path)
    issues = IssueCollector(name)
    relations = 0
    found_documents = False
    with open_binary(name) as handle:
        if handle.read(_XML_HEAD).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
            handle.seek(0)
            return _fill_bioc_xml(name, handle, sink, issues)
        handle.seek(0)
        stream = JsonStream(name, handle, issues)
        if stream.peek() == "":
            raise CorpusError.single(name, None, "no sentence found (empty corpus)")
        if stream.peek() != "{":
            raise stream.fail("expected a BioC collection (a JSON object with 'documents')")
        for key in stream.object_keys():
            if key != "documents":
                stream.value()
                continue
            found_documents = True
            if stream.peek() != "[":
                raise stream.fail("'documents' must be a list")
            for d, doc, element in stream.array():
                report = json_reporter(issues, element, f"documents[{d}]")
                units, n_relations = _read_document(doc, report)
                relations += n_relations
                relations += _add_units(units, report, sink)
        stream.end()
    if not found_documents:
        issues.add(1, "not a BioC collection: no 'documents'", "documents")
    issues.raise_if_any()
    if not sink.count:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")
    if relations:
        log.warning(
            "%s: %d relations not kept (a corpus keeps ties of two mentions of a passage "
            "or sentence)",
            name,
            relations,
        )


_XML_HEAD = 4096


def _add_units(units: list[Unit], report: Report, sink: Sink) -> int:
    """The units as sentences into ``sink``; returns how many relations name no annotation of
    their unit (not kept)."""
    unresolved = 0
    for text, spans, links in units:
        sentence, n_stripped = sentence_from_spans(text, spans, report)
        sink.stripped += n_stripped
        if sentence is not None:
            if links:
                pairs, unnamed = region_pairs(spans, links)
                sentence.relations = mention_pairs(sentence.char_mentions(), pairs)
                unresolved += unnamed
            sink.add(sentence)
    return unresolved


def _fill_bioc_xml(name: str, handle: IO[bytes], sink: Sink, issues: IssueCollector) -> None:
    """BioC XML through bioc's streaming reader, each document checked as a JSON one is;
    problems name the document's field (XML has no line per field)."""
    from bioc import biocjson
    from bioc.biocxml import BioCXMLDocumentReader
    from lxml import etree

    head = handle.read(1 << 20)  # the prolog, where entities would be declared
    cut = head.find(b"<collection")
    prolog = head if cut < 0 else head[:cut]
    if b"<!ENTITY" in prolog:
        line = prolog[: prolog.index(b"<!ENTITY")].count(b"\n") + 1
        raise CorpusError.single(name, line, "XML entity declarations are not accepted")
    handle.seek(0)
    relations = documents = 0
    try:
        for d, document in enumerate(BioCXMLDocumentReader(handle)):
            documents += 1

            def report(where: JsonPath, message: str, d: int = d) -> None:
                issues.add(None, message, json_field(where, f"documents[{d}]"))

            units, n_relations = _read_document(biocjson.toJSON(document), report)
            relations += n_relations + _add_units(units, report, sink)
    except etree.XMLSyntaxError as exc:
        issues.add(exc.lineno or None, f"invalid XML: {exc.msg}")
    issues.raise_if_any()
    if not documents or not sink.count:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")
    if relations:
        log.warning(
            "%s: %d relations not kept (a corpus keeps ties of two mentions of a passage "
            "or sentence)",
            name,
            relations,
        )


def _collection(infons: dict[str, Any]) -> dict[str, Any]:
    """A collection's fields before its documents."""
    return {
        "source": "mslm",
        "date": dt.date.today().strftime("%Y%m%d"),
        "key": "mslm.key",
        "infons": infons,
    }


def _document(
    doc_id: str,
    text: str,
    annotations: list[dict[str, Any]],
    relations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    passage = {
        "infons": {},
        "offset": 0,
        "text": text,
        "sentences": [],
        "annotations": annotations,
        "relations": relations or [],
    }
    return {"id": doc_id, "infons": {}, "passages": [passage], "relations": []}


def _relation(k: int, modifier: int, head: int, infons: dict[str, str]) -> dict[str, Any]:
    """A tie from the annotation ``modifier`` to its ``head`` (ids as :func:`_annotation`
    gives them)."""
    return {
        "id": f"R{k}",
        "infons": infons,
        "nodes": [
            {"refid": str(modifier), "role": "modifier"},
            {"refid": str(head), "role": "head"},
        ],
    }


def _annotation(k: int, text: str, start: int, end: int, infons: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(k),
        "infons": infons,
        "text": text[start:end],
        "locations": [{"offset": start, "length": end - start}],
    }


def write_bioc(corpus: Corpus, path: StrPath) -> None:
    """Write ``corpus`` as a BioC collection: one document per sentence (its index as
    ``id``), one passage at offset 0, one annotation per mention (``infons.type``, and
    ``infons.identifier`` when it has a concept). JSON, or XML (through ``bioc``) when the
    path ends in ``.xml``."""
    documents = [
        _document(
            str(i),
            s.text,
            [
                _annotation(k, s.text, a, b, {"type": label} | ({"identifier": c} if c else {}))
                for k, (a, b, label, c) in enumerate(s.linked_char_mentions())
            ],
            [_relation(k, m, h, {"type": "modifies"}) for k, (m, h) in enumerate(s.relations)],
        )
        for i, s in enumerate(corpus.sentences)
    ]
    if os.fspath(path).lower().endswith(".xml"):
        _write_bioc_xml(path, documents)
        return
    head = json.dumps(_collection({}), ensure_ascii=False)[:-1] + ', "documents": [\n'
    atomic_write(path, json_array_lines(head, documents, "\n]}\n"))


def _write_bioc_xml(path: StrPath, documents: list[dict[str, Any]]) -> None:
    from bioc import biocjson, biocxml

    collection = biocjson.decoder.parse_collection({**_collection({}), "documents": documents})
    atomic_write(path, iter([biocxml.dumps(collection)]))


def _prediction_infons(e: Entity) -> dict[str, str]:
    infons = {"type": e.type, "confidence": f"{e.confidence:.6g}"}
    a = e.assertion
    if a is not None:
        for attr in ASSERTION_ATTRIBUTES:
            infons[attr] = "true" if getattr(a, attr) else "false"
        infons["cues"] = ";".join(f"{c.attribute}@{c.start}-{c.end}" for c in a.cues)
    if e.section is not None:
        infons["section"] = e.section
    if e.concept is not None:  # as PubTator Central's BioC writes it, and strings
        infons["identifier"] = e.concept.id
        infons["concept_name"] = e.concept.name
        infons["concept_score"] = f"{e.concept.score:.4g}"
        infons["vocabulary"] = e.concept.vocabulary
        if e.concept.code is not None:
            infons["concept_code"] = e.concept.code
        if e.concept.concept_id is not None:
            infons["concept_id"] = str(e.concept.concept_id)
        if e.concept.confidence is not None:
            infons["concept_confidence"] = f"{e.concept.confidence:.4g}"
    return infons


def _predicted_relations(ents: Sequence[Entity]) -> list[dict[str, Any]]:
    """Each modifier's tie to its head: ``infons.type`` its role (dose, value, site …) and
    ``infons.confidence``."""
    index = {(e.start, e.end): k for k, e in enumerate(ents)}
    out: list[dict[str, Any]] = []
    for k, e in enumerate(ents):
        if e.head is not None and (e.head.start, e.head.end) in index:
            infons = {"type": e.head.role, "confidence": f"{e.head.confidence:.4g}"}
            out.append(_relation(len(out), k, index[(e.head.start, e.head.end)], infons))
    return out


def predictions_to_bioc(
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Predictions as a BioC JSON collection: one document per text (``id``: ``ids[i]``, or
    its index in ``texts``), one passage at offset 0 holding the text, one annotation per
    entity with ``infons: {type, confidence}`` — strings, as BioC infons are (the confidence to 6
    significant digits) — and, when the entity has its clinical context, ``negated``,
    ``possible``, ``hypothetical``, ``historical``, ``family``, ``allergy`` (each of
    ``types.ASSERTION_ATTRIBUTES``: ``"true"``/``"false"``) and ``cues``
    (``attribute@start-end`` joined by ``;``, offsets into the text), and its ``section`` when
    it lies in one; each modifier's tie to its head is a passage relation (``nodes``: the
    modifier's and the head's annotation ids, roles ``modifier`` and ``head``; ``infons``:
    its role and confidence); the collection's ``infons.model`` names the model."""
    documents = [
        _document(
            ids[i] if ids is not None else str(i),
            text,
            [
                _annotation(k, text, e.start, e.end, _prediction_infons(e))
                for k, e in enumerate(ents)
            ],
            _predicted_relations(ents),
        )
        for i, (text, ents) in enumerate(zip(texts, entities, strict=True))
    ]
    return {**_collection({"model": model}), "documents": documents}


_SNIFF_XML = (b"<?xml", b"<!DOCTYPE", b"<collection")


def looks_like_xml(head: bytes) -> bool:
    return head.startswith(_SNIFF_XML)


def _sniff(head: bytes) -> bool:
    """BioC XML, or a JSON object with a top-level ``documents`` key (a collection)."""
    if looks_like_xml(head):
        return True
    return head.startswith(b"{") and _has_documents_key(head.decode("utf-8", "replace"))


def _has_documents_key(head: str) -> bool:
    """Whether the JSON object that ``head`` starts has a top-level ``documents`` key (a BioC
    collection); ``head`` may be cut anywhere."""
    decoder = json.JSONDecoder()
    pos = 1
    try:
        while True:
            pos = skip_json_space(head, pos)
            if head[pos] != '"':
                return False  # "}" (the object ended) or invalid JSON
            key, pos = decoder.raw_decode(head, pos)
            if key == "documents":
                return True
            pos = skip_json_space(head, pos)
            if head[pos] != ":":
                return False
            pos = skip_json_space(head, pos + 1)
            _, pos = decoder.raw_decode(head, pos)
            pos = skip_json_space(head, pos)
            if head[pos] != ",":
                return False
            pos += 1
    except (ValueError, IndexError, RecursionError):  # cut before "documents": look for it
        return '"documents"' in head


def _render(
    texts: Sequence[str], entities: Sequence[Sequence[Entity]], o: RenderOptions
) -> dict[str, Any]:
    return predictions_to_bioc(texts, entities, o.model, o.ids)


register(
    Format(
        "bioc",
        fill_bioc,
        write_bioc,
        extensions=(".xml",),
        suffix=".json",
        also_reads=(".json",),
        sniff=_sniff,
        sniff_rank=20,
        predictions=Predictions(_render, help="a BioC JSON collection"),
    )
)
