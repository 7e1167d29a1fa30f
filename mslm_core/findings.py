"""Findings as a note names them, read after the layout is tidied (``mslm_core.layout``):

- **a word of degree is not the start of a finding**: "severe chest pain" is Severity
  "severe" + Problem "chest pain" (:func:`findings_without_their_severity`);
- **a finding named as such is a Problem**: "hives" or "fever" read as a Test or a Drug is
  retyped when the linker's vocabulary names a finding so and nothing of the model's type
  (:func:`findings_by_name`);
- **a site and its finding that together name one finding are one**: "chest" + "pain" is
  "chest pain" (:func:`findings_with_their_site`);
- **a problem list's title is its problem**: "# Hypokalemia: K nadir 3.0", "# Anemia - iron
  studies …" — the title the model missed is a Problem when the vocabulary names a finding so
  (:func:`problem_list_titles`).

Every entity keeps its scores; offsets stay offsets into the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .shorthand import FOUND_CONFIDENCE
from .types import Entity, with_fields

#: Words of degree ("severe chest pain", "mildly dilated", "trace edema"): the clinical schema's
#: Severity, never the start of a finding (MACCROBAT2020 annotates them apart: severe 92
#: times, mild 67, moderate 20 …; the note-style guidelines likewise). "small" and "large"
#: are left out: they begin names ("small bowel obstruction").
SEVERITY_WORDS = frozenset(
    {"mild", "mildly", "moderate", "moderately", "severe", "severely", "slight", "slightly"}
    | {"marked", "markedly", "minimal", "massive", "extensive", "significant", "trace"}
)


def findings_without_their_severity(
    text: str, entities: Sequence[Entity], severity: bool
) -> list[Entity]:
    """``entities`` with a word of :data:`SEVERITY_WORDS` that begins a Problem cut from it;
    with ``severity`` (the model has the type), the word becomes a Severity of its own (with
    the finding's scores) unless the model's own Severity already covers it."""
    out: list[Entity] = []
    for e in entities:
        first = re.match(r"([A-Za-z]+)[ \t]+(?=\w)", e.text) if e.type == "Problem" else None
        if first is None or first.group(1).lower() not in SEVERITY_WORDS:
            out.append(e)
            continue
        start, word_end = e.start + first.end(), e.start + first.end(1)
        if severity and not any(o.type == "Severity" and o.end > e.start for o in out[-1:]):
            out.append(with_fields(e, type="Severity", end=word_end, text=text[e.start : word_end]))
        out.append(with_fields(e, start=start, text=text[start : e.end]))
    return out


def findings_by_name(
    entities: Sequence[Entity], names_a: Callable[[str, str], bool]
) -> list[Entity]:
    """``entities`` with a Test, Procedure, Drug or Anatomy a Problem where its words are
    exactly the name of a finding and of nothing of its own type (``names_a(text, type)``, the
    linker's: "hives", "weight gain", "fever", "lethargy" read as a Test or a Drug); only words
    of five characters or more with a lower-case letter, as shorthand is the table's to type
    ("HD" is Huntington Disease by name). Never the other way: a Problem named like a procedure
    ("drainage", "dilation") is a sign in a note as often as not."""
    return [
        with_fields(e, type="Problem")
        if e.type in ("Test", "Procedure", "Drug", "Anatomy")
        and len(e.text) >= 5
        and any(c.islower() for c in e.text)
        and names_a(e.text, "Problem")
        and not names_a(e.text, e.type)
        else e
        for e in entities
    ]


def findings_with_their_site(
    text: str, entities: Sequence[Entity], is_finding: Callable[[str], bool]
) -> list[Entity]:
    """``entities`` with a body site and the finding right after it joined into one finding
    where the two together name one (``is_finding``: "chest" + "pain" is Chest Pain,
    "abdominal" + "pain" Abdominal Pain, "abd" + "pain" too where ``is_finding`` spells out
    shorthand; "RUQ" + "pain" names none and stays two) — the site
    typed Anatomy or, where the model split one finding in two, Problem ("abdominal" Problem +
    "pain" Problem; "fever" + "chills" names none). The joined finding has the second's
    scores."""
    out: list[Entity] = []
    for e in entities:
        before = out[-1] if out else None
        if (
            before is not None
            and before.type in ("Anatomy", "Problem")
            and e.type == "Problem"
            and not text[before.end : e.start].strip()
            and "\n" not in text[before.end : e.start]
            and is_finding(text[before.start : e.end])
        ):
            out[-1] = with_fields(e, start=before.start, text=text[before.start : e.end])
            continue
        out.append(e)
    return out


#: A problem list's item: a "#" at the start of a line, then its title up to a colon, a dash
#: set apart ("# AKI - improving") or the line's end.
_TITLE = re.compile(
    r"^[ \t]*#[ \t]*(?P<title>[A-Za-z][^:\n#]{1,48}?)[ \t]*(?::|[ \t]-[ \t]|$)", re.M
)
#: The confidence given to a title found as a problem (:func:`problem_list_titles`): that of
#: shorthand found by its table.
TITLE_CONFIDENCE = FOUND_CONFIDENCE


def problem_list_titles(
    text: str, entities: Sequence[Entity], is_finding: Callable[[str], bool]
) -> list[Entity]:
    """``entities`` with the title of each problem-list item ("# Hypokalemia: …") a Problem
    where the model found nothing over it and ``is_finding`` (the vocabulary names a finding
    so) says it is one."""
    added = []
    for m in _TITLE.finditer(text):
        a, b = m.span("title")
        if any(e.start < b and a < e.end for e in entities) or not is_finding(text[a:b]):
            continue
        c = TITLE_CONFIDENCE
        added.append(Entity(a, b, text[a:b], "Problem", c, c, 1.0))
    return sorted([*entities, *added], key=lambda e: (e.start, e.end)) if added else list(entities)
