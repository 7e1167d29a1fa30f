"""The clinical schema's entity types, and what the steps after prediction do with each.

The types (docs/clinical-schema.md says what each holds and where its mentions come from):
Problem, Drug, Dosage, Test, Result, Procedure, Anatomy, and the modifiers a relation ties to
a drug or a finding (``mslm_core.relations``): Route, Frequency, Duration, Severity. A model's
types are matched by name: a model trained on other types (BC5CDR's Chemical and Disease, a
site's own) gets every step for every type, as before.

- ``context``: the assertion attributes the ConText step sets on the type's entities. All of
  them (negated, possible, hypothetical, historical, family, allergy) are about findings and
  the tests and procedures done or not done — Problem, Test, Procedure. A drug gets ``allergy``
  alone ("allergic to penicillin", the Allergies section): its other attributes ("no
  aspirin") are what the medication list says, which the rules were not written or checked
  for. A dose, a value, a body site, a route, a frequency, a duration or a severity is not
  negated or hypothetical by itself (its head is): none. Every entity gets its ``section``
  all the same.
- ``linked``: whether the type is linked to the concept vocabulary (MeSH by default): the
  types with a MeSH branch — Problem (C Diseases, F03 Mental Disorders; signs and symptoms are
  C23), Drug (D Chemicals and Drugs), Test (E01 Diagnosis, E05 Investigative Techniques),
  Procedure (E02–E04, E06 Therapeutics, Surgical Procedures, Dentistry…), Anatomy (A). Dosage,
  Result and the regimen's and finding's modifiers have none: they carry no concept.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import ASSERTION_ATTRIBUTES

ALL_ATTRIBUTES = tuple(ASSERTION_ATTRIBUTES)


@dataclass(frozen=True)
class TypeSpec:
    holds: str  # what the type's mentions are
    context: tuple[str, ...]  # the assertion attributes the ConText step sets (): none
    linked: bool  # the linking step applies (the type has a MeSH branch)
    mesh: str = ""  # the MeSH branches its concepts lie in (documentation)


CLINICAL: dict[str, TypeSpec] = {
    "Problem": TypeSpec(
        "diseases, disorders, signs, symptoms, conditions", ALL_ATTRIBUTES, True, "C, F03"
    ),
    "Drug": TypeSpec("medications and other chemicals", ALL_ATTRIBUTES, True, "D"),
    "Dosage": TypeSpec("doses and strengths", (), False),
    "Test": TypeSpec(
        "diagnostic procedures, lab tests, measurements, examinations",
        ALL_ATTRIBUTES,
        True,
        "E01, E05",
    ),
    "Result": TypeSpec("lab values and test results", (), False),
    "Procedure": TypeSpec(
        "therapeutic procedures: surgery, therapy, devices",
        ALL_ATTRIBUTES,
        True,
        "E02–E04, E06",
    ),
    "Anatomy": TypeSpec("body sites, organs and structures", (), True, "A"),
    "Route": TypeSpec("how a drug is given: PO, IV, inhaled, topical", (), False),
    "Frequency": TypeSpec("how often a drug is given: BID, q4h, daily, as needed", (), False),
    "Duration": TypeSpec("how long a drug is given or a finding lasts: for 3 days", (), False),
    "Severity": TypeSpec("how severe a finding is: mild, severe, grade 3", (), False),
}
CLINICAL_TYPES = tuple(CLINICAL)


def context_attributes(entity_type: str) -> tuple[str, ...]:
    """The assertion attributes the ConText step sets on entities of this type (a type outside
    the clinical schema: all of them)."""
    spec = CLINICAL.get(entity_type)
    return ALL_ATTRIBUTES if spec is None else spec.context


def context_applies(entity_type: str) -> bool:
    """Whether the ConText step gives entities of this type an assertion."""
    return bool(context_attributes(entity_type))


def linked(entity_type: str) -> bool:
    """Whether the linking step gives entities of this type a concept."""
    spec = CLINICAL.get(entity_type)
    return spec is None or spec.linked
