"""Predictions rendered for the people and tools that read them — the one place for every output
shape: this service's annotate JSON (``POST /v1/annotate`` and ``mslm annotate``), BioC JSON,
Label Studio pre-annotations and PubTator (each built with its format's writer helpers) — and
the confidence thresholds applied before any of them (:func:`kept`: the API, the command line
and annotation jobs all call it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .corpus import PREDICTION_FORMATS, registry
from .types import Entity

__all__ = [
    "PREDICTION_FORMATS",
    "annotation_json",
    "kept",
    "media_type",
    "render_predictions",
]


def kept(
    entities: Sequence[Entity],
    min_confidence: float = 0.0,
    per_type: Mapping[str, float] | None = None,
) -> list[Entity]:
    """The entities at or above ``min_confidence`` and their type's own threshold (a
    threshold above 1 drops the type), in order."""
    per_type = per_type or {}
    return [e for e in entities if e.confidence >= max(min_confidence, per_type.get(e.type, 0.0))]


def annotation_json(model: dict[str, Any], entities: Sequence[Sequence[Entity]]) -> dict[str, Any]:
    """``{"model": …, "results": [{"entities": [{start, end, text, type, confidence,
    detection_score, type_score}, …]}, …]}``: one result per text, in order."""
    return {
        "model": model,
        "results": [{"entities": [e.to_dict() for e in ents]} for ents in entities],
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
    fmt = registry.formats().get(format)
    if fmt is not None and fmt.predictions is not None:
        return fmt.predictions.render(
            texts, entities, model=model, ids=ids, from_name=from_name, to_name=to_name
        )
    valid = ", ".join(f for f in PREDICTION_FORMATS if f != "json")
    raise ValueError(f"unknown prediction format {format!r}; valid: {valid}")


def media_type(format: str) -> str:
    """The media type of predictions rendered in ``format``."""
    fmt = registry.formats().get(format)
    return (
        "application/json" if fmt is None or fmt.predictions is None else fmt.predictions.media_type
    )
