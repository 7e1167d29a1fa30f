"""The sections of a clinical note: History of Present Illness, Past Medical
History, Family History, Medications, Allergies, Assessment and Plan, Review of Systems…

A header is a known phrase at the start of a line — after whitespace, a bullet or a number —
case-insensitive, followed by ``:`` or by the end of its line ("FAMILY HISTORY:", "Meds:",
"ROS"); its section runs to the next header. The phrases are rules in the context rules'
format (``literal``, ``category``, optional ``pattern``, ``source``), from medspaCy's
sectionizer and our own (``sections.json``); a site's rules file adds its own under
``"sections"`` (the same phrase: the site's category) and may map more sections to the
attributes they set under ``"section_attributes"``. Every entity carries its section's
category; a section in ``attributes`` (Family History → family, Past Medical/Surgical History →
historical, Allergies → allergy) sets that attribute on every entity in it, the header as its
cue.

One regular expression over the whole text: linear in its length.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ..errors import ConfigError
from ..types import ASSERTION_ATTRIBUTES
from .phrases import expand, words


@dataclass(frozen=True)
class SectionRules:
    """Header phrases (lower-cased word sequences) → section category, and what a section
    sets on its entities (category → attribute)."""

    headers: dict[tuple[str, ...], str] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    origin: str = ""

    def __bool__(self) -> bool:
        return bool(self.headers)

    def extended_by(self, site: SectionRules) -> SectionRules:
        return SectionRules(
            {**self.headers, **site.headers},
            {**self.attributes, **site.attributes},
            f"{self.origin} + {site.origin}" if site.origin else self.origin,
        )

    def pattern(self) -> re.Pattern[str]:
        """The header expression: longest phrases first, words apart by spaces or
        punctuation runs as they appear ("a/p", "a & p", "past medical / surgical history").
        A header starts a line (after a bullet or a number) and ends with ``:`` or its line,
        a remark in brackets allowed before either ("OUTPATIENT MEDICATIONS (per pt's
        bottles)"), or a qualifier in capitals after a dash before the end
        ("MEDICATIONS - HEMODIALYSIS UNIT");
        or, in a note whose lines were joined, follows a sentence's end and ends with ``:``
        ("… was stable. Family history: …")."""

        def phrase(ws: tuple[str, ...]) -> str:
            return r"[ \t]*".join(ocr_tolerant(w) for w in ws)

        ordered = sorted(self.headers, key=lambda p: (-len(" ".join(p)), p))
        alternatives = "|".join(f"(?:{phrase(p)})" for p in ordered) or r"(?!)"
        return re.compile(
            r"(?:^[ \t]*(?:[-*\u2022]|\d{1,2}[.)])?[ \t]*(?P<line>"
            + alternatives
            + r")[ \t]*"
            + _REMARK
            + r"(?:[:;]|$))|(?:(?<=[.!?;] )(?P<inline>"
            + alternatives
            + r")[ \t]*:)",
            re.IGNORECASE | re.MULTILINE,
        )


# what may follow a header on its line: a remark in brackets ("(reviewed 6/12)") or, after a
# dash, a qualifier in capitals that ends the line ("MEDICATIONS - HEMODIALYSIS UNIT")
_REMARK = (
    r"(?:\([^()\n]{1,60}\)[ \t]*"
    r"|(?-i:[-\u2013][ \t]+[A-Z0-9][^a-z\n:;()]{0,40}?[ \t]*(?=[:;]?[ \t]*$)))?"
)

# What a scanner or a fax makes of a header's letters ("HISTORY 0F PRESENT ILLNESS",
# "lMPRESSlON", "ASSESSRNENT"): each letter matches its look-alikes, and a matched header is
# looked up by its folded form.
_LOOK_ALIKES = {
    "o": "[o0]",
    "i": "[il1|]",
    "l": "[il1|]",
    "s": "[s5]",
    "m": "(?:m|rn)",
    "b": "[b8]",
}
_FOLD = str.maketrans({"0": "o", "1": "i", "|": "i", "l": "i", "5": "s", "8": "b"})


def ocr_tolerant(word: str) -> str:
    """``word`` (lower case) as a pattern that also matches it as a scanner writes it."""
    return "".join(_LOOK_ALIKES.get(c, re.escape(c)) for c in word)


def ocr_folded(phrase: str) -> str:
    """``phrase`` (lower case) with look-alike characters folded: what a header is looked up
    by, whatever a scanner did to it."""
    return phrase.replace("rn", "m").translate(_FOLD)


def parse_sections(document: Mapping[str, Any], origin: str) -> SectionRules:
    """The ``sections`` and ``section_attributes`` (or ``attributes``) of a rules document;
    errors name the file, the rule and the field."""
    headers: dict[tuple[str, ...], str] = {}
    raw = document.get("sections") or []
    if not isinstance(raw, list):
        raise ConfigError(f"{origin}: 'sections' must be a list of rules")
    for i, rule in enumerate(raw):
        where = f"{origin}: sections[{i}]"
        if not isinstance(rule, dict):
            raise ConfigError(f"{where}: a section rule must be an object")
        unknown = set(rule) - {"literal", "category", "pattern", "source", "comment"}
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
        literal, category = rule.get("literal"), rule.get("category")
        if not isinstance(literal, str) or not words(literal):
            raise ConfigError(f"{where}: field 'literal': must be a string holding a word")
        if not isinstance(category, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", category):
            raise ConfigError(
                f"{where} ({literal!r}): field 'category': a lower-case name (a-z, 0-9, _)"
            )
        pattern = rule.get("pattern")
        for phrase in expand(pattern, where) if pattern is not None else (words(literal),):
            headers[phrase] = category
    attributes = document.get("section_attributes", document.get("attributes")) or {}
    if not isinstance(attributes, dict):
        raise ConfigError(f"{origin}: 'section_attributes' must map a category to an attribute")
    for category, attribute in attributes.items():
        if attribute not in ASSERTION_ATTRIBUTES:
            raise ConfigError(
                f"{origin}: section_attributes.{category}: must be one of "
                + ", ".join(ASSERTION_ATTRIBUTES)
            )
    return SectionRules(headers, dict(attributes), origin if headers or attributes else "")


def default_sections() -> SectionRules:
    text = resources.files(__package__).joinpath("sections.json").read_text(encoding="utf-8")
    return parse_sections(json.loads(text), "mslm_core/context/sections.json")


@dataclass(frozen=True)
class Section:
    category: str
    start: int  # the header's start: the section runs from here to the next one
    header_start: int
    header_end: int
    header: str
    #: found inside a line, after a sentence's end ("… was stable. Family history: …"): the
    #: attribute it sets reaches the end of that line only (in a note whose lines were
    #: joined, the whole note)
    inline: bool = False


class Sectionizer:
    """``sectionizer.find(text)`` → the sections in order."""

    def __init__(self, rules: SectionRules):
        self.rules = rules
        self._pattern = rules.pattern()
        self._category = {ocr_folded(" ".join(p)): c for p, c in rules.headers.items()}

    def find(self, text: str) -> list[Section]:
        out = []
        for m in self._pattern.finditer(text):
            group = "line" if m.group("line") is not None else "inline"
            a, b = m.span(group)
            category = self._category.get(ocr_folded(" ".join(words(text[a:b]))))
            if category is not None:
                out.append(Section(category, a, a, b, text[a:b], group == "inline"))
        return out

    @staticmethod
    def at(sections: list[Section], starts: list[int], offset: int) -> Section | None:
        """The section holding character ``offset`` (``starts``: the sections' starts)."""
        k = bisect.bisect_right(starts, offset) - 1
        return sections[k] if k >= 0 else None
