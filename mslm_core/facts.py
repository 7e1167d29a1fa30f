"""A text's entities as facts an analyst counts with: each drug with its regimen and each
test with its value, the parts tied by the relation step (``mslm_core.relations``) and their
words normalised (``mslm_core.normalize``).

- :func:`relations_of` — the ties as ``{"type", "head", "modifier", "confidence"}``, indexes
  into the text's entities (the head is the drug, the test or the finding);
- :func:`facts_of` — ``{"medications": [{drug, dose, route, frequency, duration}],
  "measurements": [{test, value, unit, number, comparator, …}]}``: one medication per Drug,
  one measurement per Test that has a value. Each part names its entity (``entity``, its
  index), its span and its ``confidence``: the entity's, times the tie's for a modifier.
  A medication and a measurement carry their head's ``assertion`` (clinical context), when
  the context step ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import normalize
from .types import Entity

_VITAL_UNITS = {
    "bp": "mm[Hg]",
    "blood pressure": "mm[Hg]",
    "sbp": "mm[Hg]",
    "dbp": "mm[Hg]",
    "map": "mm[Hg]",
    "hr": "/min",
    "heart rate": "/min",
    "pulse": "/min",
    "p": "/min",
    "rr": "/min",
    "resp": "/min",
    "respiratory rate": "/min",
    "spo2": "%",
    "sao2": "%",
    "o2 sat": "%",
    "sat": "%",
}
MEDICATION_PARTS = ("dose", "route", "frequency", "duration")


def relations_of(entities: Sequence[Entity]) -> list[dict[str, Any]]:
    """The ties between ``entities`` (a text's, in order), as indexes into them."""
    index = {(e.start, e.end): i for i, e in enumerate(entities)}
    out = []
    for i, e in enumerate(entities):
        head = e.head
        if head is not None and (head.start, head.end) in index:
            out.append(
                {
                    "type": head.role,
                    "head": index[(head.start, head.end)],
                    "modifier": i,
                    "confidence": head.confidence,
                }
            )
    return out


def _part(i: int, e: Entity, tie: float = 1.0) -> dict[str, Any]:
    return {
        "entity": i,
        "text": e.text,
        "start": e.start,
        "end": e.end,
        "confidence": round(e.confidence * tie, 4),
    }


def _assertion(e: Entity) -> dict[str, Any]:
    if e.assertion is None:
        return {}
    a = e.assertion
    return {"assertion": {k: getattr(a, k) for k in a.__dataclass_fields__ if k != "cues"}}


def facts_of(entities: Sequence[Entity]) -> dict[str, list[dict[str, Any]]]:
    """The medications and measurements of a text's ``entities`` (see the module's doc)."""
    modifiers: dict[int, dict[str, list[int]]] = {}
    for r in relations_of(entities):
        modifiers.setdefault(r["head"], {}).setdefault(r["type"], []).append(r["modifier"])
    medications, measurements = [], []
    for i, e in enumerate(entities):
        mine = modifiers.get(i, {})
        if e.type == "Drug":
            med: dict[str, Any] = {"drug": _part(i, e)}
            for role in MEDICATION_PARTS:
                med[role] = _modifier(entities, mine.get(role), role)
            med.update(_assertion(e))
            medications.append(med)
        elif e.type == "Test" and mine.get("value"):
            value = _modifier(entities, mine["value"], "value", _VITAL_UNITS.get(e.text.lower()))
            measurement: dict[str, Any] = {"test": _part(i, e), "value": value}
            q = value.get("quantity") if value else None
            measurement["unit"] = (q or {}).get("ucum") or (q or {}).get("unit")
            for key in ("number", "comparator", "low", "high", "numbers", "qualitative"):
                measurement[key] = (q or {}).get(key)
            measurement.update(_assertion(e))
            measurements.append(measurement)
    return {"medications": medications, "measurements": measurements}


def _modifier(
    entities: Sequence[Entity], found: list[int] | None, role: str, unit_hint: str | None = None
) -> dict[str, Any] | None:
    """The likeliest of the modifiers tied in ``role``, with its normalised value."""
    if not found:
        return None

    def tie(k: int) -> float:
        head = entities[k].head
        return head.confidence if head is not None else 0.0

    best = max(found, key=tie)
    e = entities[best]
    part = _part(best, e, e.head.confidence if e.head else 1.0)
    if role in ("dose", "value"):
        q = normalize.quantity(e.text, unit_hint)
        if q is not None:
            part["quantity"] = q.to_dict()
    elif role == "frequency":
        part["timing"] = normalize.timing(e.text)
    elif role == "duration":
        part["iso8601"] = normalize.duration(e.text)
    elif role == "route":
        part["code"] = normalize.route(e.text)
    return part


def flat_values(e: Entity) -> dict[str, str]:
    """A modifier's normalised value as flat text pairs (``NOTE_NLP.term_modifiers``): a
    quantity's ``number`` (or ``low``/``high``, ``numbers`` joined by ``/``), ``comparator``
    and ``ucum``; a timing's ``frequency``, ``period``, ``period_unit``, ``as_needed`` …;
    ``iso8601``; a route's ``snomed`` code. Empty for an entity tied to no head."""
    if e.head is None:
        return {}
    role = e.head.role
    out: dict[str, Any] = {}
    if role in ("dose", "value"):
        q = normalize.quantity(e.text)
        out = q.to_dict() if q is not None else {}
        out.pop("unit", None)
        if "numbers" in out:
            out["numbers"] = "/".join(f"{n:g}" for n in out["numbers"])
    elif role == "frequency":
        out = normalize.timing(e.text) or {}
    elif role == "duration":
        iso = normalize.duration(e.text)
        out = {"iso8601": iso} if iso else {}
    elif role == "route":
        code = normalize.route(e.text)
        out = {"snomed": code["code"]} if code else {}
    return {
        k: (str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v))
        for k, v in out.items()
    }
