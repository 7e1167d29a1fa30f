"""Clinical shorthand: abbreviations and the senses clinicians write them for ("SOB" →
shortness of breath, "HTN" → hypertension, "c/o" → complains of), with how often each sense is
meant in real notes.

The packaged table (``data/shorthand.tsv``) is derived from the sense inventories of the
Medical Abbreviation and Acronym Meta-Inventory (Grossman Liu et al., Scientific Data 2021;
CC BY 4.0) that were drawn from clinical notes — Vanderbilt's clinic notes and discharge
summaries, Stetson's sign-out notes — fetched at a pinned commit with pinned sha256 (the
corpus ``clinical-abbreviations``) by ``mslm vocab shorthand``, whose command line is the
table's first line. Each row: a short form, one sense (a long form), the share of the short
form's uses that mean it (the highest of the inventories), and the spellings written for it
with their counts (``SOB:16|sob:4``).

What reads it: the note-style augmentation of training text (``mslm_core.notestyle``), which
writes a gold mention's long form as its abbreviation, so that a model learns both; and the
linker, whose packaged vocabulary takes the abbreviations of a concept's names as synonyms.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .layout import tidied
from .regimen import REGIMEN_TYPES
from .types import Entity, with_fields

PACKAGED = Path(__file__).resolve().parent / "data" / "shorthand.tsv"
CORPUS = "clinical-abbreviations"
#: The inventories read from the pinned corpus: path → (name, its layout).
SOURCES = {
    "sources/4-vanderbilt/vanderbilt_clinic_notes.txt": "vanderbilt-clinic",
    "sources/4-vanderbilt/vanderbilt_discharge_sums.txt": "vanderbilt-discharge",
    "sources/6-stetson/sense_distribution_448.txt": "stetson",
}
COLUMNS = ("short", "long", "frequency", "forms", "sources")


@dataclass(frozen=True)
class Sense:
    """One sense of a short form: ``short`` its key (lower case, ``/`` as written),
    ``long`` the long form, ``frequency`` the share of the short form's uses meaning it,
    ``forms`` how it is spelled in notes with counts (most frequent first)."""

    short: str
    long: str
    frequency: float
    forms: tuple[tuple[str, int], ...]
    sources: tuple[str, ...] = ()

    def spellings(self) -> list[str]:
        return [f for f, _ in self.forms] or [self.short.upper()]


class Shorthand:
    """Senses by short form."""

    def __init__(self, senses: Iterable[Sense]):
        self.senses: dict[str, list[Sense]] = defaultdict(list)
        for s in senses:
            self.senses[s.short].append(s)
        for key in self.senses:
            self.senses[key].sort(key=lambda s: -s.frequency)

    def __len__(self) -> int:
        return len(self.senses)

    def dominant(self, short: str, at_least: float = 0.5) -> Sense | None:
        """The sense ``short`` (any case) stands for in at least ``at_least`` of its uses."""
        senses = self.senses.get(short.lower())
        if senses and senses[0].frequency >= at_least:
            return senses[0]
        return None

    def by_long_form(self, at_least: float = 0.5) -> dict[str, list[Sense]]:
        """Long form (lower case) → the senses whose short form means it in at least
        ``at_least`` of its uses: what a long form may be written as."""
        out: dict[str, list[Sense]] = defaultdict(list)
        for senses in self.senses.values():
            if senses[0].frequency >= at_least:
                out[senses[0].long].append(senses[0])
        return out


def _key(short: str) -> str:
    return short.strip().lower().replace("_", "/")


def _forms(variation: str) -> tuple[tuple[str, int], ...]:
    """``SOB_16|sob_4`` → (("SOB", 16), ("sob", 4)); a trailing full stop is dropped."""
    counts: dict[str, int] = defaultdict(int)
    for item in variation.split("|"):
        form, _, count = item.strip().rpartition("_")
        form = form.strip().rstrip(".").lstrip(".")
        if form and count.isdigit():
            counts[form] += int(count)
    return tuple(sorted(counts.items(), key=lambda fc: (-fc[1], fc[0])))


def read_inventories(root: Path) -> Shorthand:
    """The senses of the pinned inventories under ``root`` (the corpus's cache folder), each
    (short form, long form) once: its highest frequency, its spellings' counts summed."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}

    def add(
        short: str, long: str, freq: float, forms: tuple[tuple[str, int], ...], source: str
    ) -> None:
        key = (_key(short), " ".join(long.lower().split()))
        if not key[0] or not key[1]:
            return
        row = merged.setdefault(key, {"freq": 0.0, "forms": defaultdict(int), "sources": []})
        row["freq"] = max(row["freq"], freq)
        for form, count in forms:
            row["forms"][form] += count
        if source not in row["sources"]:
            row["sources"].append(source)

    for path, source in SOURCES.items():
        file = root / path
        if not file.is_file():
            raise ConfigError(f"{file}: missing (mslm corpora fetch {CORPUS})")
        text = file.read_text(encoding="utf-8", errors="strict")
        for number, row in enumerate(csv.reader(io.StringIO(text), delimiter="\t"), 1):
            if source == "stetson":
                if len(row) != 3:
                    raise ConfigError(f"{file}:{number}: 3 tab-separated columns expected")
                add(row[0], row[1], float(row[2]), (), source)
            elif number > 1:  # abbreviation, sense, variation, CUI, frequency
                if len(row) != 5:
                    raise ConfigError(f"{file}:{number}: 5 tab-separated columns expected")
                add(row[0], row[1], float(row[4] or 0), _forms(row[2]), source)
    return Shorthand(
        Sense(
            short,
            long,
            round(row["freq"], 4),
            tuple(sorted(row["forms"].items(), key=lambda fc: (-fc[1], fc[0]))),
            tuple(row["sources"]),
        )
        for (short, long), row in sorted(merged.items())
    )


def write_table(shorthand: Shorthand, path: Path, provenance: str) -> int:
    """The table as the package carries it; returns its rows."""
    rows = 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(f"# {provenance}\n")
        out.write("\t".join(COLUMNS) + "\n")
        for key in sorted(shorthand.senses):
            for s in shorthand.senses[key]:
                forms = "|".join(f"{f}:{c}" for f, c in s.forms)
                out.write(f"{s.short}\t{s.long}\t{s.frequency:g}\t{forms}\t{','.join(s.sources)}\n")
                rows += 1
    return rows


def read_table(path: Path) -> Shorthand:
    """A table :func:`write_table` wrote; errors name the file and line."""
    senses = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.startswith("#") or not line.strip():
                continue
            cells = line.rstrip("\n").split("\t")
            if tuple(cells) == COLUMNS:
                continue
            if len(cells) != len(COLUMNS):
                raise ConfigError(f"{path}:{number}: {len(COLUMNS)} tab-separated columns")
            short, long, freq, forms, sources = cells
            try:
                frequency = float(freq)
                spelled = tuple(
                    (f, int(c)) for f, _, c in (x.rpartition(":") for x in forms.split("|") if x)
                )
            except ValueError as exc:
                raise ConfigError(f"{path}:{number}: {exc}") from None
            senses.append(Sense(short, long, frequency, spelled, tuple(sources.split(","))))
    return Shorthand(senses)


@lru_cache(maxsize=1)
def packaged() -> Shorthand:
    """The table the package carries."""
    return read_table(PACKAGED)


TYPED = Path(__file__).resolve().parent / "data" / "shorthand-types.tsv"
#: Short forms the inventory lacks, written for this project, typed (``shorthand-more.tsv``).
MORE = Path(__file__).resolve().parent / "data" / "shorthand-more.tsv"
#: The shorthand that joins a finding to what is said of it ("s/p", "w/o", "2/2", "c/f"): a
#: word of no entity, so never the first or last of one ("breast ca s/p" is "breast ca").
CONNECTORS = frozenset(
    [
        "s/p",
        "w/",
        "w/o",
        "w/out",
        "c/o",
        "h/o",
        "d/t",
        "r/o",
        "c/w",
        "r/t",
        "b/c",
        "o/w",
        "f/u",
        "p/w",
        "c/f",
        "2/2",
        "a/w",
    ]
)


def _without_connectors(text: str, e: Entity) -> Entity | None:
    """``e`` without the :data:`CONNECTORS` that begin or end it (None: nothing else)."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text[e.start : e.end])]
    while words and text[e.start + words[0][0] : e.start + words[0][1]].lower() in CONNECTORS:
        words.pop(0)
    while words and text[e.start + words[-1][0] : e.start + words[-1][1]].lower() in CONNECTORS:
        words.pop()
    if not words:
        return None
    start, end = e.start + words[0][0], e.start + words[-1][1]
    if (start, end) == (e.start, e.end):
        return e
    return with_fields(e, start=start, end=end, text=text[start:end])


#: The type of a short form that stands for no entity.
NONE = "-"
#: The confidence given to an entity found as shorthand (:class:`ShorthandFinder`): the share
#: of those found in the note-style check set's development notes that were right, rounded
#: down (benchmarks/results/note-style).
FOUND_CONFIDENCE = 0.85


def _typed_rows(path: Path, columns: str) -> Iterable[list[str]]:
    """The rows of a typed short-form table (three tab-separated cells, ``columns`` its header
    line; ``#`` lines and blank ones skipped); an error names the file and line."""
    header = columns.split()[0] + "\t"
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.startswith("#") or not line.strip() or line.startswith(header):
                continue
            cells = line.rstrip("\n").split("\t")
            if len(cells) != 3 or not all(c.strip() for c in cells):
                raise ConfigError(f"{path}:{number}: 3 tab-separated columns ({columns})")
            yield cells


def read_types(path: Path = TYPED) -> dict[str, str]:
    """Short form → the clinical schema's type of what it stands for (``shorthand-types.tsv``);
    errors name the file and line."""
    return {short: kind for short, kind, _ in _typed_rows(path, "short type long")}


def read_more(path: Path = MORE) -> dict[str, str]:
    """Spelling → the clinical schema's type, for the short forms the inventory lacks
    (``shorthand-more.tsv``: spellings joined by ``|``, a type or :data:`NONE` for what is no
    entity, a long form); errors name the file and line."""
    return {
        spelling: kind
        for spellings, kind, _ in _typed_rows(path, "spellings type long_form")
        for spelling in spellings.split("|")
    }


#: Therapies in shorthand where the words around them say therapy, not a patient or a
#: prothrombin time ("PT" is "patient" in most notes, and "PT 14.2", "PT/INR" a test): several
#: together ("PT/OT", "PT, OT and SLP"), after a word that takes a therapy ("seen by PT", "w/
#: PT", "home PT") or before a schedule or a therapist's say ("PT BID", "PT eval", "PT recs").
_THERAPY = r"(?:PT|OT|SLP)"
_THERAPIES = (
    re.compile(
        r"(?<![\w/&.-])"
        + _THERAPY
        + r"(?:(?:/|,[ \t]*|[ \t]*&[ \t]*|[ \t]+and[ \t]+)"
        + _THERAPY
        + r")+(?![\w/&-])",
        re.IGNORECASE,
    ),
    re.compile(
        r"(?<=\bw/[ \t])" + _THERAPY + r"(?![\w/&-])"
        r"|(?<![\w/])(?:(?<=with )|(?<=by )|(?<=per )|(?<=home )|(?<=outpatient )"
        r"|(?<=inpatient )|(?<=started )|(?<=continue )|(?<=cont ))" + _THERAPY + r"(?![\w/&-])",
        re.IGNORECASE,
    ),
    re.compile(
        r"(?<![\w/&.-])" + _THERAPY + r"(?=[ \t]+(?:BID|TID|daily|qd|eval\w*|consult|recs?"
        r"|recommend\w*|clearance|needs)\b)",
        re.IGNORECASE,
    ),
)


def therapies(text: str) -> list[tuple[int, int]]:
    """The spans of the therapies written in shorthand in ``text`` (:data:`_THERAPIES`), in
    order; written in capitals ("pt" is a patient)."""
    out = set()
    for pattern in _THERAPIES:
        for m in pattern.finditer(text):
            for w in re.finditer(_THERAPY, m.group(), re.IGNORECASE):
                a, b = m.start() + w.start(), m.start() + w.end()
                if text[a:b].isupper():
                    out.add((a, b))
    return sorted(out)


#: Contrast medium as notes name it, the agent given, a drug ("CT A/P with IV contrast", "w/o
#: contrast", "AKI after contrast"): the word after a route or a word that gives or withholds
#: it; never "contrast-enhanced", "noncontrast" or "in contrast to".
_CONTRAST = re.compile(
    r"(?:(?<=\bIV )|(?<=\boral )|(?<=\bPO )|(?<=\biodinated )|(?<=\bwith )|(?<=\bwithout )"
    r"|(?<=\bw/ )|(?<=\bw/o )|(?<=\bafter )|(?<=\band )|(?<=\bno ))contrast(?![\w-])",
    re.IGNORECASE,
)


#: Lactated Ringer's as "LR" where a volume, a rate or a bolus follows it ("LR 1 L", "LR @ 100
#: mL/h", "LR bolus"): "LR" alone is as often the light reflex.
_RINGERS = re.compile(
    r"(?<![\w/&.-])LR(?=[ \t]+(?:\d+(?:\.\d+)?[ \t]?(?:L|mL|cc)\b|@|at[ \t]+\d|bolus|gtt))"
)


def agents(text: str) -> list[tuple[int, int]]:
    """The spans of contrast media (:data:`_CONTRAST`) and of lactated Ringer's written "LR"
    (:data:`_RINGERS`) in ``text``, in order: drugs that are no short form of the tables."""
    return sorted(m.span() for pattern in (_CONTRAST, _RINGERS) for m in pattern.finditer(text))


#: A body region written right after a short form ("CTA head/neck", "CTA of the chest"): where
#: one of the short form's senses is imaging, it is that imaging, a Test ("CTA" is "clear to
#: auscultation" in most notes, and "CTA chest" an angiogram).
_REGION_AFTER = re.compile(
    r"[ \t]+(?:of[ \t]+)?(?:the[ \t]+)?(?:head|neck|brain|chest|abd|abdomen|pelvis|A/P|coronar"
    r"|aorta|runoff|PE\b|LE\b|UE\b)",
    re.IGNORECASE,
)
_IMAGING = re.compile(r"tomograph|angiogra|ultraso|imaging|radiograph")
#: "cath" is a catheter with a device's word next to it ("Foley cath", "straight cath", "PICC
#: cath", "cath site"), and otherwise the heart's catheterization, which the schema makes a
#: Test ("s/p cath w/ stent", "Cardiology to arrange cath", "L heart cath")
_DEVICE_BEFORE = re.compile(
    r"(?:foley|straight|urinary|bladder|central|picc|ij|dialysis|hd|suprapubic|i/o|condom"
    r"|pigtail|arterial|venous|tunneled|coude|in[- ]and[- ]out)[ \t]+$",
    re.IGNORECASE,
)
_DEVICE_AFTER = re.compile(
    r"[ \t]+(?:site|tip|placement|placed|in place|removed|removal|exchange|change|care"
    r"|insertion|inserted|bag|line)\b",
    re.IGNORECASE,
)


#: The types of a model's span that a finding in shorthand at its edge retypes a Problem.
_RETYPED = frozenset({"Test", "Result", "Drug", "Procedure", "Anatomy"})


class ShorthandFinder:
    """Clinical shorthand as entities: a short form of the typed table, written as notes write
    it (a spelling of the inventories' that has a capital, a digit or a sign, or four letters or
    more: "HTN", "N/V", "DM2", "bilat"), standing as a word of its own, is an entity of its
    type. Where the model found the same span with another type, the type is the table's;
    where it found nothing there, the entity is added (:data:`FOUND_CONFIDENCE`); where it
    found an overlapping span, the model's stands — but for a site: a short form of Anatomy
    that begins or ends a model's finding, test or procedure ("BLE edema", "TTP RUQ", "RUQ
    US") is cut from it, the schema's site named apart, the rest keeping the model's type, and
    for a finding: a short form of Problem that begins or ends a model's span of another type
    ("CKD stage 3b" read as a Result) makes it a Problem. A model's entity that is a short form
    of no entity ("Pt", "PRN", "SNF") is dropped. The short forms are the typed table's and
    ``shorthand-more.tsv``'s (procedures the inventory lacks: "appy", "TKA", "Foley")."""

    def __init__(
        self,
        types: Collection[str],
        table: Shorthand | None = None,
        typed: dict[str, str] | None = None,
        confidence: float = FOUND_CONFIDENCE,
        more: dict[str, str] | None = None,
    ):
        table = table if table is not None else packaged()
        typed = typed if typed is not None else read_types()
        self.types = frozenset(types)
        self.confidence = confidence
        self.kind: dict[str, str] = {}
        #: what each short form of a type may stand for, by its spelling in lower case ("abd":
        #: "abdomen", "abdominal" …)
        self.long: dict[str, tuple[str, ...]] = {}
        #: spellings that stand for no entity ("Pt", "PRN", "w/"): a model's entity that is
        #: one of them and nothing else is dropped
        self.never: set[str] = set()
        for short, kind in typed.items():
            senses = table.senses.get(short)
            if not senses or (kind != NONE and kind not in types):
                continue
            if kind != NONE:
                self.long[short.lower()] = tuple(sense.long for sense in senses)
            for spelling in senses[0].spellings():
                if kind == NONE:
                    self.never.add(spelling)
                elif spelling.lower() != spelling or not spelling.isalpha() or len(spelling) >= 4:
                    self.kind[spelling] = kind
        for spelling, kind in (read_more() if more is None else more).items():
            if kind == NONE:
                self.never.add(spelling)
            elif kind in types:
                self.kind.setdefault(spelling, kind)
        if not self.kind:  # a model of other types: its entities are not ours to judge
            self.never.clear()
        #: therapies in shorthand are found (the model's types have a Procedure)
        self.therapy = bool(self.kind) and "Procedure" in types
        #: contrast media and "LR" before a volume are found (the model's types have a Drug)
        self.agents = bool(self.kind) and "Drug" in types
        #: the spellings one of whose senses is imaging ("CTA"), a Test before a body region
        self.imaging = frozenset(
            spelling
            for spelling in self.kind
            if "Test" in types
            and any(_IMAGING.search(long) for long in self.long.get(spelling.lower(), ()))
        )
        ordered = sorted(self.kind, key=len, reverse=True)
        alternatives = "|".join(re.escape(s) for s in ordered) or r"(?!)"
        self.pattern = re.compile(r"(?<![\w/&.-])(?:" + alternatives + r")(?![\w/&-]|\.\w)")

    def _kind(self, text: str, spelling: str, end: int) -> str:
        """The type of the short form ``spelling`` that ends at ``end`` of ``text``: its
        table's, or a Test where a sense of it is imaging and a body region follows it
        (:data:`_REGION_AFTER`), or "cath" with no device's word next to it
        (:data:`_DEVICE_BEFORE`, :data:`_DEVICE_AFTER`)."""
        kind = self.kind[spelling]
        if spelling.lower() == "cath" and "Test" in self.types:
            start = end - len(spelling)
            device = _DEVICE_BEFORE.search(text, max(0, start - 20), start)
            return kind if device or _DEVICE_AFTER.match(text, end) else "Test"
        if spelling in self.imaging and kind != "Test" and _REGION_AFTER.match(text, end):
            return "Test"
        return kind

    def spelled_out(self, is_a: Callable[[str], bool]) -> Callable[[str], bool]:
        """``is_a`` that also says yes where the words, their first spelled out in one of its
        senses, say yes ("abd pain": "abdominal pain")."""

        def check(words: str) -> bool:
            if is_a(words):
                return True
            first, sep, rest = words.partition(" ")
            spelled = self.long.get(first.lower(), ())
            return bool(sep) and any(is_a(f"{long} {rest}") for long in spelled)

        return check

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, type) of each short form in ``text``, in order; with the therapies
        (:func:`therapies`) where the model's types have a Procedure, and contrast media and
        lactated Ringer's (:func:`agents`) where they have a Drug."""
        found = [
            (m.start(), m.end(), self._kind(text, m.group(), m.end()))
            for m in self.pattern.finditer(text)
        ]
        extra = [(a, b, "Procedure") for a, b in therapies(text)] if self.therapy else []
        if self.agents:
            extra += [(a, b, "Drug") for a, b in agents(text)]
        if extra:
            spans = {(a, b) for a, b, _ in found}
            found += [(a, b, k) for a, b, k in extra if (a, b) not in spans]
            found.sort()
        return found

    def merged(
        self, text: str, entities: Sequence[Entity], heads: Sequence[tuple[int, int]] = ()
    ) -> list[Entity]:
        """``entities`` with the shorthand of ``text`` typed and added (see the class), but
        on its section headers (``heads``: "CV:", "GU:" are headers, not entities)."""
        if self.never:  # a regimen's "PRN", "BID" typed as its part stays
            entities = [e for e in entities if e.text not in self.never or e.type in REGIMEN_TYPES]
            entities = [e for e in map(partial(_without_connectors, text), entities) if e]
        found = [
            (a, b, k) for a, b, k in self.find(text) if not any(h < b and a < e for h, e in heads)
        ]
        if not found:
            return list(entities)
        entities = self._sites_apart(text, entities, found)
        exact = {(e.start, e.end): i for i, e in enumerate(entities)}
        out = list(entities)
        added = []
        for a, b, kind in found:
            i = exact.get((a, b))
            if i is not None:
                if out[i].type != kind:
                    out[i] = with_fields(out[i], type=kind)
            elif not any(e.start < b and a < e.end for e in entities):
                c = self.confidence
                added.append(Entity(a, b, text[a:b], kind, c, c, 1.0))
            elif kind == "Problem":
                # a finding in shorthand that begins or ends a model's span of another type
                # ("CKD stage 3" read as a Test, "breast ca" as a site): the span is a finding
                for j, e in enumerate(out):
                    if (
                        e.type in _RETYPED
                        and (e.start == a or e.end == b)
                        and e.start <= a < b <= e.end
                    ):
                        out[j] = with_fields(e, type=kind)
        return sorted([*out, *added], key=lambda e: (e.start, e.end)) if added else out

    def _sites_apart(
        self, text: str, entities: Sequence[Entity], found: Sequence[tuple[int, int, str]]
    ) -> list[Entity]:
        """``entities`` with each short form of Anatomy in ``found`` that begins or ends one of
        them (of another type) cut out of it: the rest, tidied as the layout tidies a span
        (:func:`mslm_core.layout.tidied`), keeps its type and confidences (none is left when
        it holds no letter or digit); the site itself is added by
        :meth:`merged`, as a short form where the model found nothing."""
        out = list(entities)
        for a, b, kind in found:
            if kind != "Anatomy":
                continue
            for i, e in enumerate(out):
                if e.type == "Anatomy" or (e.start, e.end) == (a, b):
                    continue
                if not (e.start <= a and b <= e.end and (e.start == a or e.end == b)):
                    continue
                rest = tidied(text, *((b, e.end) if e.start == a else (e.start, a)))
                if rest is not None and any(c.isalnum() for c in text[slice(*rest)]):
                    start, end = rest
                    out[i] = with_fields(e, start=start, end=end, text=text[start:end])
                else:
                    del out[i]
                break
        return sorted(out, key=lambda e: (e.start, e.end))
