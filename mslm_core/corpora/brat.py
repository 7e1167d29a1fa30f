"""brat standoff (``.txt`` + ``.ann``) read, and turned into training sentences.

MACCROBAT2020 and CHIA are distributed this way. Their annotations overlap (an event's span
inside a longer history, a discontinuous "renal … function impairment" over a coordination),
which a flat tagger cannot hold: :func:`document_records` keeps the entity types asked for,
resolves overlaps among them by a fixed rule and counts what it left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..relations import Sentence
from ..text import sentence_spans


@dataclass
class BratEntity:
    id: str
    type: str
    start: int  # the outer extent of a discontinuous entity
    end: int
    text: str
    fragments: int = 1

    @property
    def discontinuous(self) -> bool:
        return self.fragments > 1


@dataclass
class BratDocument:
    name: str
    text: str
    entities: dict[str, BratEntity] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)  # event id → its trigger's entity id
    attributes: list[tuple[str, str, str]] = field(default_factory=list)  # (name, target, value)
    relations: list[tuple[str, str, str]] = field(default_factory=list)  # (type, arg1, arg2)


_ANN_LINE = re.compile(r"^(?:[TEARMN#]\d+|\*)\t")


def read_brat(txt: Path) -> BratDocument:
    """One ``.txt``/``.ann`` pair. Discontinuous spans keep their outer extent."""
    # no newline translation: brat offsets count a "\r\n" as two characters (CHIA has them)
    with open(txt, encoding="utf-8", newline="") as fh:
        text = fh.read()
    doc = BratDocument(txt.stem, text)
    ann = txt.with_suffix(".ann")
    for lineno, line in enumerate(ann.read_text(encoding="utf-8").splitlines(), 1):
        if not _ANN_LINE.match(line):
            continue  # blank, or the rest of an entity text that holds a line break (CHIA)
        parts = line.split("\t")
        ident = parts[0]
        try:
            if ident.startswith("T"):
                kind, _, spans = parts[1].partition(" ")
                offsets = [tuple(map(int, s.split())) for s in spans.split(";")]
                start, end = min(a for a, _ in offsets), max(b for _, b in offsets)
                if not 0 <= start < end <= len(text):
                    raise ValueError(f"span {start}-{end} outside the text ({len(text)})")
                doc.entities[ident] = BratEntity(
                    ident, kind, start, end, text[start:end], len(offsets)
                )
            elif ident.startswith("E"):
                trigger = parts[1].split()[0].split(":")[1]
                doc.events[ident] = trigger
            elif ident.startswith("A"):
                fields = parts[1].split()
                doc.attributes.append(
                    (fields[0], fields[1], fields[2] if len(fields) > 2 else "true")
                )
            elif ident.startswith("R"):
                kind, a1, a2 = parts[1].split()[:3]
                doc.relations.append((kind, a1.split(":")[1], a2.split(":")[1]))
        except (IndexError, ValueError) as exc:
            raise ConfigError(f"{ann}:{lineno}: not brat standoff ({exc})") from exc
    return doc


def brat_documents(folder: Path) -> Iterator[BratDocument]:
    """The documents of a folder, sorted by name (a ``.txt`` without ``.ann`` is skipped)."""
    for txt in sorted(Path(folder).glob("*.txt")):
        if txt.with_suffix(".ann").exists():
            yield read_brat(txt)


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of a brat text: each line (both corpora put one
    sentence or one criterion per line), split further where a line holds several."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        out.extend((pos + a, pos + b) for a, b in sentence_spans(body))
        pos += len(line)
    return out


def resolve_overlaps(entities: list[BratEntity]) -> tuple[list[BratEntity], int]:
    """Non-overlapping entities: continuous ones before discontinuous ones (whose outer extent
    spans words that are not theirs), then the longer first, then the earlier; each is kept
    unless it overlaps one kept already. Returns the kept (by start) and how many were left
    out."""
    order = sorted(entities, key=lambda e: (e.discontinuous, -(e.end - e.start), e.start, e.id))
    kept: list[BratEntity] = []
    for e in order:
        if all(e.end <= k.start or k.end <= e.start for k in kept):
            kept.append(e)
    return sorted(kept, key=lambda e: e.start), len(entities) - len(kept)


def document_records(
    doc: BratDocument, keep: Collection[str], relation: str = "MODIFY"
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The document as JSONL records (one per sentence: ``text``, ``entities`` with the
    entities' own types, ``document``, and ``relations`` between them when it has any of the
    kind ``relation``), keeping the entities of the types ``keep`` and resolving overlaps among
    them (:func:`resolve_overlaps`). Returns the records and what was counted: ``kept`` and,
    per reason, what was left out (``overlap``, ``crosses_sentence``), and the relations kept
    (``relations``) and left out (see :func:`relation_sentences`)."""
    counts: Counter[str] = Counter()
    chosen = [e for e in doc.entities.values() if e.type in keep]
    kept, overlapping = resolve_overlaps(chosen)
    counts["overlap"] += overlapping
    records: list[dict[str, Any]] = []
    where: dict[str, tuple[int, int]] = {}
    spans = sentences(doc.text)
    i = 0
    for a, b in spans:
        inside: list[dict[str, Any]] = []
        while i < len(kept) and kept[i].start < b:
            e = kept[i]
            if e.start >= a and e.end <= b:
                where[e.id] = (len(records), len(inside))
                inside.append({"start": e.start - a, "end": e.end - a, "label": e.type})
                counts["kept"] += 1
            else:
                counts["crosses_sentence"] += 1
            i += 1
        records.append({"text": doc.text[a:b], "entities": inside, "document": doc.name})
    counts["crosses_sentence"] += len(kept) - i  # after the last sentence (whitespace only)
    for (r, m), h, counted in _relations(doc, where, relation):
        counts[counted] += 1
        if h is not None:
            records[r].setdefault("relations", []).append({"modifier": m, "head": h})
    return records, counts


def _relations(
    doc: BratDocument, where: Mapping[str, tuple[int, int]], kind: str
) -> Iterator[tuple[tuple[int, int], int | None, str]]:
    """The document's ``kind`` relations between the entities ``where`` places (id →
    (sentence, index in it)), Arg1 the modifier, Arg2 its head (an event stands for its
    trigger): ``((sentence, modifier), head, "relations")``, or with the head None and why it
    was left out: an end not kept (``unkept_end``), ends in two sentences
    (``relation_crosses_sentence``)."""
    for relation, arg1, arg2 in doc.relations:
        if relation != kind:
            continue
        mod, head = where.get(doc.events.get(arg1, arg1)), where.get(doc.events.get(arg2, arg2))
        if mod is None or head is None:
            yield (0, 0), None, "unkept_end"
        elif mod[0] != head[0]:
            yield (0, 0), None, "relation_crosses_sentence"
        else:
            yield mod, head[1], "relations"


def relation_sentences(
    doc: BratDocument, type_map: Mapping[str, str], kind: str = "MODIFY"
) -> tuple[list[Sentence], Counter[str]]:
    """The document's sentences that hold an entity of the types ``type_map`` maps, typed as
    it maps them (overlaps resolved as :func:`document_records` does), with the ``kind``
    relations between them: what :mod:`mslm_core.relations` learns from and is measured on."""
    records, counts = document_records(doc, type_map, kind)
    out = [
        Sentence(
            r["text"],
            [(e["start"], e["end"], type_map[e["label"]]) for e in r["entities"]],
            [(x["modifier"], x["head"]) for x in r.get("relations", ())],
            doc.name,
        )
        for r in records
        if r["entities"]
    ]
    return out, counts
