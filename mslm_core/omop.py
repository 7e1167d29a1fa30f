"""Entities as rows of the OMOP CDM v5.4 ``NOTE_NLP`` table (docs/omop.md says why each
column holds what it holds).

- ``lexical_variant``: the entity's text as found; ``offset``: its start, in characters from
  the start of ``note_text`` (the CDM's "character offset of the extracted term"); ``snippet``:
  up to 250 characters of the note around it, line breaks as spaces.
- ``term_exists``: ``N`` when the finding is negated, hypothetical (a rule-out, a
  condition: "if", "return if") or not the patient's (family), as the CDM lists Negation,
  Conditional, Rule_out and Subject; ``Y`` otherwise — a *possible* finding stays ``Y`` (the
  CDM keeps moderate uncertainty as a modifier) and ``term_modifiers`` says ``possible=true``.
  Without clinical context (the job's ``context`` off) it is NULL: nothing was checked.
- ``term_temporal``: ``past`` when historical, else ``present`` (NULL without context).
- ``term_modifiers``: ``key=value`` pairs joined by ``;`` — ``type``, ``confidence``, every
  assertion attribute, ``section``, ``concept`` (``vocabulary:id``) and ``cues``
  (``attribute@start-end``, offsets into the note, joined by ``,``): no value holds ``;`` or
  ``=``, so ``dict(p.split("=", 1) for p in s.split(";"))`` reads it back.
  A modifier tied to its head (``mslm_core.relations``: a dose to its drug, a value to its
  test) adds ``relation`` (its role: dose, route, frequency, duration, value, site,
  severity), ``head`` (the head's ``start-end`` in the note: its row is the one whose
  ``offset`` is that start), ``relation_confidence`` and its normalised value
  (``mslm_core.facts.flat_values``: ``number``, ``comparator``, ``ucum``; ``frequency``,
  ``period``, ``period_unit``, ``as_needed``; ``iso8601``; ``snomed``).
- ``note_nlp_concept_id``: the standard concept of the linked concept, and
  ``note_nlp_source_concept_id`` the concept whose name matched: for a vocabulary imported
  from Athena, the linked OMOP concept id itself (and the non-standard concept it was reached
  from through "Maps to"); for another (MeSH), the OMOP concept of its code in its vocabulary
  (``MeSH`` ``D003924``) and the standard concept that maps to, from the warehouse's own
  ``CONCEPT`` table (a :data:`ConceptIds` lookup); ``section_concept_id`` the LOINC
  section's concept — each 0 when there is none, as the CDM asks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .facts import flat_values
from .types import ASSERTION_ATTRIBUTES, Entity

#: (vocabulary_id, concept_code) → (source concept id, standard concept id), 0 when unknown.
ConceptIds = Callable[[str, str], tuple[int, int]]

NOTE_NLP_COLUMNS = (
    "note_nlp_id",
    "note_id",
    "section_concept_id",
    "snippet",
    "offset",
    "lexical_variant",
    "note_nlp_concept_id",
    "note_nlp_source_concept_id",
    "nlp_system",
    "nlp_date",
    "nlp_datetime",
    "term_exists",
    "term_temporal",
    "term_modifiers",
)

#: Our section categories (``mslm_core/context/sections.json``) → LOINC "Type of Section"
#: codes; a section without one gets ``section_concept_id`` 0.
SECTION_LOINC: dict[str, str] = {
    "chief_complaint": "10154-3",
    "history_of_present_illness": "10164-2",
    "past_medical_history": "11348-0",
    "past_surgical_history": "47519-4",
    "family_history": "10157-6",
    "social_history": "29762-2",
    "medications": "10160-0",
    "allergy": "48765-2",
    "review_of_systems": "10187-3",
    "physical_exam": "29545-1",
    "hospital_course": "8648-8",
    "problem_list": "11450-4",
    "immunizations": "11369-6",
    "labs_and_studies": "30954-2",
    "procedure": "29554-3",
    "observation_and_plan": "51847-2",
    "reason_for_examination": "29299-5",
}

SNIPPET_CHARS = 250
LEXICAL_CHARS = 250
MODIFIER_CHARS = 2000
SYSTEM_CHARS = 250
#: Characters that would break the ``key=value;…`` form of ``term_modifiers``.
_UNSAFE = str.maketrans({";": ",", "=": ":", "\n": " ", "\r": " ", "\t": " "})
_SPACES = str.maketrans({c: " " for c in "\n\r\t\v\f\x85\u2028\u2029"})


def nlp_system(version: str, model_id: str, job_id: str) -> str:
    """The ``nlp_system`` value of a job: name, version, model and job (the job's key for
    idempotent writes)."""
    return f"mslm {version} model={model_id} job={job_id}"[:SYSTEM_CHARS]


def snippet(text: str, start: int, end: int, width: int = SNIPPET_CHARS) -> str:
    """Up to ``width`` characters of ``text`` around ``[start, end)``, centred on the term
    (the term itself cut at ``width`` when longer)."""
    if end - start >= width:
        return text[start : start + width].translate(_SPACES)
    room = width - (end - start)
    left = max(0, start - room // 2)
    right = min(len(text), end + (room - (start - left)))
    left = max(0, right - width)
    return text[left:right].translate(_SPACES)


def term_modifiers(e: Entity) -> str:
    parts = [f"type={e.type.translate(_UNSAFE)}", f"confidence={e.confidence:.4f}"]
    if e.assertion is not None:
        parts += [f"{a}={str(getattr(e.assertion, a)).lower()}" for a in ASSERTION_ATTRIBUTES]
    if e.section:
        parts.append(f"section={e.section.translate(_UNSAFE)}")
    if e.concept is not None:
        code = e.concept.code or e.concept.id
        concept = f"{e.concept.vocabulary}:{code}".translate(_UNSAFE)
        parts.append(f"concept={concept}")
    if e.head is not None:
        parts += [
            f"relation={e.head.role}",
            f"head={e.head.start}-{e.head.end}",
            f"relation_confidence={e.head.confidence:.4f}",
        ]
        parts += [f"{k}={v.translate(_UNSAFE)}" for k, v in flat_values(e).items()]
    if e.assertion is not None and e.assertion.cues:
        cues = ",".join(f"{c.attribute}@{c.start}-{c.end}" for c in e.assertion.cues)
        parts.append(f"cues={cues}")
    out = ";".join(parts)
    return out if len(out) <= MODIFIER_CHARS else out[: out.rfind(";", 0, MODIFIER_CHARS)]


def parse_modifiers(value: str) -> dict[str, str]:
    """``term_modifiers`` read back."""
    return dict(part.split("=", 1) for part in value.split(";") if part)


def term_exists(e: Entity) -> str | None:
    a = e.assertion
    if a is None:
        return None
    return "N" if a.negated or a.hypothetical or a.family else "Y"


def term_temporal(e: Entity) -> str | None:
    if e.assertion is None:
        return None
    return "past" if e.assertion.historical else "present"


def note_nlp_row(
    note_id: int,
    text: str,
    e: Entity,
    *,
    system: str,
    when: dt.datetime,
    concepts: ConceptIds,
    section_ids: Mapping[str, int],
) -> dict[str, Any]:
    """One ``NOTE_NLP`` row (without ``note_nlp_id``, which the writer assigns)."""
    source_id = standard_id = 0
    c = e.concept
    if c is not None and c.concept_id is not None:  # an OMOP vocabulary: the ids themselves
        standard_id = c.concept_id
        source_id = int(c.source_id) if c.source_id and c.source_id.isdigit() else standard_id
    elif c is not None:
        source_id, standard_id = concepts(c.vocabulary, c.code or c.id)
    return {
        "note_id": note_id,
        "section_concept_id": section_ids.get(e.section or "", 0),
        "snippet": snippet(text, e.start, e.end),
        "offset": str(e.start),
        "lexical_variant": e.text[:LEXICAL_CHARS],
        "note_nlp_concept_id": standard_id,
        "note_nlp_source_concept_id": source_id,
        "nlp_system": system,
        "nlp_date": when.date(),
        "nlp_datetime": when.replace(tzinfo=None),
        "term_exists": term_exists(e),
        "term_temporal": term_temporal(e),
        "term_modifiers": term_modifiers(e),
    }


# -- NOTE_NLP as files (no warehouse) ----------------------------------------------------------
def _no_concepts(vocabulary: str, code: str) -> tuple[int, int]:
    return 0, 0


def note_nlp_values(
    note_id: int, text: str, entities: list[Entity], system: str, when: dt.datetime
) -> list[list[Any]]:
    """A note's ``NOTE_NLP`` rows as values in the CDM's column order, without
    ``note_nlp_id`` (the file assigns it) — with no warehouse to look concepts up in: a concept
    of an OMOP vocabulary (imported from Athena) gives its ids, another 0 (its vocabulary and
    code stay in ``term_modifiers``), and ``section_concept_id`` is 0."""
    rows = []
    for e in entities:
        row = note_nlp_row(
            note_id, text, e, system=system, when=when, concepts=_no_concepts, section_ids={}
        )
        rows.append([row[c] for c in NOTE_NLP_COLUMNS[1:]])
    return rows


def csv_field(value: Any) -> str:
    """One CSV field as PostgreSQL's ``COPY … CSV`` and the CDM's loaders read it: NULL
    empty and unquoted, text always quoted (an empty text is ``""``, not NULL), quotes
    doubled; numbers and dates as they print (dates ISO 8601)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def csv_line(values: list[Any]) -> str:
    return ",".join(csv_field(v) for v in values) + "\r\n"


# -- the facts as staging rows: DRUG_EXPOSURE and MEASUREMENT (docs/bulk.md) -------------------
#: The CDM's type concept of a record an NLP system derived from a note (Type Concept "NLP").
NLP_TYPE_CONCEPT_ID = 32858
#: ``operator_concept_id``: the OMOP "Meas Value Operator" concepts of a value's comparator.
OPERATOR_CONCEPT_IDS = {"<": 4171756, "<=": 4171754, "=": 4172703, ">": 4172704, ">=": 4171755}
#: A qualitative value's SNOMED CT qualifier, looked up in the warehouse for
#: ``value_as_concept_id`` (its standard concept: 9191 Positive, 9189 Negative …).
QUALITATIVE_SNOMED = {
    **dict.fromkeys(("positive", "pos", "detected", "reactive"), "10828004"),
    **dict.fromkeys(("negative", "neg", "not detected", "undetectable"), "260385009"),
    **dict.fromkeys(("nonreactive", "non-reactive"), "260385009"),
    **dict.fromkeys(("normal", "unremarkable", "within normal limits", "wnl"), "17621005"),
    "abnormal": "263654008",
    **dict.fromkeys(("high", "elevated", "raised", "increased"), "75540009"),
    **dict.fromkeys(("low", "decreased"), "62482003"),
    "trace": "260405006",
}
SOURCE_VALUE_CHARS = 50
DRUG_EXPOSURE_COLUMNS = (
    "drug_exposure_id",
    "person_id",
    "drug_concept_id",
    "drug_exposure_start_date",
    "drug_exposure_start_datetime",
    "drug_exposure_end_date",
    "drug_type_concept_id",
    "days_supply",
    "sig",
    "route_concept_id",
    "provider_id",
    "visit_occurrence_id",
    "visit_detail_id",
    "drug_source_value",
    "drug_source_concept_id",
    "route_source_value",
    "dose_unit_source_value",
)
MEASUREMENT_COLUMNS = (
    "measurement_id",
    "person_id",
    "measurement_concept_id",
    "measurement_date",
    "measurement_datetime",
    "measurement_type_concept_id",
    "operator_concept_id",
    "value_as_number",
    "value_as_concept_id",
    "unit_concept_id",
    "provider_id",
    "visit_occurrence_id",
    "visit_detail_id",
    "measurement_source_value",
    "measurement_source_concept_id",
    "unit_source_value",
    "value_source_value",
)
#: Our table beside the staged ones: which ``NOTE_NLP`` rows each staged row was made from.
PROVENANCE_TABLE = "nlp_fact_source"
PROVENANCE_COLUMNS = ("fact_table", "fact_id", "note_id", "note_nlp_id", "role", "nlp_system")
PROVENANCE_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} (fact_table varchar(20) NOT NULL, "
    "fact_id integer NOT NULL, note_id integer NOT NULL, note_nlp_id integer NOT NULL, "
    "role varchar(20) NOT NULL, nlp_system varchar(250) NOT NULL)"
)
#: What a staged row is made of, in its provenance rows' ``role``.
DRUG_PARTS = ("drug", "dose", "route", "frequency", "duration")
MEASUREMENT_PARTS = ("test", "value")
_DAYS = {"D": 1, "W": 7}


@dataclass(frozen=True)
class NoteRow:
    """What a staged row takes from its note's ``NOTE`` row."""

    person_id: int
    note_date: dt.date
    note_datetime: dt.datetime | None = None
    provider_id: int | None = None
    visit_occurrence_id: int | None = None
    visit_detail_id: int | None = None


def staged(fact: dict[str, Any]) -> bool:
    """Whether a medication or a measurement of :func:`mslm_core.facts.facts_of` is staged:
    its head was checked by the clinical context (without it, "no aspirin 81 mg" would be an
    exposure) and is the patient's, now: not negated, hypothetical, someone else's, an
    allergy, nor in the past (a past regimen has no date the note gives). A possible one is
    staged, as ``term_exists`` keeps it ``Y``."""
    a = fact.get("assertion")
    return a is not None and not any(
        a[k] for k in ("negated", "hypothetical", "family", "allergy", "historical")
    )


def has_regimen(med: dict[str, Any]) -> bool:
    return any(med[part] for part in DRUG_PARTS[1:])


def iso_days(iso: str | None) -> int | None:
    """Whole days of an ISO 8601 duration of days or weeks, or of hours that make whole days
    (``P3D`` 3, ``P2W`` 14, ``PT48H`` 2); None otherwise (months are no whole number of
    days)."""
    if not iso:
        return None
    if iso.startswith("PT") and iso.endswith("H"):
        hours = float(iso[2:-1])
        return int(hours // 24) if hours % 24 == 0 and hours > 0 else None
    unit = _DAYS.get(iso[-1]) if iso.startswith("P") and "T" not in iso else None
    if unit is None:
        return None
    n = float(iso[1:-1])
    return int(n * unit) if (n * unit).is_integer() and n > 0 else None


def _cut(value: str | None) -> str | None:
    return value[:SOURCE_VALUE_CHARS] if value else None


def _note_columns(note: NoteRow) -> dict[str, Any]:
    return {
        "person_id": note.person_id,
        "provider_id": note.provider_id,
        "visit_occurrence_id": note.visit_occurrence_id,
        "visit_detail_id": note.visit_detail_id,
    }


def fact_codes(facts: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str]]:
    """The (vocabulary, code) pairs the staged rows of ``facts`` look up: routes (SNOMED),
    units (UCUM) and qualitative values (SNOMED)."""
    out: set[tuple[str, str]] = set()
    for med in facts["medications"]:
        route = (med["route"] or {}).get("code")
        if route:
            out.add(("SNOMED", route["code"]))
    for m in facts["measurements"]:
        if m["unit"]:
            out.add(("UCUM", m["unit"]))
        if m["qualitative"] in QUALITATIVE_SNOMED:
            out.add(("SNOMED", QUALITATIVE_SNOMED[m["qualitative"]]))
    return out


def drug_exposure_row(
    med: dict[str, Any], note: NoteRow, drug: tuple[int, int], concepts: ConceptIds
) -> dict[str, Any]:
    """One ``DRUG_EXPOSURE`` row (without its id) of a medication; ``drug``: the drug's
    (standard, source) concept ids, as its ``NOTE_NLP`` row has them."""
    parts = sorted((med[p] for p in DRUG_PARTS[1:] if med[p]), key=lambda p: p["start"])
    days = iso_days((med["duration"] or {}).get("iso8601"))
    end = note.note_date + dt.timedelta(days=days - 1) if days else note.note_date
    route = med["route"]
    route_code = (route or {}).get("code")
    dose = (med["dose"] or {}).get("quantity") or {}
    return {
        **_note_columns(note),
        "drug_concept_id": drug[0],
        "drug_exposure_start_date": note.note_date,
        "drug_exposure_start_datetime": note.note_datetime,
        "drug_exposure_end_date": end,
        "drug_type_concept_id": NLP_TYPE_CONCEPT_ID,
        "days_supply": days,
        "sig": " ".join(p["text"] for p in parts) or None,
        "route_concept_id": (
            concepts("SNOMED", route_code["code"])[1] if route_code else (0 if route else None)
        ),
        "drug_source_value": _cut(med["drug"]["text"]),
        "drug_source_concept_id": drug[1],
        "route_source_value": _cut(route["text"]) if route else None,
        "dose_unit_source_value": _cut(dose.get("unit")),
    }


def measurement_row(
    m: dict[str, Any], note: NoteRow, test: tuple[int, int], concepts: ConceptIds
) -> dict[str, Any]:
    """One ``MEASUREMENT`` row (without its id) of a measurement; ``test``: the test's
    (standard, source) concept ids, as its ``NOTE_NLP`` row has them."""
    quantity = (m["value"] or {}).get("quantity") or {}
    qualitative = QUALITATIVE_SNOMED.get(m["qualitative"] or "")
    number = m["number"]
    return {
        **_note_columns(note),
        "measurement_concept_id": test[0],
        "measurement_date": note.note_date,
        "measurement_datetime": note.note_datetime,
        "measurement_type_concept_id": NLP_TYPE_CONCEPT_ID,
        "operator_concept_id": (
            OPERATOR_CONCEPT_IDS.get(m["comparator"] or "=") if number is not None else None
        ),
        "value_as_number": number,
        "value_as_concept_id": concepts("SNOMED", qualitative)[1] if qualitative else None,
        "unit_concept_id": concepts("UCUM", m["unit"])[1] if m["unit"] else None,
        "measurement_source_value": _cut(m["test"]["text"]),
        "measurement_source_concept_id": test[1],
        "unit_source_value": _cut(quantity.get("unit") or m["unit"]),
        "value_source_value": _cut(m["value"]["text"]),
    }
