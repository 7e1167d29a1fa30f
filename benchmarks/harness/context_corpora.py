"""BioScope's clinical part (Vincze et al. 2008: 1,954 radiology reports with negation and
speculation cues and their scopes) for the clinical context benchmark, and MTSamples' notes
for the sections benchmark.

BioScope's clinical part is released with every word replaced by ``*`` (the reports belong to
the 2007 CMC challenge); :func:`bioscope_gold` puts the challenge's words back — the n-th ``*``
of a report's part (Impression, History) is the n-th word of the same part in the CMC XML —
and turns every content word of a sentence (letters only, not a stop word) into a gold span:
negated when it lies in a negation scope, possible when in a speculation scope; the cue words
themselves are left out (no engine marks its own trigger). The reports' sentences are one per
line, so that every engine sees the same sentences. Both files are fetched at pinned commits
with pinned sha256 (``BioScope-clinical-anon`` and ``CMC2007`` in :mod:`mslm_core.corpora`),
never committed.
"""

from __future__ import annotations

import bisect
import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .clinical import GoldDocument, GoldEntity

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from mslm_core.inference import EntityExtractor

BIOSCOPE_FILE = "data/bioscope/clinical_merger/clinical_records_anon.xml"
CMC_FILES = ("2007ChallengeTrainData.xml", "2007ChallengeTestDataNoCodes.xml")
PARTS = {"Impression": "IMPRESSION", "History": "CLINICAL_HISTORY"}
WORD = re.compile(r"[A-Za-z0-9]+")
SPACE = re.compile(r"\s+")


def cmc_texts(files: Iterable[Path]) -> dict[str, dict[str, str]]:
    """CMC report id → {part type: its text}."""
    out: dict[str, dict[str, str]] = {}
    for path in files:
        for doc in ET.parse(path).getroot().iter("doc"):
            out[doc.get("id", "")] = {t.get("type", ""): t.text or "" for t in doc.iter("text")}
    return out


class _Builder:
    """A report's text, built piece by piece, with every filled-in word's span and what it
    is inside of."""

    def __init__(self, words: list[str]):
        self.words = iter(words)
        self.text: list[str] = []
        self.length = 0
        self.spans: list[tuple[int, int, frozenset[str], bool]] = []

    def add(self, piece: str, scopes: frozenset[str], in_cue: bool) -> None:
        piece = SPACE.sub(" ", piece)
        if not self.text or self.text[-1].endswith(("\n", " ")):
            piece = piece.lstrip(" ")
        for k, part in enumerate(piece.split("*")):
            if k:
                word = next(self.words)
                self.spans.append((self.length, self.length + len(word), scopes, in_cue))
                self._put(word)
            self._put(part)

    def _put(self, s: str) -> None:
        if s:
            self.text.append(s)
            self.length += len(s)

    def newline(self) -> None:
        while self.text and self.text[-1].endswith(" "):
            last = self.text.pop()
            self.length -= len(last)
            self._put(last.rstrip(" "))
        if self.text and not self.text[-1].endswith("\n"):
            self._put("\n")


def bioscope_gold(anon: Path, cmc: Iterable[Path]) -> tuple[list[GoldDocument], dict[str, Any]]:
    """The reports as gold documents (one span per word), and what could not be restored."""
    texts = cmc_texts(cmc)
    root = ET.parse(anon).getroot()
    docs: list[GoldDocument] = []
    report: dict[str, Any] = {"reports": 0, "parts": 0, "parts_skipped": [], "parts_truncated": []}
    for document in root.iter("Document"):
        doc_id = (document.findtext("DocID") or "").strip()
        cmc_doc = texts.get(doc_id)
        report["reports"] += 1
        cue_kind = {c.get("ref", ""): c.get("type", "") for c in document.iter("cue")}
        builder: _Builder | None = None
        for part in document.iter("DocumentPart"):
            report["parts"] += 1
            stars = "".join(part.itertext()).count("*")
            words = WORD.findall(
                html.unescape((cmc_doc or {}).get(PARTS[part.get("type", "")], ""))
            )
            if cmc_doc is None or stars > len(words):
                report["parts_skipped"].append(f"{doc_id}/{part.get('type')}")
                continue
            if stars < len(words):  # the annotation covers the part's first words only
                report["parts_truncated"].append(f"{doc_id}/{part.get('type')}")
            if builder is None:
                builder = _Builder([])
            builder.words = iter(words[:stars])
            for sentence in part.iter("sentence"):
                _walk(sentence, builder, frozenset(), False, cue_kind, top=True)
                builder.newline()
        if builder is None:
            continue
        text = "".join(builder.text)
        entities = [
            GoldEntity(
                a,
                b,
                "Word",
                negated=any(cue_kind.get(s) == "negation" for s in scopes),
                possible=any(cue_kind.get(s) == "speculation" for s in scopes),
            )
            for a, b, scopes, in_cue in builder.spans
            if not in_cue and _content(text[a:b])
        ]
        docs.append(GoldDocument(doc_id, text, entities))
    return docs, report


# words no engine is asked about: the scored spans are the content words
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "than",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "which",
        "with",
    ]
)


def _content(word: str) -> bool:
    return word.isalpha() and len(word) > 1 and word.lower() not in STOPWORDS


def _walk(
    node: ET.Element,
    builder: _Builder,
    scopes: frozenset[str],
    in_cue: bool,
    cue_kind: dict[str, str],
    top: bool = False,
) -> None:
    if node.tag == "xcope":
        scopes = scopes | {node.get("id", "")}
    elif node.tag == "cue":
        in_cue = True
    if node.text:
        builder.add(node.text, scopes, in_cue)
    for child in node:
        _walk(child, builder, scopes, in_cue, cue_kind)
        if child.tail:  # the tail lies outside the child
            builder.add(child.tail, scopes, in_cue)


# -- MTSamples: notes with section headers ----------------------------------------------------
MTSAMPLES_FILE = "data/mtsamples.rda"
# mtsamples.com's CSV flattened each note to one line, a header written "HEADER:," where a
# new line began: the line breaks are put back before each
FLATTENED_HEADER = re.compile(r",?[ \t]*\b([A-Z][A-Z0-9 /&()'-]{0,80}[A-Z)])[ \t]*:[ \t]*,[ \t]*")
# a header line of the restored note: its upper-case words and colon
HEADER_LINE = re.compile(r"^([A-Z][A-Z0-9 /&()'-]{0,80}[A-Z)]):", re.MULTILINE)


def mtsamples_notes(rda: Path) -> list[tuple[str, str, str]]:
    """(note id, medical specialty, text) of every note with a transcription, its headers on
    lines of their own again (``rdata`` reads the R data file)."""
    import rdata

    frame = rdata.read_rda(str(rda))["mtsamples"]
    out = []
    for note_id, specialty, text in zip(
        frame["note_id"], frame["medical_specialty"], frame["transcription"], strict=True
    ):
        if not isinstance(text, str) or not text.strip():
            continue
        restored = FLATTENED_HEADER.sub(lambda m: "\n" + m.group(1) + ": ", text).strip()
        out.append((str(note_id), str(specialty).strip(), restored))
    return out


def silver_section(header: str) -> str | None:
    """The section a header names, by its words alone, for the sections that set an
    attribute (the same rule for every engine): family history, past medical history, past
    surgical history, allergies."""
    h = header.lower()
    words = set(re.findall(r"[a-z]+", h))
    if words & {"fhx", "fh"} or ("family" in words and words & {"history", "hx"}):
        return "family_history"
    if words & {"allergy", "allergies"}:
        return "allergy"
    if words & {"psh", "pshx"} or (
        words & {"surgical", "surgeries", "operations"} and words & {"history", "hx", "past"}
    ):
        return "past_surgical_history"
    if words & {"pmh", "pmhx"} or (
        words & {"past", "medical"}
        and words & {"history", "hx"}
        and not words & {"social", "present", "family", "psychiatric", "surgical"}
    ):
        return "past_medical_history"
    return None


ATTRIBUTE_SECTIONS = ("family_history", "past_medical_history", "past_surgical_history", "allergy")


def score_sections(
    notes: list[tuple[str, str, str]], systems: dict[str, tuple[list[list[list[Any]]], float]]
) -> dict[str, Any]:
    """Each system's sections (per note, ``[header start, header end, category]``) against
    the notes' header lines: the share of header lines it recognises as a section at all
    (coverage), and, for the sections that set an attribute, P/R/F1 against the header's own
    words (:func:`silver_section`) with 95 % intervals from 1,000 bootstrap resamples of the
    notes; and the time per note."""
    import numpy as np

    lines = [[(m.start(), m.group(1)) for m in HEADER_LINE.finditer(t)] for _, _, t in notes]
    total = sum(map(len, lines))
    out: dict[str, Any] = {"notes": len(notes), "header_lines": total, "ms_per_note": {}}
    silver = [[silver_section(h) for _, h in ls] for ls in lines]
    out["silver_header_lines"] = {
        c: sum(s == c for ss in silver for s in ss) for c in ATTRIBUTE_SECTIONS
    }
    rng = np.random.default_rng(31)
    samples = [rng.integers(0, len(notes), len(notes)) for _ in range(1000)]
    for name, (found, seconds) in systems.items():
        out["ms_per_note"][name] = round(1000 * seconds / max(1, len(notes)), 3)
        recognised = 0
        counts = np.zeros((len(notes), len(ATTRIBUTE_SECTIONS), 3), np.int64)
        for k, (ls, ss, sections) in enumerate(zip(lines, silver, found, strict=True)):
            at = {start: category for start, _, category in sections}
            for (start, _), gold in zip(ls, ss, strict=True):
                said = at.get(start)
                recognised += said is not None
                for j, c in enumerate(ATTRIBUTE_SECTIONS):
                    counts[k, j] += (
                        gold == c and said == c,
                        said == c and gold != c,
                        gold == c and said != c,
                    )
        block: dict[str, Any] = {"coverage": round(recognised / max(1, total), 4)}
        for j, c in enumerate(ATTRIBUTE_SECTIONS):

            def f1(v: npt.NDArray[np.int64]) -> tuple[float, float, float]:
                tp, fp, fn = (int(x) for x in v)
                p = tp / (tp + fp) if tp + fp else 0.0
                r = tp / (tp + fn) if tp + fn else 0.0
                return p, r, (2 * p * r / (p + r) if p + r else 0.0)

            p, r, f = f1(counts[:, j].sum(0))
            boot = sorted(f1(counts[idx, j].sum(0))[2] for idx in samples)
            block[c] = {
                "precision": round(p, 4),
                "recall": round(r, 4),
                "f1": round(f, 4),
                "f1_95ci": [round(boot[25], 4), round(boot[974], 4)],
            }
        out[name] = block
    return out


def bioscope_findings(docs: list[GoldDocument], extractor: EntityExtractor) -> list[GoldDocument]:
    """The reports with, as gold spans, the entities a model finds there (the types the
    context step negates: Problem, Test, Procedure, or every type of a model without the
    clinical schema), each negated or possible as its head — its last content word — is in
    BioScope's scopes: the findings a clinical reader is asked about, rather than every
    word of a scope."""
    from mslm_core.clinical_types import context_attributes

    out = []
    predicted = extractor.predictor.annotate([d.text for d in docs])
    for d, entities in zip(docs, predicted, strict=True):
        starts = [g.start for g in d.entities]
        found = []
        for e in entities:
            if "negated" not in context_attributes(e.type):
                continue
            inside = [
                g
                for g in d.entities[bisect.bisect_left(starts, e.start) :]
                if g.start < e.end
                if g.end <= e.end
            ]
            if inside:
                head = inside[-1]
                found.append(GoldEntity(e.start, e.end, "Finding", head.negated, head.possible))
        out.append(GoldDocument(d.name, d.text, found))
    return out
