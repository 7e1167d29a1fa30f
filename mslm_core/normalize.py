"""What a regimen's and a measurement's words mean, as values an analyst can count with:

- :func:`quantity` — a result or a dose: a number, a range or a comparator ("< 0.01"), and
  its unit as a **UCUM** code ("mcg" → ``ug``, "mmHg" → ``mm[Hg]``, "x10^9/L" → ``10*9/L``);
  a qualitative result ("positive", "normal") kept as its word;
- :func:`timing` — a frequency as FHIR's ``Timing.repeat`` counts it ("BID" → 2 per 1 d,
  "q4-6h" → 1 per 4–6 h, "PRN" → as needed, "qHS" → at bedtime);
- :func:`duration` — an ISO 8601 duration ("for 3 days" → ``P3D``, "x48h" → ``PT48H``);
- :func:`route` — a SNOMED CT route of administration ("PO" → 26643006 Oral route).

Units: the notes' spellings are mapped to UCUM codes by :data:`UNITS` (a table, since notes
write "mcg", "cc", "units" and "mmHg", which are no UCUM codes), and every code the table
or a note gives is checked with ``ucumvert``'s parser of the UCUM grammar (the official
ucum-essence definitions; MIT): a written unit that is already valid UCUM ("mg/dL",
"mmol/L") is kept as it is, one that is neither is returned as written with no code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# written unit (lower case, spaces removed) → UCUM code
UNITS: dict[str, str] = {
    "mcg": "ug",
    "µg": "ug",
    "μg": "ug",
    "ug": "ug",
    "gm": "g",
    "gram": "g",
    "grams": "g",
    "cc": "mL",
    "ml": "mL",
    "l": "L",
    "dl": "dL",
    "unit": "[iU]",
    "units": "[iU]",
    "u": "[iU]",
    "iu": "[iU]",
    "meq": "meq",
    "mmhg": "mm[Hg]",
    "bpm": "/min",
    "/min": "/min",
    "breaths/min": "/min",
    "beats/min": "/min",
    "c": "Cel",
    "°c": "Cel",
    "degc": "Cel",
    "f": "[degF]",
    "°f": "[degF]",
    "degf": "[degF]",
    "x10^9/l": "10*9/L",
    "x10e9/l": "10*9/L",
    "10^9/l": "10*9/L",
    "x10^3/ul": "10*3/uL",
    "k/ul": "10*3/uL",
    "x10^12/l": "10*12/L",
    "/ul": "/uL",
    "/mm3": "/mm3",
    "mg/dl": "mg/dL",
    "g/dl": "g/dL",
    "ng/ml": "ng/mL",
    "pg/ml": "pg/mL",
    "mg/l": "mg/L",
    "mmol/l": "mmol/L",
    "umol/l": "umol/L",
    "µmol/l": "umol/L",
    "meq/l": "meq/L",
    "iu/l": "[iU]/L",
    "u/l": "U/L",
    "ml/min": "mL/min",
    "ml/min/1.73m2": "mL/min/{1.73_m2}",
    "kg": "kg",
    "lb": "[lb_av]",
    "lbs": "[lb_av]",
    "cm": "cm",
    "mm": "mm",
    "in": "[in_i]",
    "%": "%",
    "tab": "{tbl}",
    "tabs": "{tbl}",
    "tablet": "{tbl}",
    "tablets": "{tbl}",
    "cap": "{capsule}",
    "caps": "{capsule}",
    "capsule": "{capsule}",
    "capsules": "{capsule}",
    "puff": "{puff}",
    "puffs": "{puff}",
    "drop": "[drp]",
    "drops": "[drp]",
    "gtt": "[drp]",
    "gtts": "[drp]",
    "spray": "{spray}",
    "sprays": "{spray}",
    "patch": "{patch}",
    "patches": "{patch}",
    "mg/kg/day": "mg/kg/d",
    "mg/kg/d": "mg/kg/d",
    "mg/day": "mg/d",
    "mg/d": "mg/d",
    "mcg/kg/min": "ug/kg/min",
    "mg/h": "mg/h",
    "mg/hr": "mg/h",
    "units/h": "[iU]/h",
    "units/hr": "[iU]/h",
    "units/kg": "[iU]/kg",
    "mg/m2": "mg/m2",
    "mg/m²": "mg/m2",
}
#: What a result says in words of itself (patterns, any case): "negative", "not detected".
FINDINGS_IN_WORDS = (
    "normal",
    "abnormal",
    "positive",
    "negative",
    "pos",
    "neg",
    "unremarkable",
    "detected",
    "not detected",
    "undetectable",
    "reactive",
    "non-?reactive",
    "within normal limits",
    "wnl",
)
#: A result's degree in words: "elevated", "low", "trace".
DEGREES_IN_WORDS = ("elevated", "high", "low", "raised", "decreased", "increased", "trace")
_QUALITATIVE = re.compile(
    r"^(?:" + "|".join((*FINDINGS_IN_WORDS, *DEGREES_IN_WORDS)) + r")$", re.IGNORECASE
)
_NUMBER = r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?|[-+]?\.\d+"
_VALUE = re.compile(
    r"^\s*(?P<cmp><=|>=|≤|≥|<|>|~|approximately|about|less than|greater than|up to)?\s*"
    r"(?P<a>" + _NUMBER + r")"
    r"(?:\s*(?:-|–|to)\s*(?P<b>" + _NUMBER + r")|\s*/\s*(?P<c>" + _NUMBER + r"))?"
    r"\s*(?P<unit>.*?)\s*$",
    re.IGNORECASE,
)
_COMPARATORS = {
    "<=": "<=",
    "≤": "<=",
    ">=": ">=",
    "≥": ">=",
    "<": "<",
    ">": ">",
    "less than": "<",
    "greater than": ">",
    "up to": "<=",
    "~": "~",
    "approximately": "~",
    "about": "~",
}


@lru_cache(maxsize=1)
def _parser() -> Any:
    from ucumvert import get_ucum_parser

    return get_ucum_parser()


@lru_cache(maxsize=4096)
def is_ucum(code: str) -> bool:
    """Whether ``code`` is a valid UCUM expression (``ucumvert``'s grammar of the UCUM
    definitions)."""
    if not code or any(c.isspace() for c in code):
        return False
    try:
        _parser().parse(code)
    except Exception:  # lark's UnexpectedInput and its kin: not UCUM
        return False
    return True


def ucum(unit: str) -> str | None:
    """The UCUM code of a unit as notes write it (None: no known unit)."""
    written = unit.strip().rstrip(".")
    if not written:
        return None
    key = re.sub(r"\s+", "", written).lower()
    code = UNITS.get(key)
    if code is None:
        code = written if is_ucum(written) else None
    return code if code is not None and is_ucum(code) else None


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass(frozen=True)
class Quantity:
    """A value as written: ``number`` (or ``low``–``high``, or the two numbers of a ratio
    such as a blood pressure, ``numbers``), a ``comparator`` (``<``, ``<=``, ``>``, ``>=``,
    ``~``), the ``unit`` as written and its UCUM code; or ``qualitative`` ("positive")."""

    number: float | None = None
    low: float | None = None
    high: float | None = None
    numbers: tuple[float, ...] | None = None
    comparator: str | None = None
    unit: str | None = None
    ucum: str | None = None
    qualitative: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in self.__dict__.items()
            if v is not None
        }


def quantity(text: str, unit_hint: str | None = None) -> Quantity | None:
    """The value a result or a dose writes (None: neither a number nor a known word);
    ``unit_hint``: the unit to assume when none is written (a vital sign's: "HR 102" →
    ``/min``)."""
    stripped = text.strip()
    if _QUALITATIVE.match(stripped):
        return Quantity(qualitative=stripped.lower())
    m = _VALUE.match(stripped)
    if m is None:
        return None
    unit = m["unit"] or None
    code = ucum(unit) if unit else (unit_hint or None)
    if unit is not None and code is None:
        # trailing words that are no unit ("12 on admission"): the number alone
        first = unit.split()[0]
        code = ucum(first)
        unit = first if code is not None else None
    cmp = _COMPARATORS.get((m["cmp"] or "").lower())
    a = _number(m["a"])
    if m["b"] is not None:
        return Quantity(low=a, high=_number(m["b"]), comparator=cmp, unit=unit, ucum=code)
    if m["c"] is not None:
        return Quantity(numbers=(a, _number(m["c"])), comparator=cmp, unit=unit, ucum=code)
    return Quantity(number=a, comparator=cmp, unit=unit, ucum=code)


# -- timing -------------------------------------------------------------------------------------
_WORD_NUMBERS = {
    "once": 1,
    "one": 1,
    "twice": 2,
    "two": 2,
    "three": 3,
    "thrice": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "ten": 10,
    "twelve": 12,
    "fourteen": 14,
}
_PERIODS = {
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "min": "min",
    "minute": "min",
    "minutes": "min",
    "d": "d",
    "day": "d",
    "days": "d",
    "wk": "wk",
    "wks": "wk",
    "week": "wk",
    "weeks": "wk",
    "mo": "mo",
    "mos": "mo",
    "month": "mo",
    "months": "mo",
    "y": "a",
    "yr": "a",
    "year": "a",
    "years": "a",
}
_LATIN = {
    "qd": (1, 1, "d", None),
    "od": (1, 1, "d", None),
    "daily": (1, 1, "d", None),
    "once daily": (1, 1, "d", None),
    "once a day": (1, 1, "d", None),
    "bid": (2, 1, "d", None),
    "tid": (3, 1, "d", None),
    "qid": (4, 1, "d", None),
    "qod": (1, 2, "d", None),
    "every other day": (1, 2, "d", None),
    "qhs": (1, 1, "d", "HS"),
    "hs": (1, 1, "d", "HS"),
    "at bedtime": (1, 1, "d", "HS"),
    "nightly": (1, 1, "d", "HS"),
    "qam": (1, 1, "d", "MORN"),
    "in the morning": (1, 1, "d", "MORN"),
    "qpm": (1, 1, "d", "EVE"),
    "in the evening": (1, 1, "d", "EVE"),
    "weekly": (1, 1, "wk", None),
    "monthly": (1, 1, "mo", None),
    "with meals": (3, 1, "d", "C"),
    "w/ meals": (3, 1, "d", "C"),
}
_EVERY = re.compile(
    r"^(?:q\.?\s?|every\s+)(?P<n>\d+|one|two|three|four|six|eight|twelve)?"
    r"(?:\s*(?:-|–|to)\s*(?P<m>\d+))?\s*(?P<unit>[a-z]+)\.?$"
)
_TIMES = re.compile(
    r"^(?P<n>\d+|once|twice|thrice|three|four|five|six)(?:\s*(?:x|times))?\s*"
    r"(?:a|per|/|each|every)?\s*(?P<unit>day|daily|d|week|wk|month|hour|h)$"
)
_PRN = re.compile(r"\b(?:prn|p\.r\.n\.?|as needed|as required)\b", re.IGNORECASE)


def timing(text: str) -> dict[str, Any] | None:
    """A frequency as FHIR ``Timing.repeat`` counts it: ``frequency`` per ``period``
    ``period_unit`` (UCUM: h, d, wk, mo, a; ``period_max`` for a range "q4-6h"), ``when``
    (HS: at bedtime, MORN, EVE, C: with meals), ``as_needed``, ``count`` (a one-off: "x1",
    "once", "stat"); None when it says none of these."""
    said = text.strip().lower().rstrip(".")
    as_needed = bool(_PRN.search(said))
    core = _PRN.sub("", said).strip(" ,")
    flat = re.sub(r"(?<=\w)\.(?=\w)|\.$", "", core)  # "b.i.d." → "bid"
    out: dict[str, Any] = {}
    if flat in _LATIN:
        times, period, per, when = _LATIN[flat]
        out = {"frequency": times, "period": period, "period_unit": per}
        if when:
            out["when"] = when
    elif flat in ("x1", "x 1", "once", "stat", "one time"):
        out = {"count": 1}
    elif m := _EVERY.match(flat):
        every = _PERIODS.get(m["unit"])
        if every is None:
            return {"as_needed": True} if as_needed else None
        said_n = m["n"] or "1"
        out = {
            "frequency": 1,
            "period": int(said_n) if said_n.isdigit() else _WORD_NUMBERS.get(said_n, 1),
            "period_unit": every,
        }
        if m["m"]:
            out["period_max"] = int(m["m"])
    elif m := _TIMES.match(flat):
        count = m["n"]
        per_unit = {"daily": "d", "day": "d", "week": "wk", "month": "mo", "hour": "h"}.get(
            m["unit"], m["unit"]
        )
        out = {
            "frequency": int(count) if count.isdigit() else _WORD_NUMBERS[count],
            "period": 1,
            "period_unit": per_unit,
        }
    elif not core:
        out = {}
    else:
        return {"as_needed": True} if as_needed else None
    if as_needed:
        out["as_needed"] = True
    return out or None


_DURATION = re.compile(
    r"^(?:x|for|over|during|times)?\s*(?:the\s+)?(?:next\s+|more\s+|another\s+)?"
    r"(?P<n>\d+(?:\.\d+)?|a|an|one|two|three|four|five|six|seven|eight|ten|twelve|fourteen)"
    r"(?:\s*(?:-|–|to)\s*(?P<m>\d+))?\s*(?:more\s+)?(?P<unit>[a-z]+)\.?$"
)
_ISO = {"h": ("T", "H"), "min": ("T", "M"), "d": ("", "D"), "wk": ("", "W"), "mo": ("", "M")}
_ISO["a"] = ("", "Y")


def duration(text: str) -> str | None:
    """An ISO 8601 duration ("for 3 days" → ``P3D``, "x 48 h" → ``PT48H``, "2 weeks" →
    ``P2W``; a range "5-7 days" → its longest, ``P7D``); None for what is no duration
    ("x 3 doses")."""
    m = _DURATION.match(text.strip().lower())
    if m is None:
        return None
    unit = _PERIODS.get(m["unit"])
    if unit is None:
        return None
    raw = m["m"] or m["n"]
    n = float(raw) if raw[0].isdigit() else float(_WORD_NUMBERS.get(raw, 1))
    amount = str(int(n)) if n.is_integer() else str(n)
    time, letter = _ISO[unit]
    return f"P{time}{amount}{letter}"


# -- routes -------------------------------------------------------------------------------------
#: SNOMED CT routes of administration (the "Route of administration value" hierarchy, which
#: FHIR's Dosage.route and OMOP's DRUG_EXPOSURE.route take): code, display
ROUTES: dict[str, tuple[str, str]] = {
    "oral": ("26643006", "Oral route"),
    "intravenous": ("47625008", "Intravenous route"),
    "subcutaneous": ("34206005", "Subcutaneous route"),
    "intramuscular": ("78421000", "Intramuscular route"),
    "sublingual": ("37839007", "Sublingual route"),
    "topical": ("6064005", "Topical route"),
    "transdermal": ("45890007", "Transdermal route"),
    "rectal": ("37161004", "Per rectum"),
    "nasal": ("46713006", "Nasal route"),
    "ophthalmic": ("54485002", "Ophthalmic route"),
    "otic": ("10547007", "Otic route"),
    "inhalation": ("447694001", "Respiratory tract route"),
    "nasogastric": ("127492001", "Nasogastric route"),
    "gastrostomy": ("127490009", "Gastrostomy route"),
}
_ROUTE_WORDS = {
    "oral": (
        "po",
        "p.o.",
        "p.o",
        "oral",
        "orally",
        "by mouth",
        "per os",
        "enteral",
        "per oral",
    ),
    "intravenous": (
        "iv",
        "i.v.",
        "i.v",
        "ivp",
        "ivpb",
        "intravenous",
        "intravenously",
        "iv push",
        "iv infusion",
        "infusion",
    ),
    "subcutaneous": ("sc", "sq", "subq", "subcut", "s.c.", "subcutaneous", "subcutaneously"),
    "intramuscular": ("im", "i.m.", "intramuscular", "intramuscularly"),
    "sublingual": ("sl", "sublingual", "sublingually"),
    "topical": ("topical", "topically"),
    "transdermal": ("transdermal", "patch"),
    "rectal": ("pr", "rectal", "rectally", "per rectum"),
    "nasal": ("intranasal", "nasal", "nasally"),
    "ophthalmic": ("ophthalmic", "eye drops"),
    "otic": ("otic",),
    "inhalation": ("inhaled", "inhalation", "nebulized", "neb", "nebs", "mdi", "inh"),
    "nasogastric": ("ng", "via ng tube", "per ng"),
    "gastrostomy": ("peg", "gt", "g-tube", "per peg", "via peg"),
}
_ROUTE_OF = {w: kind for kind, words in _ROUTE_WORDS.items() for w in words}


def route(text: str) -> dict[str, str] | None:
    """The route a word names as a SNOMED CT code and display (None: unknown)."""
    kind = _ROUTE_OF.get(re.sub(r"\s+", " ", text.strip().lower()))
    if kind is None:
        return None
    code, display = ROUTES[kind]
    return {"system": "http://snomed.info/sct", "code": code, "display": display}
