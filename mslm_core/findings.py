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
from .types import Entity, where_free, with_fields

#: Words of degree ("severe chest pain", "mildly dilated", "trace edema"): the clinical schema's
#: Severity, never the start of a finding (MACCROBAT2020 annotates them apart: severe 92
#: times, mild 67, moderate 20 …; the note-style guidelines likewise). "small" and "large"
#: are left out: they begin names ("small bowel obstruction").
SEVERITY_WORDS = frozenset(
    {"mild", "mildly", "moderate", "moderately", "severe", "severely", "slight", "slightly"}
    | {"marked", "markedly", "minimal", "massive", "extensive", "significant", "trace"}
)


#: Words a note says of a finding or a patient that name no finding alone ("Hgb 8.9,
#: asymptomatic", "metformin (contraindicated w/ ESRD)", "likely physiologic", "Obscured by
#: bowel gas"): never a Problem by themselves.
NOT_FINDINGS = frozenset(
    {"asymptomatic", "contraindicated", "allergic", "physiologic", "physiological", "stable"}
    | {"obscured", "amenable", "extending", "unremarkable", "normal", "improving", "resolved"}
)


def findings_without_their_severity(
    text: str, entities: Sequence[Entity], severity: bool
) -> list[Entity]:
    """``entities`` with a word of :data:`SEVERITY_WORDS` that begins a Problem cut from it;
    with ``severity`` (the model has the type), the word becomes a Severity of its own (with
    the finding's scores) unless the model's own Severity already covers it, as does a
    Problem that is such a word alone ("Moderate"); and no Problem that is a word of
    :data:`NOT_FINDINGS` alone."""
    out: list[Entity] = []
    for e in entities:
        if e.type == "Problem" and e.text.lower() in NOT_FINDINGS:
            continue
        if e.type == "Problem" and e.text.lower() in SEVERITY_WORDS:  # "Moderate" alone
            if severity:
                out.append(with_fields(e, type="Severity"))
            continue
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


#: What an imaging report finds, in the words radiologists write, none of which names
#: anything else: a Problem where the model found nothing over it ("No free air", "adjacent
#: fat stranding", "wall thickening", "joint space narrowing", "Left base opacity").
IMAGING_FINDINGS = re.compile(
    r"\b(?:free[ \t]+(?:air|fluid)|fat[ \t]+stranding|wall[ \t]+thickening"
    r"|joint[ \t]+space[ \t]+narrowing|opacit(?:y|ies)|hypodensit(?:y|ies)|hyperdensit(?:y|ies)"
    r"|hypoattenuation|consolidations?|air[- \t]fluid[ \t]+levels?|pneumoperitoneum"
    r"|osteopenia|cardiomegaly|lymphadenopathy|cysts?|nodules?|lesions?|effusions?"
    r"|pneumothorax|atelectasis|infiltrates?|hydronephrosis|cholelithiasis|splenomegaly"
    r"|hepatomegaly|ascites|diverticulosis|emphysema|calcifications?)\b",
    re.IGNORECASE,
)


def imaging_findings(
    text: str, entities: Sequence[Entity], headers: Sequence[tuple[int, int]] = ()
) -> list[Entity]:
    """``entities`` with each finding of :data:`IMAGING_FINDINGS` a Problem where nothing was
    found over it and no header stands (``headers``), sure at the shorthand's confidence."""
    return _named(text, entities, IMAGING_FINDINGS, "Problem", headers)


def _named(
    text: str,
    entities: Sequence[Entity],
    pattern: re.Pattern[str],
    type_: str,
    headers: Sequence[tuple[int, int]],
) -> list[Entity]:
    """``entities`` with each match of ``pattern`` an entity of ``type_`` where nothing was
    found over it and it is on no header."""
    found = [
        Entity(m.start(), m.end(), m.group(), type_, *(FOUND_CONFIDENCE,) * 3)
        for m in pattern.finditer(text)
        if not any(a < m.end() and m.start() < b for a, b in headers)
    ]
    return where_free(entities, found)


#: A word built on a surgical suffix ("-ectomy", "-plasty", "-otomy", "-ostomy", "-centesis",
#: "-pexy", "-rrhaphy") names a procedure; so do a joint's replacement, an amputation,
#: dialysis, a transfusion, a stent and the like.
PROCEDURE_WORDS = re.compile(
    r"\b(?:[A-Za-z]{2,}(?:ectomy|ectomies|plasty|plasties|otomy|ostomy|centesis|pexy|rrhaphy)"
    r"|(?:hip|knee|shoulder|joint|valve)[ \t]+replacement|amputation|(?:hemo)?dialysis"
    r"|intubation|extubation|transfusions?|debridement|cardioversion|ablation|stents?)\b",
    re.IGNORECASE,
)


def procedures_by_name(
    text: str, entities: Sequence[Entity], headers: Sequence[tuple[int, int]] = ()
) -> list[Entity]:
    """``entities`` with each procedure :data:`PROCEDURE_WORDS` names a Procedure where
    nothing was found over it and no header stands (``headers``), sure at the shorthand's
    confidence."""
    return _named(text, entities, PROCEDURE_WORDS, "Procedure", headers)


#: A limb or a part of the body an exam looks at, with its side ("R hip", "L leg", "Calves",
#: "Sclerae"), and what a note writes right after one: a finding of it ("leg edema", "R hip
#: fracture") or the exam's word for it ("Calves soft", "Sclerae anicteric").
_SITE = (
    r"(?:(?:L|R|left|right|bilateral|bilat|B/L)[ \t]+)?"
    r"(?:legs?|arms?|foot|feet|hips?|knees?|ankles?|hands?|calf|calves|thighs?|wrists?"
    r"|shoulders?|elbows?|sclerae|abdomen|neck|incision)"
)
_SITE_THEN = re.compile(
    r"(?P<site>" + _SITE + r")[ \t]+(?:(?P<finding>edema|swelling|weakness|fracture|numbness)"
    r"|(?P<result>soft|anicteric|non-?tender|intact|c/d/i|supple|warm)"
    r"|(?P<care>incision|dressing))",
    re.IGNORECASE,
)


def findings_cut_from_their_site(
    text: str, entities: Sequence[Entity], is_finding: Callable[[str], bool]
) -> list[Entity]:
    """``entities`` with a Problem read over a site and what the note says of it cut in two,
    as the guidelines annotate them (:data:`_SITE_THEN`): the site an Anatomy, the rest a
    Problem ("L leg" + "swelling") or the exam's Result ("Calves" + "soft"), each with the
    span's scores — unless the two together name one finding (``is_finding``); and a
    Procedure read over a site and its dressing or incision ("R hip dressing") the site alone,
    an Anatomy (the guidelines annotate no dressing)."""
    out: list[Entity] = []
    for e in entities:
        m = _SITE_THEN.fullmatch(e.text)
        if m is None or (e.type, bool(m.group("care"))) not in (
            ("Problem", False),
            ("Procedure", True),
        ):
            out.append(e)
            continue
        if m.group("care"):
            parts = [("site", "Anatomy")]
        elif is_finding(e.text):
            out.append(e)
            continue
        else:
            parts = [
                ("site", "Anatomy"),
                ("finding", "Problem") if m.group("finding") else ("result", "Result"),
            ]
        for group, type_ in parts:
            a, b = e.start + m.start(group), e.start + m.end(group)
            out.append(with_fields(e, start=a, end=b, text=text[a:b], type=type_))
    return out
