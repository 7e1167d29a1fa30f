"""A dataset's documents: the train split as documents with ids, and the unlabelled pool.

A dataset as uploaded is version 1, its files as the client sent them. The first change
(``store.datasets.add_documents``) reads its train split into documents with ids
(``train-1``, ``train-2``, … in file order) and writes every later version as two JSONL files
in ``v{n}/``: ``train.jsonl`` (``{"id", "text", "entities"}`` per line, read by the product's
JSONL reader like any uploaded corpus) and ``pool.jsonl`` (``{"id", "text"}``: documents
nobody has labelled yet, what ``suggest`` ranks)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mslm_core.corpus import read_corpus, scan_corpus
from mslm_core.corpus.model import CorpusSummary
from mslm_core.errors import CorpusError, CorpusIssue

#: The documents one change may carry (a request's worth, within the API's 50,000 JSON values
#: a body may hold: larger corpora are uploaded as files).
MAX_DOCUMENTS = 1_000
MAX_ID = 200

Entity = tuple[int, int, str]


@dataclass
class Document:
    """One document of a dataset: ``entities`` as character offsets ``(start, end, label)``,
    end exclusive; ``None``: nobody has labelled it yet (it waits in the pool)."""

    id: str
    text: str
    entities: list[Entity] | None = None
    concepts: dict[int, str] | None = None  # entity index → concept id, where one was given

    def line(self) -> dict[str, Any]:
        if self.entities is None:
            return {"id": self.id, "text": self.text}
        entities: list[dict[str, Any]] = []
        for k, (start, end, label) in enumerate(self.entities):
            entity: dict[str, Any] = {"start": start, "end": end, "label": label}
            if self.concepts and k in self.concepts:
                entity["concept"] = self.concepts[k]
            entities.append(entity)
        return {"id": self.id, "text": self.text, "entities": entities}


def id_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not 0 < len(value) <= MAX_ID:
        return f"must have 1 to {MAX_ID} characters"
    if any(c < " " or c == "\x7f" for c in value):  # as the API's Identifier: no C0, no DEL
        return "contains control characters"
    return None


def check(documents: Sequence[Document], remove: Sequence[str]) -> None:
    """Refuse (CorpusError naming ``documents[i].field``) what a version cannot hold: a bad
    or repeated id, a text without words, an entity outside its text, overlapping another,
    or with a bad label. Nothing is stored when anything is wrong."""
    issues: list[CorpusIssue] = []
    if len(documents) + len(remove) > MAX_DOCUMENTS:
        raise CorpusError.single(
            "documents", None, f"at most {MAX_DOCUMENTS} documents and removals per change"
        )
    seen: set[str] = set()
    for i, doc in enumerate(documents):
        where = f"documents[{i}]"
        problem = id_problem(doc.id)
        if problem:
            issues.append(CorpusIssue(where, None, f"id {problem}", "id"))
        elif doc.id in seen:
            issues.append(CorpusIssue(where, None, f"id {doc.id!r} is given twice", "id"))
        seen.add(doc.id)
        if not doc.text.strip():
            issues.append(CorpusIssue(where, None, "text has no words", "text"))
    for i, doc_id in enumerate(remove):
        problem = id_problem(doc_id)
        if problem:
            issues.append(CorpusIssue(f"remove[{i}]", None, f"id {problem}", None))
        elif doc_id in seen:
            issues.append(
                CorpusIssue(f"remove[{i}]", None, f"id {doc_id!r} is also in documents", None)
            )
    if issues:
        raise CorpusError(issues[:20])
    labelled = [(i, d) for i, d in enumerate(documents) if d.entities is not None]
    if not labelled:
        return
    # the entities are checked by the JSONL reader itself: line k is documents[i] of the k-th
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "check.jsonl"
        write_lines(path, (d for _, d in labelled))
        try:
            scan_corpus(path, "jsonl")
        except CorpusError as exc:
            raise CorpusError(
                [
                    CorpusIssue(
                        f"documents[{labelled[issue.line - 1][0]}]" if issue.line else "documents",
                        None,
                        issue.message,
                        issue.field,
                    )
                    for issue in exc.issues
                ]
            ) from None


def write_lines(path: Path, documents: Iterator[Document] | Sequence[Document]) -> int:
    """Write documents as JSONL lines; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for doc in documents:
            out.write(json.dumps(doc.line(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_lines(path: Path) -> list[Document]:
    """Documents written by :func:`write_lines` (the store's own files)."""
    docs = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            record = json.loads(line)
            entities = record.get("entities")
            concepts = None
            if entities is not None:
                concepts = {k: e["concept"] for k, e in enumerate(entities) if e.get("concept")}
                entities = [(e["start"], e["end"], e["label"]) for e in entities]
            docs.append(Document(record["id"], record["text"], entities, concepts or None))
    return docs


def from_upload(path: Path) -> list[Document]:
    """An uploaded train file (any format) as documents ``train-1``, ``train-2``, …"""
    corpus = read_corpus(path)
    docs = []
    for k, sentence in enumerate(corpus.sentences, 1):
        mentions = sentence.linked_char_mentions()
        concepts = {j: c for j, (_, _, _, c) in enumerate(mentions) if c}
        docs.append(
            Document(
                f"train-{k}",
                sentence.text,
                [(a, b, label) for a, b, label, _ in mentions],
                concepts or None,
            )
        )
    return docs


def summary(path: Path, count: int) -> CorpusSummary:
    """The stats and types of a train file of ``count`` documents (none: zeros)."""
    if count:
        return scan_corpus(path, "jsonl")
    empty = {"sentences": 0, "words": 0, "mentions": 0, "mentions_per_type": {}}
    return CorpusSummary({**empty, "repairs": 0, "stripped": 0}, [])
