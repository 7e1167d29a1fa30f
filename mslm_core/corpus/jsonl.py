"""JSONL: ``{"text", "entities": [{"start", "end", "label"}]}`` per line, character offsets,
and optionally ``"relations": [{"modifier": i, "head": j}]``, indexes into that line's
``entities`` (a dose and its drug, a value and its test: ``mslm_core.relations``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from ..errors import CorpusError
from ..text import word_spans
from ._io import IssueCollector, StrPath, _is_int, _type_name, atomic_write, numbered_lines
from .formats import Format, register
from .model import Corpus, Mention, Sentence, SentenceList, Sink


def _entity_problem(text: str, entity: object, where: str) -> tuple[str, str] | None:
    """``(message, field)`` for the first problem of one JSONL entity, ``None`` if valid."""
    if not isinstance(entity, dict):
        return f"entity must be an object, found {_type_name(entity)}", where
    for key in ("start", "end"):
        if key not in entity:
            return f"missing {key!r}", f"{where}.{key}"
        if not _is_int(entity[key]):
            return f"{key!r} must be an integer, found {_type_name(entity[key])}", f"{where}.{key}"
    label = entity.get("label")
    if "label" not in entity:
        return "missing 'label'", f"{where}.label"
    if not isinstance(label, str):
        return f"'label' must be a string, found {_type_name(label)}", f"{where}.label"
    if not label.strip():
        return "'label' is empty", f"{where}.label"
    if any(c.isspace() for c in label):
        return f"'label' {label!r} contains whitespace", f"{where}.label"
    if not label.isprintable():
        return f"'label' {label!r} contains control characters", f"{where}.label"
    start, end = entity["start"], entity["end"]
    if not 0 <= start <= len(text):
        return f"start {start} is outside the text [0, {len(text)}]", f"{where}.start"
    if not 0 <= end <= len(text):
        return f"end {end} is outside the text [0, {len(text)}]", f"{where}.end"
    if start >= end:
        return f"start {start} is not before end {end}", f"{where}.end"
    if not text[start:end].strip():
        return f"entity [{start}, {end}) is only whitespace", where
    concept = entity.get("concept")
    if concept is not None and (not isinstance(concept, str) or not concept.strip()):
        return "'concept' must be a non-empty string or null", f"{where}.concept"
    return None


def _read_entities(
    text: str, entities: list[Any], number: int, issues: IssueCollector
) -> tuple[list[tuple[int, int, str, str | None, int]], int] | None:
    """The validated, trimmed ``(start, end, label, concept, index in the line)`` spans of one
    line's entities, in order, and how many were trimmed; ``None`` when the line has problems
    (already added to ``issues``)."""
    spans: list[tuple[int, int, str, int]] = []  # start, end, label, index in the line
    stripped = 0
    ok = True
    for i, entity in enumerate(entities):
        problem = _entity_problem(text, entity, f"entities[{i}]")
        if problem is not None:
            issues.add(number, *problem)
            ok = False
            continue
        start: int = entity["start"]
        end: int = entity["end"]
        label: str = entity["label"]
        trimmed_start, trimmed_end = start, end
        while text[trimmed_start].isspace():
            trimmed_start += 1
        while text[trimmed_end - 1].isspace():
            trimmed_end -= 1
        if (trimmed_start, trimmed_end) != (start, end):
            stripped += 1
        spans.append((trimmed_start, trimmed_end, label, i))
    if not ok:
        return None
    spans.sort()
    by_index = {i: (start, end) for start, end, _, i in spans}
    reach, reach_i = -1, -1  # the furthest end so far, and whose it is
    for start, end, _, i in spans:
        if start < reach:
            # Name the entity that comes later in the line, against the earlier one.
            later, earlier = max(i, reach_i), min(i, reach_i)
            (a, b), (c, d) = by_index[later], by_index[earlier]
            issues.add(
                number,
                f"entity [{a}, {b}) overlaps entities[{earlier}] [{c}, {d})",
                f"entities[{later}]",
            )
            ok = False
        if end > reach:
            reach, reach_i = end, i
    if not ok:
        return None
    return [(s, e, label, entities[i].get("concept"), i) for s, e, label, i in spans], stripped


def _read_relations(
    raw: Any,
    spans: list[tuple[int, int, str, str | None, int]],
    number: int,
    issues: IssueCollector,
) -> list[tuple[int, int]] | None:
    """A line's ``relations`` as (modifier, head) indexes into its ordered mentions; None when
    they have problems (added to ``issues``)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        issues.add(number, f"'relations' must be a list, found {_type_name(raw)}", "relations")
        return None
    place = {line_index: k for k, (*_, line_index) in enumerate(spans)}
    out: list[tuple[int, int]] = []
    ok = True
    for r, relation in enumerate(raw):
        where = f"relations[{r}]"
        if not isinstance(relation, dict):
            issues.add(number, f"relation must be an object, found {_type_name(relation)}", where)
            ok = False
            continue
        ends = []
        for key in ("modifier", "head"):
            value = relation.get(key)
            if not _is_int(value) or value not in place:
                issues.add(
                    number,
                    f"{key!r} must be the index of one of the {len(spans)} entities, "
                    f"found {value!r}",
                    f"{where}.{key}",
                )
                ok = False
            else:
                ends.append(place[value])
        if len(ends) == 2:
            if ends[0] == ends[1]:
                issues.add(number, "an entity cannot modify itself", where)
                ok = False
            else:
                out.append((ends[0], ends[1]))
    return out if ok else None


def read_jsonl(path: StrPath) -> Corpus:
    """Read a JSONL corpus into a :class:`Corpus` (see :func:`fill_jsonl`)."""
    sink = SentenceList()
    fill_jsonl(path, sink)
    return sink.corpus(os.fspath(path))


def fill_jsonl(path: StrPath, sink: Sink) -> None:
    """Read a JSONL corpus: one ``{"text": ..., "entities": [...]}`` object per line.

    Blank lines are skipped, and so is a text without words (empty or whitespace) that has
    no entities. Entities with leading/trailing whitespace are trimmed and counted in
    ``Corpus.stripped``. Words come from :func:`~mslm_core.text.word_spans` with every entity
    boundary as a cut, and a mention is the words inside its entity. Raises
    :class:`CorpusError` listing up to :data:`MAX_ISSUES` problems (line and field), or when
    the file holds no sentence.
    """
    name = os.fspath(path)
    issues = IssueCollector(name)
    for number, line in numbered_lines(name, issues):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            issues.add(number, f"invalid JSON: {e.msg} (column {e.colno})")
            continue
        except (ValueError, RecursionError) as e:  # a 5,000-digit number, nesting too deep
            issues.add(number, f"unreadable JSON: {type(e).__name__}: {str(e)[:120]}")
            continue
        if not isinstance(record, dict):
            issues.add(number, f"expected a JSON object, found {_type_name(record)}")
            continue
        text, entities = record.get("text"), record.get("entities")
        line_ok = True
        if "text" not in record:
            issues.add(number, "missing 'text'", "text")
            line_ok = False
        elif not isinstance(text, str):
            issues.add(number, f"'text' must be a string, found {_type_name(text)}", "text")
            line_ok = False
        if "entities" not in record:
            issues.add(
                number, "missing 'entities' (use [] for a text without entities)", "entities"
            )
            line_ok = False
        elif not isinstance(entities, list):
            found = _type_name(entities)
            issues.add(number, f"'entities' must be a list, found {found}", "entities")
            line_ok = False
        if not line_ok:
            continue
        assert isinstance(text, str) and isinstance(entities, list)
        result = _read_entities(text, entities, number, issues)
        if result is None:
            continue
        spans, n_stripped = result
        sink.stripped += n_stripped
        relations = _read_relations(record.get("relations"), spans, number, issues)
        if relations is None:
            continue
        cuts = [b for start, end, _, _, _ in spans for b in (start, end)]
        words = word_spans(text, boundaries=cuts)
        if not words:
            continue  # no entity either: an entity on a text without words is whitespace
        starts = {a: i for i, (a, _) in enumerate(words)}
        ends = {b: i + 1 for i, (_, b) in enumerate(words)}
        mentions = [Mention(starts[s], ends[e], label, c) for s, e, label, c, _ in spans]
        sink.add(Sentence(text, words, mentions, relations=relations))

    issues.raise_if_any()
    if not sink.count:
        raise CorpusError.single(name, None, "no sentence found (empty corpus)")


def _jsonl_lines(corpus: Corpus) -> Iterator[str]:
    for sentence in corpus.sentences:
        entities = [
            {"start": start, "end": end, "label": label} | ({"concept": c} if c else {})
            for start, end, label, c in sentence.linked_char_mentions()
        ]
        record: dict[str, Any] = {"text": sentence.text, "entities": entities}
        if sentence.relations:
            record["relations"] = [{"modifier": m, "head": h} for m, h in sentence.relations]
        yield json.dumps(record, ensure_ascii=False) + "\n"


def write_jsonl(corpus: Corpus, path: StrPath) -> None:
    """Write ``corpus`` as JSONL, one ``{"text", "entities"}`` object per sentence, with the
    character offsets of :meth:`Sentence.char_mentions` (UTF-8, non-ASCII kept as is)."""
    atomic_write(path, _jsonl_lines(corpus))


register(
    Format(
        "jsonl",
        fill_jsonl,
        write_jsonl,
        extensions=(".jsonl", ".json", ".ndjson"),
        suffix=".jsonl",
        sniff=lambda head: head.startswith(b"{"),  # after BioC's, which also starts with {
        sniff_rank=30,
    )
)
