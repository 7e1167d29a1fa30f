"""A drug's regimen as notes write it: "Metoprolol 25 mg PO BID x5 days", "Albuterol 2 puffs
q4h PRN", "Insulin glargine 20 units SC qHS".

The clinical schema's **Dosage** is the dose or strength with its unit ("25 mg", "2 puffs",
"0.5 mg/kg"): what a model trained on case reports reads as one span ("25 mg PO BID") is cut
here into its dose and the rest — route ("PO", "IV", "SC", "inhaled"), frequency ("BID",
"q4h", "daily", "PRN"), duration ("x5 days", "for 2 weeks") — which :func:`parse` names. A
span that holds no dose at all ("PO BID", "daily") is no Dosage and is dropped; one that
names a dose in words ("high-dose", "reduced dose") is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import pairwise

from .types import Entity, where_free, with_fields

_NUMBER = r"\d+(?:[.,]\d+)*(?:[ \t]?(?:-|–|to)[ \t]?\d+(?:[.,]\d+)*)?(?:/\d+(?:[.,]\d+)*)?"
_UNIT = (
    r"(?:mg|mcg|µg|μg|ug|g|gm|gram|grams|kg|ng|mL|ml|cc|L|l|units?|u|IU|iu|mEq|meq|mmol|"
    r"tabs?|tablets?|caps?|capsules?|puffs?|drops?|gtts|sprays?|patch(?:es)?|suppositor(?:y|ies)|"
    r"inhalations?|vials?|ampules?|amps?|packets?|%|rng)"
)
_PER = r"(?:[ \t]?/[ \t]?(?:kg|m2|m²|day|d|hr|h|hour|min|dose|24[ \t]?h(?:rs?)?))*"
DOSE = re.compile(r"(?<![\w.])" + _NUMBER + r"[ \t]?" + _UNIT + _PER + r"(?![\w/])", re.IGNORECASE)
_WORDED = re.compile(r"\bdos(?:e|es|ed|ing)\b", re.IGNORECASE)

ROUTE = re.compile(
    r"\b(?:PO|p\.o\.|IV|i\.v\.|IVP|IVPB|SC|SQ|subq|subcut|IM|SL|PR|NG|PEG|GT|topical(?:ly)?|"
    r"inhaled|nebulized|neb|transdermal|intranasal|nasal|ophthalmic|otic|oral(?:ly)?|"
    r"intravenous(?:ly)?|subcutaneous(?:ly)?|intramuscular(?:ly)?|sublingual(?:ly)?|by mouth)\b",
    re.IGNORECASE,
)
FREQUENCY = re.compile(
    r"\b(?:q\.?\s?\d+(?:-\d+)?\s?(?:h|hr|hrs|hours?|min)\.?|q\.?(?:d|hs|am|pm|od|week|wk|"
    r"month|day|shift|other day|\d+\s?days?)\.?|b\.?i\.?d\.?|t\.?i\.?d\.?|q\.?i\.?d\.?|"
    r"qhs|qam|qpm|qod|prn|daily|nightly|weekly|monthly|twice (?:a |per )?(?:day|daily|week)|"
    r"(?:once|three times|four times) (?:a |per )?(?:day|daily|week)|every \w+(?: \w+)?|"
    r"at bedtime|in the (?:morning|evening)|w/ meals|with meals|x\s?1|once|stat)\b",
    re.IGNORECASE,
)
DURATION = re.compile(
    r"(?:\bx\s?\d+\s?(?:d|days?|wks?|weeks?|mos?|months?|h|hrs?|doses?)\b|"
    r"\bfor (?:\d+|one|two|three|four|five|six|seven|ten|fourteen) "
    r"(?:more )?(?:days?|weeks?|months?|doses?)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Regimen:
    """What a regimen span says: its doses (character spans), route, frequency and duration
    (the words as written, None when it says none)."""

    doses: tuple[tuple[int, int], ...]
    route: str | None = None
    frequency: str | None = None
    duration: str | None = None


def parse(text: str, start: int = 0, end: int | None = None) -> Regimen:
    """The regimen written in ``text[start:end]`` (offsets into ``text``)."""
    end = len(text) if end is None else end
    piece = text[start:end]
    doses = tuple((start + m.start(), start + m.end()) for m in DOSE.finditer(piece))
    route = ROUTE.search(piece)
    freq = FREQUENCY.search(piece)
    duration = DURATION.search(piece)
    return Regimen(
        doses,
        route.group() if route else None,
        freq.group() if freq else None,
        duration.group() if duration else None,
    )


_REGIMEN_WORDS = re.compile(
    r"(?:\s*(?:" + ROUTE.pattern + "|" + FREQUENCY.pattern + "|" + DURATION.pattern + r"))+\s*",
    re.IGNORECASE,
)


# a unit only a dose is given in (a lab's value has a volume under it: "mEq/L", "mg/dL")
_GIVEN = re.compile(
    _NUMBER + r"[ \t]?(?:mg|mcg|µg|μg|ug|units?|IU|iu|mEq|meq|mmol|tabs?|tablets?|caps?|"
    r"capsules?|puffs?)",
    re.IGNORECASE,
)


def _given(span: str) -> bool:
    """Whether a span read as a Result is a dose: a dose followed by nothing but its route,
    frequency or duration ("2 g IV", "20 mEq PO daily"), or alone in a unit only doses are
    given in ("40 mEq", "26 units"). A test's value written so is typed again by the
    measurements' step, which comes after."""
    m = DOSE.match(span)
    if m is None:
        return False
    rest = span[m.end() :]
    if rest.strip():
        return _REGIMEN_WORDS.fullmatch(rest) is not None
    return _GIVEN.fullmatch(span) is not None


#: the types of a drug's regimen (``mslm_core.relations`` ties them to the drug)
REGIMEN_TYPES = frozenset({"Dosage", "Route", "Frequency", "Duration"})
#: the regimen's parts a model may be trained to find, and the pattern of each
PARTS: dict[str, re.Pattern[str]] = {"Route": ROUTE, "Frequency": FREQUENCY, "Duration": DURATION}


def doses(text: str, entities: Sequence[Entity], parts: Collection[str] = ()) -> list[Entity]:
    """``entities`` with each Dosage cut to its doses (one entity per dose it holds, each with
    the span's scores), and a Dosage that holds no dose dropped unless it names one in words;
    an entity of any other type that is nothing but a route or a frequency ("PO daily", "SC
    qHS") dropped, and a Result that is a dose right after a Drug ("Calcitriol 0.25 mcg") a
    Dosage.

    ``parts``: the regimen types the model has (Route, Frequency, Duration; :data:`PARTS`).
    What a Dosage or a regimen-only entity held besides its doses becomes entities of those
    types ("25 mg PO BID" → Dosage "25 mg", Route "PO", Frequency "BID"), with the span's
    scores, and the entities of those types the model found stay as they are."""
    kept_parts = {k: PARTS[k] for k in parts if k in PARTS}
    out: list[Entity] = []
    last_drug_end = -10
    for e in entities:
        if e.type == "Drug":
            last_drug_end = e.end
        if e.type in kept_parts:
            out.append(e)
            continue
        if e.type == "Result" and _given(e.text):
            e = with_fields(e, type="Dosage")
        if e.type != "Dosage":
            if _REGIMEN_WORDS.fullmatch(e.text):
                out.extend(_parts_of(text, e, kept_parts, ()))
                continue
            if e.type == "Result" and e.start - last_drug_end <= 3 and DOSE.fullmatch(e.text):
                out.append(with_fields(e, type="Dosage"))
                continue
            out.append(e)
            continue
        found = parse(text, e.start, e.end).doses
        if not found:
            if _WORDED.search(e.text):
                out.append(e)
            else:
                out.extend(_parts_of(text, e, kept_parts, ()))
            continue
        pieces = [
            e if (a, b) == (e.start, e.end) else with_fields(e, start=a, end=b, text=text[a:b])
            for a, b in found
        ]
        out.extend(sorted([*pieces, *_parts_of(text, e, kept_parts, found)], key=_at))
    return out


def _at(e: Entity) -> tuple[int, int]:
    return (e.start, e.end)


def _parts_of(
    text: str, e: Entity, parts: dict[str, re.Pattern[str]], taken: Sequence[tuple[int, int]]
) -> list[Entity]:
    """The route, frequency and duration written inside ``e`` outside the spans ``taken``,
    as entities of those types with ``e``'s scores (the first match of each)."""
    out: list[Entity] = []
    busy = list(taken)
    for kind, pattern in parts.items():
        for m in pattern.finditer(text, e.start, e.end):
            a, b = m.span()
            if all(b <= x or y <= a for x, y in busy):
                out.append(with_fields(e, start=a, end=b, text=text[a:b], type=kind))
                busy.append((a, b))
                break
    return out


_CHAIN_GAP = re.compile(r"[ \t]*(?:,|\bfor\b|\bthen\b|\band\b)?[ \t]*", re.IGNORECASE)


def chained(text: str, entities: Sequence[Entity], parts: Collection[str]) -> list[Entity]:
    """``entities`` with the regimen a drug's line writes after it and the model left
    unread: from each Drug, over its doses, routes, frequencies and durations one after
    another (commas, "for", "then" between; never past a line break or a full stop), a dose,
    route, frequency or duration the patterns find and no entity covers becomes an entity of
    that type with the drug's scores ("- Metoprolol 25 mg PO BID": the model's Dosage and
    Route, and "BID" a Frequency). ``parts``: the regimen types the model has."""
    kinds = {k: PARTS[k] for k in parts if k in PARTS}
    if "Dosage" in parts:
        kinds = {"Dosage": DOSE, **kinds}
    if not kinds:
        return list(entities)
    ordered = sorted(entities, key=_at)
    starts = {e.start: e for e in ordered}
    added: list[Entity] = []
    for i, drug in enumerate(ordered):
        if drug.type != "Drug":
            continue
        limit = ordered[i + 1].start if i + 1 < len(ordered) else len(text)
        for e in ordered[i + 1 :]:
            if e.type not in REGIMEN_TYPES:
                limit = e.start
                break
        at = drug.end
        while at < limit:
            gap = _CHAIN_GAP.match(text, at)
            nxt = gap.end() if gap else at
            if nxt >= len(text) or text[nxt] in "\n.;":
                break
            if nxt in starts and starts[nxt].type in REGIMEN_TYPES:
                at = starts[nxt].end
                continue
            # a match never reaches into the next entity
            ahead = min((e.start for e in ordered if e.start >= nxt), default=len(text))
            for kind, pattern in kinds.items():
                m = pattern.match(text, nxt)
                if m and m.end() <= min(limit, ahead):
                    piece = with_fields(
                        drug, start=m.start(), end=m.end(), text=m.group(), type=kind
                    )
                    added.append(piece)
                    at = m.end()
                    break
            else:
                break
    return sorted([*ordered, *added], key=_at) if added else list(entities)


# the endings the USAN Council gives a drug class's names (the "stems": -setron, 5-HT3
# antagonists; -pril, ACE inhibitors; -olol, beta blockers …), only those no common English
# word ends in
_STEMS = (
    "setron", "pril", "olol", "alol", "sartan", "statin", "prazole", "tidine", "dipine",
    "azepam", "azolam", "floxacin", "cillin", "mycin", "cycline", "conazole", "nidazole",
    "parin", "xaban", "gatran", "grel", "gliptin", "gliflozin", "glutide", "tinib", "ximab",
    "zumab", "mumab", "triptan", "dronate", "lukast", "oxetine", "afil", "semide", "thiazide",
    "barbital", "caine", "profen", "coxib", "vudine", "navir", "ciclovir", "tropium",
)  # fmt: skip
_STEMMED = re.compile(r"\b[A-Za-z][a-z]{2,}(?:" + "|".join(_STEMS) + r")\b", re.IGNORECASE)
#: how sure a drug found by its name's stem is (the model did not read it)
STEM_CONFIDENCE = 0.9


def drugs_by_stem(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with each word whose ending is a drug class's USAN stem (:data:`_STEMS`:
    "ondansetron", "lisinopril", "metoprolol") a Drug, where the model found nothing over it."""
    found = [
        Entity(m.start(), m.end(), m.group(), "Drug", *(STEM_CONFIDENCE,) * 3)
        for m in _STEMMED.finditer(text)
    ]
    return where_free(entities, found)


_VOLUME = re.compile(r"(?:\bm?L|\bml|\bcc)$")


def drugs_before_doses(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with a Test or a Procedure right before a Dosage on its line (a space
    between: "Potassium chloride ER 20 mEq PO daily", "iron sucrose 200 mg IV") a Drug: what
    a dose follows is what is given. Not before a volume ("goal UF 3-4 L")."""
    out = list(entities)
    for i, (e, after) in enumerate(pairwise(entities)):
        if (
            e.type in ("Test", "Procedure")
            and after.type == "Dosage"
            and text[e.end : after.start] in (" ", "\t")
            and not _VOLUME.search(after.text)
        ):
            out[i] = with_fields(e, type="Drug")
    return out
