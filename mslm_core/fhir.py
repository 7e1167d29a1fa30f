"""FHIR R4 in and out, through fhir.resources' pydantic models (its ``R4B`` package: R4B is
R4 with a handful of changes that none of the resources used here has in the fields used).

In: a ``DocumentReference`` (or a ``Bundle`` of them, or NDJSON of either) is a note — its
``id``, and the text of its first attachment that carries ``data`` (base64, decoded in the
``charset`` its ``contentType`` names, UTF-8 without one); an attachment given by ``url`` only
is not fetched (a problem says so).

Out (docs/fhir.md has the table): per note, one resource per entity of a clinical type —
``Condition`` (Problem), ``MedicationStatement`` (Drug), ``Observation`` (Test), ``Procedure``
(Procedure); other types (Dosage, Result, Anatomy) describe their finding and make none —
each with:

- the note: ``Condition.evidence.detail``, ``MedicationStatement.derivedFrom``,
  ``Observation.derivedFrom``, ``Procedure.report`` → the ``DocumentReference``;
- its subject: the ``DocumentReference``'s, else a reference that names no one;
- the span: the extension :data:`SPAN_EXTENSION` (``start``, ``end``, ``text``,
  ``confidence``: offsets in characters into the note);
- the context: ``Condition.verificationStatus`` ``refuted`` (negated), ``provisional``
  (possible, hypothetical), else ``confirmed``; ``MedicationStatement.status`` ``not-taken``
  (negated), ``completed`` (historical), else ``unknown``; ``Procedure.status`` ``not-done``
  (negated), ``completed`` (historical), else ``unknown``; ``Observation.status`` ``unknown``
  (``cancelled`` when negated); a family member's finding is left out (it is not the
  subject's);
- the code: the linked concept as a ``coding`` (its vocabulary's FHIR system), with the text
  as found as ``code.text``;

and one ``Provenance`` naming the model (an agent ``Device`` by display) and the note as its
source entity, with every resource of the note as its target.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .facts import facts_of
from .types import Entity

FHIR_VERSION = "4.0.1"
SPAN_EXTENSION = "urn:mslm:fhir:extension:text-span"
#: Our vocabularies' names → FHIR code systems.
SYSTEMS = {
    "mesh": "http://id.nlm.nih.gov/mesh",
    "snomed": "http://snomed.info/sct",
    "rxnorm": "http://www.nlm.nih.gov/research/umls/rxnorm",
    "loinc": "http://loinc.org",
    "icd10cm": "http://hl7.org/fhir/sid/icd-10-cm",
    "icd10": "http://hl7.org/fhir/sid/icd-10",
    "omop": "https://fhir.ohdsi.org/CodeSystem/concepts",
}
#: Entity types (a clinical model's, and the biomedical corpora's) → the resource they make.
RESOURCES = {
    "problem": "Condition",
    "disease": "Condition",
    "condition": "Condition",
    "drug": "MedicationStatement",
    "chemical": "MedicationStatement",
    "medication": "MedicationStatement",
    "test": "Observation",
    "procedure": "Procedure",
}
_VERIFICATION = "http://terminology.hl7.org/CodeSystem/condition-ver-status"


# -- in ----------------------------------------------------------------------------------------
def _charset(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip().strip('"')
    return "utf-8"


def note_of(resource: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """A ``DocumentReference``'s (id, text, problem): its text, or why there is none."""
    from fhir.resources.R4B.documentreference import DocumentReference
    from pydantic import ValidationError

    try:
        doc = DocumentReference.model_validate(resource)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        problem = f"not a valid DocumentReference: {where}: {first['msg']}"
        given = resource.get("id")
        return (given if isinstance(given, str) else None), None, problem
    for content in doc.content or []:
        attachment = content.attachment
        if attachment is None or attachment.data is None:
            continue
        data = attachment.data
        raw = data if isinstance(data, bytes) else base64.b64decode(data)
        charset = _charset(attachment.contentType)
        try:
            return doc.id, raw.decode(charset), None
        except (LookupError, UnicodeDecodeError) as exc:
            return doc.id, None, f"its attachment is not {charset} text: {exc}"
    if any(c.attachment is not None and c.attachment.url for c in doc.content or []):
        return doc.id, None, "its attachment is given by url only (not fetched): inline it as data"
    return doc.id, None, "no attachment with data (the note's text, base64)"


def resources_of(text: str) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
    """The resources of a FHIR JSON file — a resource, a Bundle's entries, or NDJSON of
    either — as (where, resource, problem)."""
    stripped = text.lstrip("\ufeff \t\r\n")
    items: list[tuple[str, Any, str | None]] = []
    try:
        items.append(("file", json.loads(stripped), None))
    except RecursionError:
        items.append(("file", None, "JSON nested too deep"))
    except json.JSONDecodeError:
        for number, line in enumerate(stripped.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append((f"line {number}", json.loads(line), None))
            except RecursionError:
                items.append((f"line {number}", None, "JSON nested too deep"))
            except json.JSONDecodeError as exc:
                bad = f"not JSON: {exc.msg} (column {exc.colno})"
                items.append((f"line {number}", None, bad))
    for where, item, said in items:
        if said is not None:
            yield where, None, said
        elif not isinstance(item, dict):
            yield where, None, "not a FHIR resource (a JSON object with a resourceType)"
        elif item.get("resourceType") == "Bundle":
            entries = item.get("entry") or []
            if not isinstance(entries, list):
                yield where, None, "a Bundle whose entry is not a list"
                continue
            for k, entry in enumerate(entries, 1):
                resource = entry.get("resource") if isinstance(entry, dict) else None
                missing = None if resource else "an entry with no resource"
                yield f"{where}, entry {k}", resource, missing
        else:
            yield where, item, None


@dataclass(frozen=True)
class FhirNote:
    """A ``DocumentReference`` read as a note (``text``, its ``subject``), or why it could not
    be (``problem``; ``id`` when it has one): ``where`` it stands in the file or body."""

    where: str
    id: str | None
    text: str | None
    subject: dict[str, Any] | None = None
    problem: str | None = None


def notes_of(text: str) -> Iterator[FhirNote]:
    """The notes of a FHIR JSON document (:func:`resources_of`), each resource that is no
    readable ``DocumentReference`` a problem that says where and why."""
    for where, resource, problem in resources_of(text):
        if resource is None:
            yield FhirNote(where, None, None, problem=problem or "no resource")
            continue
        kind = resource.get("resourceType")
        if kind != "DocumentReference":
            given = resource.get("id")
            known = given if isinstance(given, str) else None
            yield FhirNote(where, known, None, problem=f"a {kind}, not a DocumentReference")
            continue
        note_id, note_text, problem = note_of(resource)
        if note_text is None:
            yield FhirNote(where, note_id, None, problem=problem or "no text")
        elif not note_id:
            yield FhirNote(where, None, None, problem="a DocumentReference with no id")
        else:
            yield FhirNote(where, note_id, note_text, subject_of(resource))


# -- out ---------------------------------------------------------------------------------------
def _coding(e: Entity) -> list[dict[str, Any]]:
    c = e.concept
    if c is None:
        return []
    code = c.code or c.id
    key = c.vocabulary.lower().replace("-", "").replace(" ", "")
    system = SYSTEMS.get(key, f"urn:mslm:vocabulary:{c.vocabulary}")
    return [{"system": system, "code": code, "display": c.name}]


def _span(e: Entity) -> dict[str, Any]:
    return {
        "url": SPAN_EXTENSION,
        "extension": [
            {"url": "start", "valueInteger": e.start},
            {"url": "end", "valueInteger": e.end},
            {"url": "text", "valueString": e.text},
            {"url": "confidence", "valueDecimal": round(e.confidence, 4)},
        ],
    }


_UCUM = "http://unitsofmeasure.org"
_ISO_UNITS = {"D": "d", "W": "wk", "M": "mo", "Y": "a", "TH": "h", "TM": "min"}


def _quantity(q: dict[str, Any] | None) -> dict[str, Any] | None:
    """A normalised quantity (``mslm_core.normalize``) as a FHIR ``Quantity`` (a number
    with its UCUM code; None for a range, a ratio or a word)."""
    if not q or q.get("number") is None:
        return None
    out: dict[str, Any] = {"value": q["number"]}
    if q.get("comparator") in ("<", "<=", ">", ">="):
        out["comparator"] = q["comparator"]
    if q.get("unit"):
        out["unit"] = q["unit"]
    if q.get("ucum"):
        out |= {"system": _UCUM, "code": q["ucum"]}
    return out


def _dosage(med: dict[str, Any]) -> dict[str, Any] | None:
    """A medication's regimen (``mslm_core.facts``) as a FHIR ``Dosage``."""
    parts = [med.get(k) for k in ("dose", "route", "frequency", "duration")]
    if not any(parts):
        return None
    dose, route, frequency, duration = parts
    out: dict[str, Any] = {"text": " ".join(p["text"] for p in parts if p)}
    repeat: dict[str, Any] = {}
    timing = (frequency or {}).get("timing") or {}
    for ours, theirs in (
        ("frequency", "frequency"),
        ("period", "period"),
        ("period_max", "periodMax"),
        ("period_unit", "periodUnit"),
        ("count", "count"),
    ):
        if ours in timing:
            repeat[theirs] = timing[ours]
    if "when" in timing:
        repeat["when"] = [timing["when"]]
    iso = (duration or {}).get("iso8601")
    if iso:
        body = iso[1:]
        key = "T" + body[-1] if body.startswith("T") else body[-1]
        value = float(body.lstrip("T")[:-1])
        code = _ISO_UNITS[key]
        repeat["boundsDuration"] = {"value": value, "unit": code, "system": _UCUM, "code": code}
    if repeat:
        out["timing"] = {"repeat": repeat}
    if timing.get("as_needed"):
        out["asNeededBoolean"] = True
    route_code = (route or {}).get("code")
    if route is not None:
        out["route"] = {"text": route["text"], **({"coding": [route_code]} if route_code else {})}
    quantity = _quantity((dose or {}).get("quantity"))
    if quantity is not None:
        out["doseAndRate"] = [{"doseQuantity": quantity}]
    return out


def resource_for(
    e: Entity,
    note: dict[str, Any],
    subject: dict[str, Any],
    fact: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The FHIR resource an entity makes (None: its type makes none, or it is a family
    member's); ``fact``: the drug's medication or the test's measurement
    (``mslm_core.facts``), which gives ``MedicationStatement.dosage`` and
    ``Observation.value[x]``."""
    kind = RESOURCES.get(e.type.lower())
    a = e.assertion
    if kind is None or (a is not None and a.family):
        return None
    negated = a is not None and a.negated
    past = a is not None and a.historical
    concept = {"text": e.text, **({"coding": _coding(e)} if e.concept else {})}
    base: dict[str, Any] = {"resourceType": kind, "extension": [_span(e)]}
    if kind == "Condition":
        status = "refuted" if negated else "confirmed"
        if not negated and a is not None and (a.possible or a.hypothetical):
            status = "provisional"
        return base | {
            "verificationStatus": {"coding": [{"system": _VERIFICATION, "code": status}]},
            "code": concept,
            "subject": subject,
            "evidence": [{"detail": [note]}],
        }
    if kind == "MedicationStatement":
        status = "not-taken" if negated else "completed" if past else "unknown"
        dosage = _dosage(fact) if fact else None
        return base | {
            "status": status,
            "medicationCodeableConcept": concept,
            "subject": subject,
            "derivedFrom": [note],
            **({"dosage": [dosage]} if dosage else {}),
        }
    if kind == "Procedure":
        status = "not-done" if negated else "completed" if past else "unknown"
        return base | {"status": status, "code": concept, "subject": subject, "report": [note]}
    status = "cancelled" if negated else "unknown"
    value: dict[str, Any] = {}
    if fact:
        quantity = _quantity(fact["value"].get("quantity"))
        value = (
            {"valueQuantity": quantity}
            if quantity is not None
            else {"valueString": fact["value"]["text"]}
        )
    return base | {
        "status": status,
        "code": concept,
        "subject": subject,
        "derivedFrom": [note],
        **value,
    }


def note_resources(
    note_id: str | None,
    entities: Sequence[Entity],
    model: str,
    subject: dict[str, Any] | None = None,
    when: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """A note's resources and their Provenance, each with an ``id`` (a UUID)."""
    note = (
        {"reference": f"DocumentReference/{note_id}"}
        if note_id is not None
        else {"display": "the text annotated"}
    )
    who = subject or {"display": f"the subject of {note.get('reference', 'the text')}"}
    facts = facts_of(entities)
    fact_of = {m["drug"]["entity"]: m for m in facts["medications"]}
    fact_of |= {m["test"]["entity"]: m for m in facts["measurements"]}
    out = []
    for i, e in enumerate(entities):
        resource = resource_for(e, note, who, fact_of.get(i))
        if resource is not None:
            out.append({"id": str(uuid.uuid4()), **resource})
    when = when or dt.datetime.now(dt.UTC)
    provenance = {
        "resourceType": "Provenance",
        "id": str(uuid.uuid4()),
        "target": [{"reference": f"{r['resourceType']}/{r['id']}"} for r in out] or [note],
        "recorded": when.replace(microsecond=0).isoformat(),
        "activity": {"text": "natural language processing (mslm)"},
        "agent": [{"who": {"display": f"mslm model {model}"}}],
        "entity": [{"role": "source", "what": note}],
    }
    return [*out, provenance]


def subject_of(resource: dict[str, Any]) -> dict[str, Any] | None:
    """A ``DocumentReference``'s ``subject`` reference, when it has one."""
    subject = resource.get("subject")
    return subject if isinstance(subject, dict) and subject else None


def bundle(
    texts: Sequence[str],
    entities: Sequence[Sequence[Entity]],
    model: str,
    ids: Sequence[str] | None = None,
    subjects: Sequence[dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """A ``collection`` Bundle of every text's resources (``ids``: the notes'
    ``DocumentReference`` ids, ``subjects`` their subjects; none: the texts are referred to
    by display)."""
    when = dt.datetime.now(dt.UTC)
    entries = []
    for k, ents in enumerate(entities):
        note_id = ids[k] if ids is not None else None
        subject = subjects[k] if subjects is not None else None
        for resource in note_resources(note_id, ents, model, subject, when):
            entries.append({"fullUrl": f"urn:uuid:{resource['id']}", "resource": resource})
    return {
        "resourceType": "Bundle",
        "type": "collection",
        "timestamp": when.replace(microsecond=0).isoformat(),
        "entry": entries,
    }
