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
