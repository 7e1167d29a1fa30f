"""Vital signs and lab values as notes write them: "BP 168/94", "HR 102", "T 38.9", "SpO2 91%
RA", "Cr 1.4", "troponin 0.4 ng/mL", "Na 134, K 3.2".

A known test label followed by its value (an optional ``:``, ``=``, "of", "was", "nadir",
"peaked" between, a unit after) is a **Test** over the label and a **Result** over the value
with its unit, the result tied to its test. These spans replace whatever the model found over
them: a label such as "VS", "T" or "K" is too short for the model to read reliably, and a value
is read as one span with its unit. Labels are matched whole and case-insensitively; a
one-letter label (``T``, ``P``) only with a value in its own range (a temperature, a pulse), so
"T 2" or "P 1" is left to the model.

:class:`Measurement` keeps the pair; :func:`find` gives them in a text, in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .context.sections import ocr_tolerant
from .normalize import FINDINGS_IN_WORDS
from .types import Entity, where_free

#: The confidence given to a measurement's Test and Result: the share of the measurements
#: found in the note-style check set's development notes that were right
#: (benchmarks/results/note-style), rounded down.
CONFIDENCE = 0.97

# label (as written, any case; words apart by spaces) → what it measures
_VITALS = {
    "bp": "blood pressure",
    "blood pressure": "blood pressure",
    "sbp": "systolic blood pressure",
    "dbp": "diastolic blood pressure",
    "map": "mean arterial pressure",
    "hr": "heart rate",
    "heart rate": "heart rate",
    "pulse": "heart rate",
    "pulse rate": "heart rate",
    "rr": "respiratory rate",
    "resp": "respiratory rate",
    "respiratory rate": "respiratory rate",
    "respirations": "respiratory rate",
    "resp rate": "respiratory rate",
    "temp": "body temperature",
    "temperature": "body temperature",
    "tmax": "body temperature",
    "tm": "body temperature",
    "spo2": "oxygen saturation",
    "sao2": "oxygen saturation",
    "o2 sat": "oxygen saturation",
    "o2 sats": "oxygen saturation",
    "sat": "oxygen saturation",
    "sats": "oxygen saturation",
    "o2 saturation": "oxygen saturation",
    "oxygen saturation": "oxygen saturation",
    "pulse ox": "oxygen saturation",
    "pox": "oxygen saturation",
    "fio2": "inspired oxygen",
    "wt": "body weight",
    "weight": "body weight",
    "ht": "body height",
    "height": "body height",
    "bmi": "body mass index",
    "gcs": "glasgow coma scale",
}
_LABS = {
    "na": "sodium",
    "sodium": "sodium",
    "k": "potassium",
    "potassium": "potassium",
    "cl": "chloride",
    "chloride": "chloride",
    "hco3": "bicarbonate",
    "bicarb": "bicarbonate",
    "co2": "carbon dioxide",
    "bun": "urea nitrogen",
    "cr": "creatinine",
    "creat": "creatinine",
    "creatinine": "creatinine",
    "glucose": "glucose",
    "gluc": "glucose",
    "bg": "glucose",
    "fsbg": "glucose",
    "ca": "calcium",
    "calcium": "calcium",
    "mg": "magnesium",
    "magnesium": "magnesium",
    "phos": "phosphate",
    "phosphorus": "phosphate",
    "ag": "anion gap",
    "anion gap": "anion gap",
    "wbc": "leukocytes",
    "hgb": "hemoglobin",
    "hb": "hemoglobin",
    "hemoglobin": "hemoglobin",
    "hct": "hematocrit",
    "hematocrit": "hematocrit",
    "plt": "platelets",
    "plts": "platelets",
    "platelets": "platelets",
    "inr": "inr",
    "pt": "prothrombin time",
    "ptt": "ptt",
    "aptt": "ptt",
    "troponin": "troponin",
    "trop": "troponin",
    "tni": "troponin i",
    "tnt": "troponin t",
    "bnp": "natriuretic peptide",
    "probnp": "natriuretic peptide",
    "nt-probnp": "natriuretic peptide",
    "lactate": "lactate",
    "lactic acid": "lactate",
    "a1c": "hemoglobin a1c",
    "hba1c": "hemoglobin a1c",
    "hgba1c": "hemoglobin a1c",
    "hemoglobin a1c": "hemoglobin a1c",
    "tsh": "thyrotropin",
    "alt": "alanine aminotransferase",
    "ast": "aspartate aminotransferase",
    "alk phos": "alkaline phosphatase",
    "alp": "alkaline phosphatase",
    "t bili": "bilirubin",
    "tbili": "bilirubin",
    "bilirubin": "bilirubin",
    "albumin": "albumin",
    "lipase": "lipase",
    "amylase": "amylase",
    "ck": "creatine kinase",
    "cpk": "creatine kinase",
    "crp": "c-reactive protein",
    "esr": "sedimentation rate",
    "procalcitonin": "procalcitonin",
    "d-dimer": "d-dimer",
    "ferritin": "ferritin",
    "ldl": "ldl cholesterol",
    "hdl": "hdl cholesterol",
    "tg": "triglycerides",
    "triglycerides": "triglycerides",
    "ph": "ph",
    "pco2": "pco2",
    "po2": "po2",
    "paco2": "pco2",
    "pao2": "po2",
    "ef": "ejection fraction",
    "lvef": "ejection fraction",
    "qtc": "qtc interval",
    "psa": "prostate specific antigen",
    "fena": "fractional excretion of sodium",
    "feurea": "fractional excretion of urea",
    # echocardiographic measures and clinical scores, each a number a note writes after it
    "tapse": "tricuspid annular plane systolic excursion",
    "e/e'": "mitral e/e' ratio",
    "rvsp": "right ventricular systolic pressure",
    "phq-9": "patient health questionnaire-9 score",
    "phq-2": "patient health questionnaire-2 score",
    "gad-7": "generalized anxiety disorder-7 score",
    "cha2ds2-vasc": "cha2ds2-vasc score",
    "chads2": "chads2 score",
    "has-bled": "has-bled score",
    "ciwa": "ciwa-ar score",
    "ciwa-ar": "ciwa-ar score",
    "cows": "clinical opiate withdrawal scale score",
    "nihss": "nih stroke scale score",
    "meld": "meld score",
}
# one-letter labels, only with a value in their range
_ONE_LETTER = {
    "t": ("body temperature", r"(?:3[4-9]|9\d|10[0-7])(?:\.\d{1,2})?"),
    "p": ("heart rate", r"(?:[3-9]\d|1[0-9]\d)"),
}
_UNITS = (
    r"mm[ \t]?hg|bpm|/min|breaths/min|°[ \t]?[cf]|deg[ \t]?[cf]|[cf](?![a-z])|%|kg|lbs?|g/dl|mg/dl|"
    r"mmol/l|meq/l|ng/ml|ng/dl|pg/ml|u/l|iu/l|k/ul|k/mcl|x10\^?9/l|/ul|/mm3|mg/l|mcg/l|ug/l|"
    r"miu/l|uiu/ml|sec|s(?![a-z])|cm|ms"
)
_NUMBER = r"[<>≤≥]?[ \t]?\d+(?:[.,]\d+)?s?(?:[ \t]?[-–][ \t]?\d+(?:[.,]\d+)?s?)?"
_BP = r"\d{2,3}[ \t]?/[ \t]?\d{2,3}"


def _label_pattern(labels: Sequence[str]) -> str:
    ordered = sorted(labels, key=len, reverse=True)
    return "|".join(r"[ \t]+".join(re.escape(w) for w in label.split()) for label in ordered)


# between a label and its value: ":", "=", "of", "was", "is", or the value's place in a course
# ("K nadir 3.0", "Cr peaked 2.2", "lactate max 4.1")
_SEP = (
    r"[ \t]*(?:[:=]|\bof\b|\bwas\b|\bis\b|\bnadir\b|\bpeak(?:ed)?(?:[ \t]+at)?\b"
    r"|\btrough\b|\bmax\b|\bmin\b)?[ \t]*"
)
# a value ends there: not inside a longer number, a word, a ratio ("K 3/4") or a grade ("2+")
_AFTER = r"(?![\w.]*\d|[ \t]?/\s*\d|\+)"
# what makes a value a threshold, not a result: "if Hgb < 7", "goal INR 2-3", "hold for SBP <
# 100", "while K < 4" (a few words before the label), or "PRN" right before it ("hydralazine
# PRN SBP > 160", "lorazepam PRN CIWA > 10"); "on hold, Cr 2.1" is a drug held, and its value
# measured
_THRESHOLD = re.compile(
    r"(?:\b(?:if|goal|target|(?<!on[ \t])hold|unless|while|once|until|keep|titrate|maintain"
    r"|above|below|for)\b"
    r"[^.;:\n]{0,20}|\bprn[ \t]+)$",
    re.IGNORECASE,
)
_PATTERN = re.compile(
    r"(?<![\w/-])(?P<label>"
    + _label_pattern([*_VITALS, *_LABS])
    + r")(?![\w/-])"
    + _SEP
    + r"(?P<value>(?:"
    + _BP
    + "|"
    + _NUMBER
    + r")(?:[ \t]?(?:"
    + _UNITS
    + r"))?)"
    + _AFTER
    + r"|(?<![\w/-])(?P<one>[tp])(?![\w/-])"
    + _SEP
    + r"(?P<onevalue>(?:3[4-9]|9\d|10[0-7]|[3-9]\d|1[0-9]\d)(?:\.\d{1,2})?"
    r"(?:[ \t]?(?:" + _UNITS + r"))?)" + _AFTER,
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Measurement:
    """A test label and its value, as character spans; ``measures`` what it measures."""

    label: tuple[int, int]
    value: tuple[int, int]
    measures: str

    def entities(self, text: str, confidence: float = CONFIDENCE) -> tuple[Entity, Entity]:
        return (
            _entity(text, self.label, "Test", confidence),
            _entity(text, self.value, "Result", confidence),
        )


def _entity(text: str, span: tuple[int, int], type_: str, confidence: float = CONFIDENCE) -> Entity:
    """The entity of ``type_`` over ``span`` of ``text``, sure at ``confidence`` throughout."""
    a, b = span
    return Entity(a, b, text[a:b], type_, confidence, confidence, confidence)


def _over(entities: Sequence[Entity], added: Sequence[Entity]) -> list[Entity]:
    """``entities`` with ``added`` over them: the ones ``added`` overlap dropped, in text order."""
    kept = [e for e in entities if not any(n.start < e.end and e.start < n.end for n in added)]
    return sorted([*kept, *added], key=lambda e: (e.start, e.end))


def find(text: str) -> list[Measurement]:
    """The measurements of ``text``, in order."""
    out = []
    for m in _PATTERN.finditer(text):
        if m.group("label") is not None:
            label, value = m.span("label"), m.span("value")
            key = " ".join(m.group("label").lower().split())
            measures = _VITALS.get(key) or _LABS[key]
            if "pressure" not in measures and re.match(_BP, m.group("value")):
                continue  # a ratio is the value of a pressure only
        else:
            key = m.group("one").lower()
            measures, allowed = _ONE_LETTER[key]
            number = re.match(r"\d+(?:\.\d+)?", m.group("onevalue"))
            if number is None or not re.fullmatch(allowed, number.group()):
                continue
            label, value = m.span("one"), m.span("onevalue")
        if _THRESHOLD.search(text, max(0, label[0] - 24), label[0]):
            continue  # a condition or a goal, not a value measured
        value = _trim(text, *value)
        out.append(Measurement(label, value, measures))
    return out


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while end > start and text[end - 1] in " \t,;":
        end -= 1
    return start, end


def merged(text: str, entities: Sequence[Entity], found: Sequence[Measurement]) -> list[Entity]:
    """``entities`` with the measurements ``found`` in ``text`` over them: each measurement's
    Test and Result replace the entities they overlap, in text order."""
    return _over(entities, [e for m in found for e in m.entities(text)])


# a bare small number ("2", "3/4") read as a Result with no test before it: a list number, a
# count, "2/2" (secondary to), never a value on its own; nor a date ("01/14/2023"), a year
# ("2022") or a clock time ("0500"), which the schema does not annotate
_BARE = re.compile(
    r"\d{1,2}(?:/\d{1,2})?|\d{1,2}/\d{1,2}/(?:\d{2}|\d{4})|\d{4}-\d{2}-\d{2}|(?:19|20)\d{2}"
    r"|[01]\d[0-5]\d|2[0-3][0-5]\d"
)


def _test_before(text: str, e: Entity, tests: Sequence[Entity]) -> Entity | None:
    """The Test ending at most 12 characters before ``e`` on its line, if any."""
    return next(
        (t for t in tests if 0 <= e.start - t.end <= 12 and "\n" not in text[t.end : e.start]),
        None,
    )


# a word of course or change read as a Result ("Cardiomegaly, stable", "UOP 1.2 L, improving",
# "lap chole, uncomplicated", "increased to 20 mg"): the schema's Result is a test's value, so
# one of these is a Result only right after its test ("weight stable", "Cr stable")
_COURSE = re.compile(
    r"stable|unchanged|improv(?:ed|ing)|better|wors(?:e|ening|ened)|increas(?:e|ed|ing)"
    r"|reduced|declin(?:ed|ing)|flat|high|uncomplicated|limit|resolv(?:ed|ing)|trending",
    re.IGNORECASE,
)


# a size, a weight gained or lifted, a distance walked or a time ("2.8 cm", "10 lb", "50 ft",
# "in 2h"): what a note writes of a finding or a plan, a Result only right after its test
_NO_TESTS_UNIT = re.compile(
    r"~?\d+(?:\.\d+)?[ \t]?(?:lbs?|pounds?|ft|feet|mm|cm|h|hrs?|min)", re.IGNORECASE
)


def without_lone_results(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` without the Results that no Test ending at most 12 characters before
    them on their line measured, where they are a bare number of one or two digits (or a
    ratio of such), a date, a year or a clock time ("3. Hypokalemia" after a line that ends
    in a test is a list number), a word of course or change (:data:`_COURSE`), a size, a
    weight, a distance or a time (:data:`_NO_TESTS_UNIT`), or hold no
    letter or digit ("+rebound", "↑ to 80 mg")."""
    tests = [e for e in entities if e.type == "Test"]
    return [
        e
        for e in entities
        if not (
            e.type == "Result"
            and (
                _BARE.fullmatch(e.text)
                or _COURSE.fullmatch(e.text)
                or _NO_TESTS_UNIT.fullmatch(e.text)
                or not any(c.isalnum() for c in e.text)
            )
            and _test_before(text, e, tests) is None
        )
    ]


# a value written as a bound ("< 7", "> 101.5", "more than 3 lbs")
_COMPARATOR = r"(?:[<>≤≥]=?|(?:more|less|greater|higher|lower)[ \t]+than|over|above|below|under)"
_BOUND = re.compile(_COMPARATOR + r"[ \t]*\d", re.IGNORECASE)
_BOUND_BEFORE = re.compile(r"(?<![\w<>≤≥=])" + _COMPARATOR + r"[ \t]*$", re.IGNORECASE)


def _bound(text: str, e: Entity) -> bool:
    """Whether the Result ``e`` is written as a bound: its comparator in its span ("> 101.5")
    or right before it ("fever > 101.5", "fever over 100.4" read as "101.5", "100.4")."""
    if _BOUND.match(e.text):
        return True
    before = text[max(0, e.start - 14) : e.start].rsplit("\n", 1)[-1]
    return e.text[:1].isdigit() and _BOUND_BEFORE.search(before) is not None


def without_thresholds(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` without the Results written as a bound (:func:`_bound`) that no test
    measured: with no Test ending at most 12 characters before them on their line ("fever >
    101.5", "fever over 100.4", "weight gain > 3 lb"), or whose Test is a condition's or a
    goal's ("if Hgb < 7", "hold if SBP < 110": :data:`_THRESHOLD`). A bound a test gave stays
    ("troponin < 0.01", "BP above 180 at home")."""
    tests = [e for e in entities if e.type == "Test"]
    out = []
    for e in entities:
        if e.type == "Result" and _bound(text, e):
            label = _test_before(text, e, tests)
            if label is None or _THRESHOLD.search(text, max(0, label.start - 24), label.start):
                continue
        out.append(e)
    return out


# an earlier or reference value in brackets right after a result, the same test's: "Cr 1.9
# (baseline 1.7)", "Cr 3.1 (↓ from 3.8; baseline 1.8)", "Hgb 8.9 (pre-op 12.4)", "EF 20%
# (prior 30% in 2022)", "Na 133 (corrected 136)", "Hgb 6.8 on arrival (baseline ~13)"
_REFERENCE = re.compile(
    r"(?:(?<=[(;,])|(?<=[(;,][ \t])|(?<=[↓↑][ \t]))[ \t]*"
    r"(?:baseline|from|pre-?op|prior|previously|corrected|on admission|admit(?:ting)?)"
    r"[ \t]*~?[ \t]*(?P<value>\d{1,3}(?:,\d{3})*(?:\.\d+)?(?:[ \t]?(?:" + _UNITS + r"))?)"
    r"(?![\w.]*\d|[ \t]?/\s*\d|\+)",
    re.IGNORECASE,
)


def with_reference_values(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with the earlier or reference values written in brackets after a Result
    (at most 16 characters after it, on its line: "Hgb 6.8 on arrival (baseline ~13)") as
    Results of their own, where nothing was found over them. Only after a Result: "(increased
    from 20 mg)" after a dose is the model's."""
    out = list(entities)
    taken = [(e.start, e.end) for e in entities]
    for e in entities:
        if e.type != "Result":
            continue
        gap = re.match(r"[^(\n]{0,16}\(", text[e.end :])
        if gap is None:
            continue
        start = e.end + gap.end()
        end = text.find(")", start)
        if end == -1 or "\n" in text[start:end]:
            continue
        for m in _REFERENCE.finditer(text, start - 1, end):
            a, b = _trim(text, *m.span("value"))
            if any(s < b and a < t for s, t in taken):
                continue
            out.append(_entity(text, (a, b), "Result"))
            taken.append((a, b))
    return sorted(out, key=lambda e: (e.start, e.end))


# normal exam findings in shorthand, Results as the schema has them ("Gen: NAD, A&Ox3", "CV:
# RRR", "Lungs: CTAB", "Abd: soft, NT/ND", "HEENT: MMM"): the model reads them as a Problem, a
# Test, or not at all
_EXAM = re.compile(
    r"(?<![\w&/])(?:A&Ox[ \t]?[1-4]|AAOx[ \t]?[1-4]|AOx[ \t]?[1-4]|RRR|CTAB|NT/ND|MMM)(?![\w/&])"
)


# and in a word right after its organ's label ("Abd: soft", "GI: soft", "Neck: supple",
# "Lungs: clear", "Resp: clear bilat"; not "soft tissue"), or one that is normal wherever it
# stands ("calves non-tender", "abd nondistended", "Neuro: nonfocal")
_EXAM_WORDS = re.compile(
    r"(?<![\w-])non-?(?:tender|distended|focal)(?![\w-])|"
    r"(?<![\w-])(?:patent(?![ \t]+(?:ductus|foramen|processus))|compressible)(?![\w-])|"
    r"(?:(?<=\bAbd:[ \t])|(?<=\bAbdomen:[ \t])|(?<=\bGI:[ \t]))soft(?![\w-]|[ \t]+tissue)"
    r"|(?<=\bNeck:[ \t])supple(?![\w-])"
    r"|(?:(?<=\bLungs:[ \t])|(?<=\bResp:[ \t])|(?<=\bChest:[ \t]))clear(?![\w-])",
    re.IGNORECASE,
)


def with_exam_shorthand(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with each normal exam finding written in shorthand (:data:`_EXAM`) or in
    a word (:data:`_EXAM_WORDS`) a Result, over whatever the model found there."""
    spans = [m.span() for pattern in (_EXAM, _EXAM_WORDS) for m in pattern.finditer(text)]
    return _over(entities, [_entity(text, span, "Result") for span in sorted(spans)])


# a diet or a restriction, which the schema does not annotate (no drug, no dose, no value):
# "low salt diet (2 g)", "low-potassium diet", "Low K diet", "diet high in salt", "Limit salt to
# 2 g a day and fluids to 2 L a day", "fluid limit 1.5 L/day", "fluid restrict 1.5 L",
# "Restrict fluid 1 L/day"
_AMOUNT = (
    r"[\d.]+[ \t]?(?:L|mL|g|mg|mEq)\b(?:[ \t]*/[ \t]*day|[ \t]+a[ \t]+day|[ \t]+per[ \t]+day)?"
)
_NUTRIENT = r"(?:salt|sodium|Na|potassium|K|fluids?|water|fat|protein|carbs?|carbohydrates?)"
_DIET = re.compile(
    r"\b(?:low|high|no[ \t]+added)[- \t]" + _NUTRIENT + r"[ \t]+diet\b(?:[ \t]*\([^)\n]*\))?"
    r"|\bdiet[ \t]+(?:high|low|rich)[ \t]+in[ \t]+\w+"
    r"|\blimit[ \t]+" + _NUTRIENT + r"[ \t]+to[ \t]+[^.;\n]*"
    r"|\b"
    + _NUTRIENT
    + r"[ \t]+(?:limit|restrict(?:ion|ed)?)[ \t]+(?:to[ \t]+|of[ \t]+)?"
    + _AMOUNT
    + r"|\brestrict[ \t]+"
    + _NUTRIENT
    + r"[ \t]+(?:to[ \t]+)?"
    + _AMOUNT,
    re.IGNORECASE,
)


def without_diets(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` without those inside a diet or a restriction (:data:`_DIET`)."""
    diets = [m.span() for m in _DIET.finditer(text)]
    if not diets:
        return list(entities)
    return [e for e in entities if not any(a <= e.start and e.end <= b for a, b in diets)]


# a measure the patient or a nurse is told to watch ("Check your weight every morning", "VNA
# to check weight", "daily weights"): the test, with no value yet
_WATCHED = re.compile(
    r"(?:(?<=\bcheck your )|(?<=\bcheck )|(?<=\bmonitor )|(?<=\bdaily ))weights?(?![\w-])",
    re.IGNORECASE,
)


def with_watched_tests(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with each measure to watch (:data:`_WATCHED`) a Test, where nothing was
    found over it."""
    return where_free(entities, [_entity(text, m.span(), "Test") for m in _WATCHED.finditer(text)])


# an imaging study and the body regions it images ("CT A/P", "XR left hip and pelvis", "MRI of
# the brain", "CHEST X-RAY", "RUQ US"): the study a Test, each region an Anatomy, as the
# guidelines annotate "chest CT"
_MODALITY = r"(?:CTA|CT|MRI|MRA|XR|CXR|US|(?i:x-?ray|ultrasound|duplex))"
_REGION_WORDS = (
    "a/p", "abd", "abdomen", "pelvis", "head", "neck", "chest", "brain", "c-spine", "t-spine",
    "l-spine", "spine", "foot", "feet", "ankle", "knee", "hip", "shoulder", "elbow", "wrist",
    "hand", "kidneys", "kidney", "liver", "ruq", "luq", "rlq", "llq", "orbits", "sinuses",
    "femur", "tibia", "humerus", "thorax",
)  # fmt: skip
_ONE_REGION = (
    r"(?i:(?:(?:L|R|left|right|bilateral|bilat|B/L)[ \t]+)?(?:"
    + "|".join(ocr_tolerant(w) for w in sorted(_REGION_WORDS, key=len, reverse=True))
    + r"))(?![\w-])"
)
_REGIONS = re.compile(
    r"(?P<one>" + _ONE_REGION + r")(?:[ \t]*(?:/|,|and)[ \t]*(?=" + _ONE_REGION + r"))?"
)
_STUDY_THEN_SITE = re.compile(
    r"(?<![\w/-])(?P<study>" + _MODALITY + r")[ \t]+(?:(?i:of)[ \t]+)?(?:(?i:the)[ \t]+)?"
    r"(?=" + _ONE_REGION + ")"
)
_SITE_THEN_STUDY = re.compile(
    r"(?<![\w/-])(?P<site>" + _ONE_REGION + r")[ \t]+(?P<study>" + _MODALITY + r")(?![\w/-])"
)


def with_imaging_sites(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with each imaging study named with its body regions (:data:`_MODALITY`
    before or after them) a Test, and each region an Anatomy: what the model read over them
    as one span ("XR L foot", "CHEST X-RAY", "CT A/P" read as a Result) is replaced; a study or
    region the model already read so is kept as it is."""
    spans: list[tuple[tuple[int, int], str]] = []
    for m in _STUDY_THEN_SITE.finditer(text):
        spans.append((m.span("study"), "Test"))
        at = m.end()
        while (r := _REGIONS.match(text, at)) is not None:
            spans.append((r.span("one"), "Anatomy"))
            at = r.end()
            if at == r.end("one"):
                break
    for m in _SITE_THEN_STUDY.finditer(text):
        spans += [(m.span("site"), "Anatomy"), (m.span("study"), "Test")]
    wanted = dict(spans)
    right = [e for e in entities if wanted.get((e.start, e.end)) == e.type]
    have = {(e.start, e.end) for e in right}
    added = [_entity(text, s, t) for s, t in wanted.items() if s not in have]
    if not added:
        return list(entities)
    return _over([e for e in entities if (e.start, e.end) not in wanted or e in right], added)


# words of a note that name no entity of the schema, whatever the model read them as: how an
# imaging study was made ("Axial images", "coronal reformats", "2 VIEWS", "PA AND LATERAL"), a
# bolus, a plan's verb ("recheck TSH", "Monitor off abx", "Foley: remove today"), pain's
# spread ("radiates to back"), and a service seen or to be seen ("Podiatry saw pt", "Vascular
# surgery 4 wks")
_SERVICES = (
    r"podiatry|vascular[ \t]+surgery|cardiology|nephrology|renal|neurology|neurosurgery|"
    r"orthopedics|ortho|urology|pulmonology|pulm|endocrinology|endo|rheumatology|"
    r"hematology|oncology|heme/onc|ID|GI|surgery|psychiatry|dermatology|ENT|PCP|"
    r"palliative[ \t]+care|social[ \t]+work|SW"
)
_NOT_ENTITIES = re.compile(
    r"(?i:(?:axial|coronal|sagittal)[ \t]+)?(?i:images|irnages|reformats|reforrnats|"
    r"reconstructions)"
    r"|\d+[ \t]+(?i:views|vlews|vIews)|(?i:lateral)(?<=(?i:PA and lateral))"
    r"|(?i:bolus|recheck|re-check|monitor|remove|goal|caliber|echotexture)"
)
_SERVICE_SEEN = re.compile(
    r"(?i:" + _SERVICES + r")(?:[ \t]+(?i:visit|clinic|team|service))?"
    r"(?=[ \t]+(?:\d+[ \t]*(?i:d|days?|wks?|weeks?|mos?|months?)\b"
    r"(?![ \t]+(?i:ago|prior|before|earlier))"
    r"|(?i:saw|consulted|following|recs|to see|will see)\b))"
    r"|(?:"
    + "|".join(
        f"(?<=(?i:{w}))"
        for w in ("seen by ", "f/u w/ ", "f/u with ", "follow up with ", "referral to ")
    )
    + r")"
    r"(?i:" + _SERVICES + r")(?:[ \t]+(?i:visit|clinic))?"
    r"|(?i:PCP)[ \t]+(?i:visit|appointment|appt)"
)
_RADIATES = re.compile(
    r"(?P<verb>(?i:radiat(?:es|ing|ion)))[ \t]+(?i:to)[ \t]+(?:(?i:the)[ \t]+)?(?P<site>"
    r"(?i:(?:L|R|left|right)[ \t]+)?(?i:back|jaw|neck|shoulder|arm|groin|chest|flank|leg)s?)\b"
)


def without_words_of_no_entity(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` without those that are nothing but a word of :data:`_NOT_ENTITIES` or a
    service (:data:`_SERVICE_SEEN`), and with the site pain spreads to an Anatomy
    ("radiates to [back]"), where nothing was found over it."""
    words = [m.span() for p in (_NOT_ENTITIES, _SERVICE_SEEN) for m in p.finditer(text)]
    words += [m.span("verb") for m in _RADIATES.finditer(text)]
    kept = [
        e
        for e in entities
        if not any(a == e.start and e.end == b for a, b in words)
        and not (e.type != "Drug" and _NOT_ENTITIES.fullmatch(e.text))
    ]
    sites = [_entity(text, m.span("site"), "Anatomy") for m in _RADIATES.finditer(text)]
    return where_free(kept, sites)


# a lab a plan orders again or waits for ("recheck K this PM", "f/u lipase", "repeat lipids",
# "narrow per cx", "C diff not sent", "until K rechecked"): the test, with no value yet; not
# "PT", as often the patient or a therapist
_ORDERABLE = (
    *_LABS,
    *("lipids", "lipid panel", "iron studies", "blood cx", "urine cx", "cx", "cultures", "c diff"),
    *("vbg", "abg", "ua", "cbc", "bmp", "cmp", "lfts", "coags"),
)
_ORDERED_LABEL = (
    r"(?P<label>(?i:"
    + "|".join(re.escape(k) for k in sorted(set(_ORDERABLE) - {"pt"}, key=len, reverse=True))
    + r"))(?![\w/-])"
)
_ORDERED = (
    re.compile(
        r"(?<![\w/])(?i:recheck|re-check|repeat|f/u|trend|send|pending|per)[ \t]+" + _ORDERED_LABEL
    ),
    re.compile(
        r"(?<![\w/])" + _ORDERED_LABEL + r"(?=[ \t]+(?i:rechecked|pending|sent|drawn|not sent)\b)"
    ),
)


def with_ordered_tests(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with each lab a plan orders again or waits for (:data:`_ORDERED`) a
    Test, over what the model read there as another type ("repeat lactate" read as a drug);
    one the model read as a Test is kept as it was."""
    spans = sorted({m.span("label") for p in _ORDERED for m in p.finditer(text)})
    added = [
        _entity(text, (a, b), "Test")
        for a, b in spans
        if not any(e.start == a and e.end == b and e.type == "Test" for e in entities)
    ]
    return _over(entities, added) if added else list(entities)


# a test's value in words right after it ("UA neg", "hCG negative", "lipase nl", "troponin
# negative", "CT head unremarkable", "UA bland"): what a result says of itself, "nl", "bland"
_QUALITATIVE = re.compile(
    r"[ \t]*(?::[ \t]*|=[ \t]*|(?:was|is|came back)[ \t]+)?"
    r"(?P<value>" + "|".join((*FINDINGS_IN_WORDS, "nl", "bland")) + r")(?![\w/-])",
    re.IGNORECASE,
)


def with_qualitative_results(text: str, entities: Sequence[Entity]) -> list[Entity]:
    """``entities`` with a test's value written as a word right after the Test (a site named
    between: "CT head negative") a Result, where nothing was found over the word."""
    out = list(entities)
    taken = [(e.start, e.end) for e in entities]
    ordered = sorted(entities, key=lambda e: (e.start, e.end))
    for i, e in enumerate(ordered):
        if e.type != "Test":
            continue
        end = e.end
        following = ordered[i + 1] if i + 1 < len(ordered) else None
        if (
            following is not None
            and following.type == "Anatomy"
            and re.fullmatch(r"[ \t]+", text[end : following.start])
        ):
            end = following.end
        m = _QUALITATIVE.match(text, end)
        if m is None or _THRESHOLD.search(text, max(0, e.start - 24), e.start):
            continue  # none, or a condition ("CT if hCG neg"), not a value measured
        a, b = m.span("value")
        if any(s < b and a < t for s, t in taken):
            continue
        out.append(_entity(text, (a, b), "Result"))
        taken.append((a, b))
    return sorted(out, key=lambda e: (e.start, e.end))
