"""Label Studio: NER exports read as corpora; corpora and predictions written as tasks.

An export is a JSON array of tasks. In the full JSON export a task is
``{"data": {"text": ...}, "annotations": [{"result": [...], "was_cancelled": false}, ...]}``;
the latest annotation that was not cancelled is read (by ``updated_at``, then
``created_at``), and its ``labels`` results ``{"value": {"start", "end", "text", "labels"}}``
become the mentions; its ``relation`` results (``{"from_id", "to_id", "direction"}`` between
two regions' ``id``) become the sentence's relations, the end of a modifier type (Dosage,
Result, Anatomy…: ``mslm_core.relations``) the modifier and the other its head (between two
others, ``from_id`` modifies ``to_id``, or the reverse for ``direction: "left"``); a relation
naming no region's id is counted in the warning with the results not kept. Other
result types (choices, …) are not kept and are counted in a warning;
so are tasks without a completed annotation (pre-annotations alone are
not gold). In the JSON-MIN export a task is flat: ``{"text": ..., "label": [{"start", "end",
"text", "labels"}], "annotator": ...}``. Offsets count code points, as Label Studio stores
them; a ``text`` that does not match its offsets is refused.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import CorpusError
from ._io import IssueCollector, StrPath, _is_int, _type_name, atomic_write, open_binary
from ._shared import (
    CharSpan,
    JsonPath,
    JsonStream,
    Link,
    Report,
    json_array_lines,
    json_reporter,
    label_problem,
    mention_pairs,
    region_pairs,
    sentence_from_spans,
)
from .formats import Format, Predictions, RenderOptions, register
from .model import Corpus, SentenceList, Sink

if TYPE_CHECKING:
    from ..types import Entity

log = logging.getLogger(__name__)
# Label Studio's result types: named in the log when skipped; any other value is counted as
# "other" and never echoed (it is uploaded content, of any length)
RESULT_TYPES = frozenset(
    [
        "labels",
        "choices",
        "textarea",
        "rating",
        "relation",
        "taxonomy",
        "number",
        "datetime",
        "pairwise",
        "ranker",
        "hypertextlabels",
        "paragraphlabels",
        "rectanglelabels",
        "polygonlabels",
        "keypointlabels",
        "brushlabels",
        "ellipselabels",
        "timeserieslabels",
        "videorectangle",
    ]
)

#: Keys that mark a flat (JSON-MIN) task as annotated.
_MIN_MARKERS = ("annotator", "annotation_id")


def _region(text: str, value: Any, where: JsonPath, report: Report) -> CharSpan | None:
    """One labelled region ``{start, end, text, labels: [type]}``, validated."""
    if not isinstance(value, dict):
        report(where, f"region must be an object, found {_type_name(value)}")
        return None
    for key in ("start", "end"):
        if not _is_int(value.get(key)):
            found = "missing" if key not in value else f"found {_type_name(value[key])}"
            report((*where, key), f"{key!r} must be an integer ({found})")
            return None
    start, end = value["start"], value["end"]
    if not 0 <= start < end <= len(text):
        report(
            (*where, "start" if not 0 <= start <= len(text) else "end"),
            f"region [{start}, {end}) is empty or outside the text [0, {len(text)}]",
        )
        return None
    labels = value.get("labels")
    if not isinstance(labels, list) or len(labels) != 1:
        found = f"{len(labels)} labels" if isinstance(labels, list) else _type_name(labels)
        report((*where, "labels"), f"'labels' must be a list of one type, found {found}")
        return None
    problem = label_problem(labels[0], "labels")
    if problem:
        report((*where, "labels", 0), problem)
        return None
    if "text" in value and value["text"] != text[start:end]:
        report(
            (*where, "text"),
            f"'text' {value['text']!r} does not match the offsets, which hold {text[start:end]!r}",
        )
        return None
    return CharSpan(start, end, labels[0], where)


def _latest_annotation(task: dict[str, Any], report: Report) -> tuple[int, dict[str, Any]] | None:
    """The index and body of the latest annotation not cancelled, or ``None``."""
    annotations = task.get("annotations", [])
    if not isinstance(annotations, list):
        report(("annotations",), f"'annotations' must be a list, found {_type_name(annotations)}")
        return None
    best: tuple[tuple[str, str, int], int, dict[str, Any]] | None = None
    for k, annotation in enumerate(annotations):
        if not isinstance(annotation, dict):
            report(
                ("annotations", k), f"annotation must be an object, found {_type_name(annotation)}"
            )
            continue
        if annotation.get("was_cancelled"):
            continue
        order = (
            str(annotation.get("updated_at") or ""),
            str(annotation.get("created_at") or ""),
            k,
        )
        if best is None or order > best[0]:
            best = (order, k, annotation)
    return None if best is None else (best[1], best[2])


def _task_spans(
    task: dict[str, Any],
    text_key: str,
    label_key: str,
    report: Report,
    ignored: Counter[str],
    relations: list[tuple[CharSpan, CharSpan]],
) -> tuple[str, list[CharSpan]] | None:
    """The text and regions of one task, and its (modifier, head) regions into
    ``relations``; ``None`` when it has no completed annotation (or a problem, already
    reported)."""
    flat = "data" not in task
    data = task if flat else task["data"]
    if not isinstance(data, dict):
        report(("data",), f"'data' must be an object, found {_type_name(data)}")
        return None
    text_path: JsonPath = (text_key,) if flat else ("data", text_key)
    text = data.get(text_key)
    if not isinstance(text, str):
        found = "missing" if text_key not in data else f"found {_type_name(text)}"
        report(text_path, f"{text_key!r} must be a string ({found})")
        return None
    spans: list[CharSpan] = []
    if flat:  # JSON-MIN: the regions sit under the labels' name
        if label_key not in task and not any(k in task for k in _MIN_MARKERS):
            return None
        regions = task.get(label_key, [])
        if not isinstance(regions, list):
            report((label_key,), f"{label_key!r} must be a list, found {_type_name(regions)}")
            return None
        for j, region in enumerate(regions):
            span = _region(text, region, (label_key, j), report)
            if span is not None:
                spans.append(span)
        return text, spans
    latest = _latest_annotation(task, report)
    if latest is None:
        return None
    k, annotation = latest
    results = annotation.get("result", [])
    if not isinstance(results, list):
        report(
            ("annotations", k, "result"), f"'result' must be a list, found {_type_name(results)}"
        )
        return None
    links: list[Link] = []
    for j, item in enumerate(results):
        where: JsonPath = ("annotations", k, "result", j)
        if not isinstance(item, dict):
            report(where, f"result must be an object, found {_type_name(item)}")
            continue
        kind = item.get("type")
        if kind == "relation":
            ends = tuple(((*where, k), item.get(k)) for k in ("from_id", "to_id"))
            links.append((ends, item.get("direction")))  # type: ignore[arg-type]
            continue
        if kind != "labels":
            ignored[kind if isinstance(kind, str) and kind in RESULT_TYPES else "other"] += 1
            continue
        span = _region(text, item.get("value"), (*where, "value"), report)
        if span is not None:
            spans.append(replace(span, region=item.get("id")))
    if links:
        relations[:], unresolved = region_pairs(spans, links)
        ignored["relation"] += unresolved
    return text, spans


def read_labelstudio(path: StrPath, text_key: str = "text", label_key: str = "label") -> Corpus:
    """Read a Label Studio export into a :class:`Corpus` (see :func:`fill_labelstudio`)."""
    sink = SentenceList()
    fill_labelstudio(path, sink, text_key, label_key)
    return sink.corpus(os.fspath(path))


def fill_labelstudio(
    path: StrPath, sink: Sink, text_key: str = "text", label_key: str = "label"
) -> None:
    """Read a Label Studio export (JSON or JSON-MIN): one sentence per annotated task.

    ``text_key`` names the text in ``data`` (the ``value="$text"`` of the labelling config);
    ``label_key`` names the regions of a JSON-MIN task (the ``name`` of its ``<Labels>``).
    Raises :class:`CorpusError` listing up to :data:`MAX_ISSUES` problems, each with its line
    and field (``[3].annotations[0].result[1].value.start``), or when no task is annotated.
    """
    name = os.fspath(path)
    issues = IssueCollector(name)
    unannotated = tasks = 0
    ignored: Counter[str] = Counter()
    with open_binary(name) as handle:
        stream = JsonStream(name, handle, issues)
        first = stream.peek()
        if first == "":
            raise CorpusError.single(name, None, "no sentence found (empty corpus)")
        if first != "[":
            raise stream.fail("expected a Label Studio export (a JSON array of tasks)")
        for i, task, element in stream.array():
            tasks += 1
            report = json_reporter(issues, element, f"[{i}]")
            if not isinstance(task, dict):
                report((), f"task must be an object, found {_type_name(task)}")
                continue
            links: list[tuple[CharSpan, CharSpan]] = []
            found = _task_spans(task, text_key, label_key, report, ignored, links)
            if found is None:
                unannotated += 1
                continue
            sentence, n_stripped = sentence_from_spans(*found, report)
            sink.stripped += n_stripped
            if sentence is None:
                continue
            if links:
                sentence.relations = mention_pairs(sentence.char_mentions(), links)
            task_id = task.get("id") if "data" not in task else None
            if task_id is None or isinstance(task_id, (dict, list)):
                sink.add(sentence)
                continue
            # JSON-MIN has one row per annotation: a task annotated twice is two rows, and
            # only its latest annotation counts (as in a full export)
            rank = (str(task.get("updated_at") or task.get("created_at") or ""), i)
            sink.add(sentence, repr(task_id), rank)
        stream.end()
    issues.raise_if_any()
    if unannotated:
        log.warning("%s: %d of %d tasks have no completed annotation", name, unannotated, tasks)
    if sink.superseded:
        log.warning(
            "%s: %d older annotations of tasks annotated more than once not kept (the latest "
            "by updated_at is)",
            name,
            sink.superseded,
        )
    if ignored:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(ignored.items()))
        log.warning("%s: results other than labels not kept: %s", name, kinds)
    if not sink.count:
        why = f" ({unannotated} tasks without a completed annotation)" if unannotated else ""
        raise CorpusError.single(name, None, f"no sentence found (empty corpus){why}")


def _result(
    k: int, text: str, start: int, end: int, label: str, from_name: str, to_name: str
) -> dict[str, Any]:
    return {
        "id": f"e{k}",
        "from_name": from_name,
        "to_name": to_name,
        "type": "labels",
        "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]},
    }


def _relation(modifier: int, head: int) -> dict[str, Any]:
    """A relation result from the region ``e<modifier>`` to its head's."""
    return {
        "type": "relation",
        "from_id": f"e{modifier}",
        "to_id": f"e{head}",
        "direction": "right",
    }


def write_labelstudio(
    corpus: Corpus,
    path: StrPath,
    text_key: str = "text",
    from_name: str = "label",
    to_name: str = "text",
) -> None:
    """Write ``corpus`` as a Label Studio import file: one task per sentence, its mentions as
    a completed annotation (``from_name``/``to_name``: the names in the labelling config)."""
    tasks = [
        {
            "data": {text_key: s.text},
            "annotations": [
                {
                    "result": [
                        *(
                            _result(k, s.text, a, b, label, from_name, to_name)
                            for k, (a, b, label) in enumerate(s.char_mentions())
                        ),
                        *(_relation(m, h) for m, h in s.relations),
                    ],
                    "was_cancelled": False,
                }
            ],
        }
        for s in corpus.sentences
    ]
    atomic_write(path, json_array_lines("[\n", tasks, "\n]\n"))


def predictions_to_labelstudio(
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model_version: str,
    text_key: str = "text",
    from_name: str = "label",
    to_name: str = "text",
) -> list[dict[str, Any]]:
    """Predictions as Label Studio tasks with pre-annotations, ready to import.

    Each region carries its ``score`` (the entity's confidence) and, when its clinical context
    is not "present", ``meta.text`` naming it with its cues (e.g. ``negated: "denies"``) and
    its note's section (``section: family_history``), which Label Studio shows as the region's
    meta; a modifier tied to its head (``mslm_core.relations``) adds a relation result from
    its region to the head's; the prediction's ``score`` is the lowest of them
    (the entity a reviewer should look at first), absent when the text has no entity.
    """
    tasks = []
    for text, ents in zip(texts, entities, strict=True):
        result = []
        for k, e in enumerate(ents):
            region = {**_result(k, text, e.start, e.end, e.type, from_name, to_name)}
            region["score"] = e.confidence
            meta = []
            if e.assertion is not None and e.assertion.cues:
                meta += [f'{c.attribute}: "{c.text}"' for c in e.assertion.cues]
            if e.section is not None:
                meta.append(f"section: {e.section}")
            if e.concept is not None:
                c = e.concept
                code = c.code or c.id
                sure = f", confidence {c.confidence:.2f}" if c.confidence is not None else ""
                meta.append(f"concept: {c.vocabulary} {code} {c.name} (score {c.score:.2f}{sure})")
            if meta:
                region["meta"] = {"text": meta}
            result.append(region)
        index = {(e.start, e.end): k for k, e in enumerate(ents)}
        for k, e in enumerate(ents):
            if e.head is not None and (e.head.start, e.head.end) in index:
                result.append(_relation(k, index[(e.head.start, e.head.end)]))
        prediction: dict[str, Any] = {"model_version": model_version, "result": result}
        if ents:
            prediction["score"] = min(e.confidence for e in ents)
        tasks.append({"data": {text_key: text}, "predictions": [prediction]})
    return tasks


def _render(
    texts: Sequence[str], entities: Sequence[Sequence[Entity]], o: RenderOptions
) -> list[dict[str, Any]]:
    return predictions_to_labelstudio(
        texts, entities, model_version=o.model, from_name=o.from_name, to_name=o.to_name
    )


register(
    Format(
        "labelstudio",
        fill_labelstudio,
        write_labelstudio,
        extensions=(),
        suffix=".json",
        also_reads=(".json",),
        sniff=lambda head: head.startswith(b"["),  # an export is an array of tasks
        sniff_rank=10,
        predictions=Predictions(_render, help="Label Studio tasks with pre-annotations"),
    )
)
