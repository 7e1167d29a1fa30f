"""Predictions rendered for the people and tools that read them — the one place for every output
shape: this service's annotate JSON (``POST /v1/annotate`` and ``mslm annotate``), BioC JSON,
Label Studio pre-annotations and PubTator (each built with its format's writer helpers) and the
file outputs of annotation jobs (:data:`OUTPUTS`). ``mslm_core.pipeline`` renders an
annotation's response with them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus import PREDICTION_FORMATS, formats
from .corpus.bioc import predictions_to_bioc
from .corpus.pubtator import predictions_to_pubtator
from .language import Language
from .types import Entity

__all__ = [
    "OUTPUTS",
    "PREDICTION_FORMATS",
    "OutputFormat",
    "annotation_json",
    "media_type",
    "render_predictions",
]


def annotation_json(
    model: dict[str, Any],
    entities: Sequence[Sequence[Entity]],
    linking: dict[str, Any] | None = None,
    languages: Sequence[Language | None] | None = None,
) -> dict[str, Any]:
    """``{"model": …, "linking": …, "results": [{"entities": [{start, end, text, type,
    confidence, detection_score, type_score, …}, …], "warnings": […], "language": …}, …]}``:
    one result per text, in order; ``linking`` what the concepts come from (None: no
    linking); ``languages``: per text, the other language it is written in (None: the
    model's, or too short to tell), said as a warning."""
    others = languages if languages is not None else [None] * len(entities)
    return {
        "model": model,
        "linking": linking,
        "results": [
            {
                "entities": [e.to_dict() for e in ents],
                "warnings": [] if other is None else [other.warning(model.get("language", ""))],
                "language": None if other is None else other.to_dict(),
            }
            for ents, other in zip(entities, others, strict=True)
        ],
    }


def render_predictions(
    format: str,
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    from_name: str = "label",
    to_name: str = "text",
    ids: Sequence[str] | None = None,
) -> str | dict[str, Any] | list[dict[str, Any]]:
    """Predictions (one list of entities per text) in ``format``, one of the corpus formats
    that render predictions (``corpus.registry``): ``"bioc"`` (a BioC collection),
    ``"labelstudio"`` (tasks with pre-annotations; ``from_name``/``to_name``: the control and
    object names of the project's labelling config) or ``"pubtator"`` (text); ``model`` names
    the model that made them; ``ids`` name the texts (BioC document ids, PubTator PMIDs;
    default: their indices). ``"json"``: :func:`annotation_json`."""
    fmt = formats.formats().get(format)
    if fmt is not None and fmt.predictions is not None:
        return fmt.predictions.render(
            texts, entities, formats.RenderOptions(model, ids, from_name, to_name)
        )
    valid = ", ".join(f for f in PREDICTION_FORMATS if f != "json")
    raise ValueError(f"unknown prediction format {format!r}; valid: {valid}")


def media_type(format: str) -> str:
    """The media type of predictions rendered in ``format``."""
    fmt = formats.formats().get(format)
    return (
        "application/json" if fmt is None or fmt.predictions is None else fmt.predictions.media_type
    )


# -- annotation jobs' file outputs --------------------------------------------------------------
def _concatenated(model: str, parts: Sequence[Path]) -> Iterator[bytes]:
    for part in parts:
        yield part.read_bytes()


def _jsonl_part(
    ids: Sequence[str], texts: Sequence[str], entities: Sequence[Sequence[Entity]], model: str
) -> str:
    return "".join(
        json.dumps({"id": i, "entities": [e.to_dict() for e in ents]}, ensure_ascii=False) + "\n"
        for i, ents in zip(ids, entities, strict=True)
    )


def _bioc_part(
    ids: Sequence[str], texts: Sequence[str], entities: Sequence[Sequence[Entity]], model: str
) -> str:
    collection = predictions_to_bioc(texts, entities, model, ids)
    return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in collection["documents"])


def _bioc_document(model: str, parts: Sequence[Path]) -> Iterator[bytes]:
    """One BioC collection: its head, the parts' documents (one per line) joined by commas."""
    empty = json.dumps(predictions_to_bioc([], [], model), ensure_ascii=False)
    head, tail = empty.rsplit('"documents": []', 1)
    yield (head + '"documents": [').encode()
    first = True
    for part in parts:
        for line in part.read_text(encoding="utf-8").splitlines():
            yield (("" if first else ",") + line).encode()
            first = False
    yield ("]" + tail).encode()


def _pubtator_part(
    ids: Sequence[str], texts: Sequence[str], entities: Sequence[Sequence[Entity]], model: str
) -> str:
    return predictions_to_pubtator(texts, entities, ids)


@dataclass(frozen=True)
class OutputFormat:
    """An annotation job's file output. Each chunk of notes is written as a part file
    (``part``: the notes' ids, texts, entities and the model → the file's text, stored under
    ``part_suffix``), so that a chunk run twice replaces its part; ``document`` serves the
    parts, in order, as one file of ``media_type`` (downloaded as ``<job id>.<suffix>``)."""

    media_type: str
    suffix: str
    part_suffix: str
    part: Callable[[Sequence[str], Sequence[str], Sequence[Sequence[Entity]], str], str]
    document: Callable[[str, Sequence[Path]], Iterator[bytes]] = _concatenated


#: The file outputs of annotation jobs (``store.bulk``, the worker's file sink, the output
#: route, the client and the web page follow this table): JSONL (one note per line: its id and
#: its entities in this service's JSON), a BioC JSON collection, PubTator text.
OUTPUTS: dict[str, OutputFormat] = {
    "jsonl": OutputFormat("application/x-ndjson", "jsonl", "jsonl", _jsonl_part),
    "bioc": OutputFormat("application/json", "bioc.json", "json", _bioc_part, _bioc_document),
    "pubtator": OutputFormat("text/plain", "pubtator", "txt", _pubtator_part),
}
