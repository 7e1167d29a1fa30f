"""The clinical schema's entity types, and what the steps after prediction do with each.

The types (docs/clinical-schema.md says what each holds and where its mentions come from):
Problem, Drug, Dosage, Test, Result, Procedure, Anatomy. A model's types are matched by name:
a model trained on other types (BC5CDR's Chemical and Disease, a site's own) gets every step
for every type, as before.

- ``context``: the ConText assertion (negated, possible, hypothetical, historical, family) is
  about findings and the tests and procedures done or not done — Problem, Test, Procedure.
  A dose, a value or a body site is not negated or hypothetical by itself (its finding is);
  a drug's assertion ("no aspirin") is what the medication list says, which the rules were not
  written or checked for.
- ``linked``: whether the type is linked to the concept vocabulary (MeSH by default): the
  types with a MeSH branch — Problem (C Diseases, F03 Mental Disorders; signs and symptoms are
  C23), Drug (D Chemicals and Drugs), Test (E01 Diagnosis, E05 Investigative Techniques),
  Procedure (E02–E04, E06 Therapeutics, Surgical Procedures, Dentistry…), Anatomy (A). Dosage
  and Result have none: their entities carry no concept.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TypeSpec:
    holds: str  # what the type's mentions are
    context: bool  # the ConText step applies
    linked: bool  # the linking step applies (the type has a MeSH branch)
    mesh: str = ""  # the MeSH branches its concepts lie in (documentation)


CLINICAL: dict[str, TypeSpec] = {
    "Problem": TypeSpec("diseases, disorders, signs, symptoms, conditions", True, True, "C, F03"),
    "Drug": TypeSpec("medications and other chemicals", False, True, "D"),
    "Dosage": TypeSpec("doses and strengths", False, False),
    "Test": TypeSpec(
        "diagnostic procedures, lab tests, measurements, examinations", True, True, "E01, E05"
    ),
    "Result": TypeSpec("lab values and test results", False, False),
    "Procedure": TypeSpec(
        "therapeutic procedures: surgery, therapy, devices", True, True, "E02–E04, E06"
    ),
    "Anatomy": TypeSpec("body sites, organs and structures", False, True, "A"),
}
CLINICAL_TYPES = tuple(CLINICAL)


def context_applies(entity_type: str) -> bool:
    """Whether the ConText step gives entities of this type an assertion."""
    spec = CLINICAL.get(entity_type)
    return spec is None or spec.context


def linked(entity_type: str) -> bool:
    """Whether the linking step gives entities of this type a concept."""
    spec = CLINICAL.get(entity_type)
    return spec is None or spec.linked
