"""A note's layout, read as clinicians lay it out: lines, list items and headers.

The model reads a note line by line (``mslm_core.text.sentence_spans`` ends a sentence at a line
break, but for prose wrapped at a fixed width); what it finds is then tidied to the layout:

- **no entity crosses a line break**: one that does (wrapped prose) keeps its longest line;
- **no bullet, list number or edge punctuation in a span**: ``- Lisinopril`` → ``Lisinopril``,
  ``# AKI`` → ``AKI``, ``PRN pain`` → ``pain``, nor a word that ends no entity at its end
  (``changes of`` → ``changes``), and an entity that is nothing but a list
  marker (``1.``) is dropped, as is one that starts with an age and sex (``52F c/o``) or a day
  of the stay (``HD2``, ``POD1``);
- **a header is never an entity**: one that overlaps a section header (``EXTREMITIES:``,
  ``HEENT:``, ``VS:``; ``mslm_core.context.sections``, OCR damage included), a title line or
  an organ label of a report's findings (``LIVER:``, ``Lungs/pleura:``) is dropped.

Every entity keeps its type and scores; offsets stay offsets into the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .context.sections import Sectionizer, default_sections
from .types import Entity, with_fields

# a list marker at the start of a line: a bullet, a problem-list "#", or a number or letter
# with . or )
_MARKER = re.compile(r"(?:[-*#\u2022\u00b7\u25aa\u25e6>]+|\(?\d{1,2}[.)]|[a-zA-Z][.)])(?=\s|$)")
# what a note opens a line or a span with that is no part of an entity: "PRN" before the
# finding a drug is taken for ("PRN pain"), "+" and "-" before a finding said present or not
_LEADING = re.compile(r"(?:PRN|prn|[+-])\s*(?=\w)")
# after a title: the day of the stay ("HD2", "- day 3", "POD 1") and the page ("Page 1 of 2")
_DAY = r"(?i:[ \t]+(?:-[ \t]+)?(?:day|hd|pod|ppd|dol)[ \t]?#?\d{1,3})?"
_PAGE = r"(?i:[ \t]+(?:page|pg\.?)[ \t]*\d+(?:[ \t]*(?:of|/)[ \t]*\d+)?)?"
# a title line: in capitals (an "l" for an I, as a scanner writes it), naming what the note is
_TITLE = re.compile(
    r"^[ \t]*((?=[^a-km-z\n]*\b(?:N[O0]TE|SUMMARY|REP[O0]RT|C[O0]NSULT(?:ATI[O0]N)?|H&P|"
    r"PR[O0]GRESS|ADMISSI[O0]N|DISCHARGE|RADI[O0]L[O0]GY|[O0]PERATIVE|ADDENDUM|TRIAGE|"
    r"REC[O0]NCILIATI[O0]N|P[O0]ST-[O0]P|MEDICATI[O0]NS?|MEDS|F[O0]LL[O0]W-?UP)\b)"
    r"[^a-km-z\n.]*[^a-km-z\n.:\s-])[ \t]*:?" + _DAY + _PAGE + r"[ \t]*$",
    re.MULTILINE,
)
# a title in capitalised words ("MICU Progress Note", "Cardiology Consult")
_TITLE_CASED = re.compile(
    r"^[ \t]*((?:[A-Z][\w/&-]*[ \t]+){0,5}(?:Note|Summary|Report|Consult(?:ation)?))"
    + _DAY
    + r"[ \t]*:?[ \t]*$",
    re.MULTILINE,
)
# the organs and body systems a report's findings or an exam are labelled by, one a line
# ("LIVER:", "Lungs/pleura:", "Pancreas, spleen, adrenals:", "Right kidney:"): the organ labels
# of RSNA's RadReport templates (CT chest, abdomen and pelvis; ultrasound) and the exam's
# systems, and a surgical or dialysis exam's sites (an incision, a wound, the access); a label of
# one or more of them, with a side or part before it, ends with a colon
_ORGANS = (
    "abdomen|abdominal wall|access|adrenal glands?|adrenals?|airways?|aorta|appendix|arteries|"
    "bile ducts?|biliary(?: tree)?|bladder|bones?|bowel|brain|breasts?|chest wall|chest|"
    "colon|esophagus|gallbladder|great vessels|heart|hila|hilum|incisions?|joints?|kidneys?|"
    "liver|lungs?|"
    "lymph nodes|mediastinum|muscles|neck|orbits|osseous structures|ovaries|pancreas|"
    "pelvis|pericardium|peritoneum|pleura|portal vein|prostate|pulmonary arteries|"
    "retroperitoneum|sinuses|small bowel|soft tissues|spine|spleen|stomach|thoracic inlet|"
    "thyroid|trachea|ureters?|urinary bladder|uterus|vasculature|veins|ventricles|vessels|"
    "wounds?"
)
_SIDE = r"(?:(?:right|left|bilateral|upper|lower|visualized|visualised|other)[ \t]+)?"
_ORGAN_LABEL = re.compile(
    rf"^[ \t]*(?:[-*\u2022]|\d{{1,2}}[.)])?[ \t]*({_SIDE}(?:{_ORGANS})"
    rf"(?:[ \t]*(?:,|/|&|\band\b)[ \t]*{_SIDE}(?:{_ORGANS}))*[ \t]*:)",
    re.IGNORECASE | re.MULTILINE,
)
# an age and sex ("52F", "69 yo M", "24 y/o F"), or a day of the stay ("HD2", "POD 1", "DOL 3"):
# never an entity, nor the start of one
_AGE_SEX = re.compile(
    r"\d{1,3}\s?(?:y/?o|yo|yr|y\.o\.)?\s?[MF](?![\w])|(?:HD|POD|PPD|DOL|hd|pod)\s?#?\d{1,3}\b"
)
_EDGE = ",;:.!?()[]{}\"'"
# a word that ends no entity: a preposition, an article or a conjunction left at its end
# ("Degenerative changes of", "thickening of the"), or a connector's torn first half ("Graves
# disease s/" of "s/p")
_TRAILING = re.compile(r"[ \t]+(?:of|the|and|or|to|with|in|on|at|for|by|from|[a-z]/)$")
_OPEN, _CLOSE = "([{", ")]}"


class Layout:
    """Tidies entities to their note's lines, list items and headers."""

    def __init__(self, sectionizer: Sectionizer | None = None):
        self.sectionizer = sectionizer or Sectionizer(default_sections())

    def headers(self, text: str) -> list[tuple[int, int]]:
        """The character spans of ``text``'s section headers, of its title lines ("HOSPITAL
        MEDICINE PROGRESS NOTE", "DISCHARGE SUMMARY - GENERAL SURGERY", "MICU Progress Note")
        and of the organ labels of its findings ("LIVER:", "Lungs/pleura:"), in order; the
        last two set no section."""
        found = [(s.header_start, s.header_end) for s in self.sectionizer.find(text)]
        for title in (_TITLE, _TITLE_CASED, _ORGAN_LABEL):
            found += [m.span(1) for m in title.finditer(text)]
        return sorted(set(found))

    def tidy(
        self,
        text: str,
        entities: Sequence[Entity],
        heads: Sequence[tuple[int, int]] | None = None,
    ) -> list[Entity]:
        """``entities`` tidied to ``text``'s layout (``heads``: its :meth:`headers`, when
        known already)."""
        if heads is None:
            heads = self.headers(text) if entities else []
        out = []
        for e in entities:
            span = tidied(text, e.start, e.end)
            if span is None:
                continue
            start, end = span
            if any(a < end and start < b for a, b in heads):
                continue
            if (start, end) != (e.start, e.end):
                e = with_fields(e, start=start, end=end, text=text[start:end])
            out.append(e)
        return out


def tidied(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``text[start:end]`` on one line, without a leading list marker or edge punctuation
    (a bracket is kept when its pair is inside); None when nothing is left."""
    if "\n" in text[start:end]:
        lines, pos = [], start
        for part in text[start:end].split("\n"):
            lines.append((pos, pos + len(part)))
            pos += len(part) + 1
        start, end = max(lines, key=lambda ab: len(text[ab[0] : ab[1]].strip()))
    while True:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start >= end:
            return None
        line_start = text.rfind("\n", 0, start) + 1
        marker = _MARKER.match(text, start, end) if not text[line_start:start].strip() else None
        if marker is not None:
            start = marker.end()
            continue
        if _AGE_SEX.match(text, start, end):
            return None
        leading = _LEADING.match(text, start, end)
        if leading is not None:
            start = leading.end()
            continue
        first, last = text[start], text[end - 1]
        span = text[start:end]
        if first in _OPEN and last == _CLOSE[_OPEN.index(first)] and span.count(last) == 1:
            start, end = start + 1, end - 1  # "(aspirin)": the pair around it
            continue
        if first in _EDGE and not (first in _OPEN and _CLOSE[_OPEN.index(first)] in span):
            start += 1
            continue
        if last in _EDGE and not (last in _CLOSE and _OPEN[_CLOSE.index(last)] in span):
            if last == "." and _abbreviated(span):
                return start, end
            end -= 1
            continue
        trailing = _TRAILING.search(span)
        if trailing is not None:
            end = start + trailing.start()
            continue
        return start, end


def _abbreviated(span: str) -> bool:
    """Whether a closing full stop belongs to the span: "q.d.", "p.o.", "a.m." keep theirs."""
    return bool(re.search(r"(?:^|[\s(])(?:[a-zA-Z]\.){2,}$", span))
