"""Raw text → words and sentences, with character offsets into the original string.

The same word splitter is used to turn JSONL corpora into words and to read raw notes at
prediction time, so that training and serving see words cut the same way. Offsets index the
Python ``str`` (code points), end exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A word is a run of letters/digits/underscore, or a single other non-space character —
# the way the BLURB corpora are tokenised ("tumour-suppressor" → "tumour", "-", "suppressor").
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)

# Sentence end: . ! ? (optionally followed by closing quotes/brackets) then whitespace, and the
# next sentence starts with an upper-case letter, a digit or an opening bracket/quote.
_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# Blank lines always separate sentences (paragraphs, list items in clinical notes).
_PARAGRAPH = re.compile(r"\n\s*\n|\r\n\s*\r\n")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs dr mr mrs ms prof fig figs al approx no nos ref refs st cf pt pts".split()  # noqa: SIM905
)


def word_spans(text: str, boundaries: Iterable[int] = ()) -> list[tuple[int, int]]:
    """Character spans of the words of ``text``.

    ``boundaries`` are offsets where a word must be cut even inside a run of letters (entity
    boundaries in a JSONL corpus that fall inside a word). Whitespace never belongs to a word.
    """
    cuts = sorted({b for b in boundaries if 0 < b < len(text)})
    spans: list[tuple[int, int]] = []
    for m in _WORD.finditer(text):
        start, end = m.span()
        for cut in cuts:
            if start < cut < end:
                spans.append((start, cut))
                start = cut
        spans.append((start, end))
    return spans


def words_of(text: str) -> list[str]:
    """The words of ``text`` (:func:`word_spans`)."""
    return [text[a:b] for a, b in word_spans(text)]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (rule-based; never drops a character
    that belongs to a word). Leading/trailing whitespace of each sentence is excluded.

    A line break ends a sentence — list items, headers, vitals and the lines of a note are
    read apart, as the brat corpora's lines are in training — unless the line is prose
    wrapped at a fixed width: a long line (:data:`WRAPPED_LINE` characters) that ends without
    punctuation, followed by one that starts in lower case."""
    spans: list[tuple[int, int]] = []
    for p_start, p_end in _split(text, _PARAGRAPH, 0, len(text)):
        for l_start, l_end in _lines(text, p_start, p_end):
            start = l_start
            for m in _SENT_END.finditer(text, l_start, l_end):
                if _ends_with_abbreviation(text, start, m.start()):
                    continue
                spans.append((start, m.start()))
                start = m.end()
            spans.append((start, l_end))
    return [s for s in (_strip(text, a, b) for a, b in spans) if s[0] < s[1]]


#: A line at least this long that ends without punctuation and is followed by a line starting
#: in lower case is prose wrapped at a fixed width: its sentence goes on.
WRAPPED_LINE = 50
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*\u2022\u00b7\u25aa\u25e6]|\d{1,2}[.)])[ \t]")


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` cut at its line breaks, but where a wrapped line goes on."""
    out: list[tuple[int, int]] = []
    segment = line_start = start
    while (nl := text.find("\n", line_start, end)) != -1:
        line = text[line_start:nl].rstrip()
        rest = text[nl + 1 : end]
        wrapped = (
            len(line.strip()) >= WRAPPED_LINE
            and line[-1:].isalnum()
            and rest.lstrip()[:1].islower()
            and not _LIST_ITEM.match(rest)
        )
        if not wrapped:
            out.append((segment, nl))
            segment = nl + 1
        line_start = nl + 1
    out.append((segment, end))
    return out


def _split(text: str, pattern: re.Pattern[str], start: int, end: int) -> list[tuple[int, int]]:
    out, pos = [], start
    for m in pattern.finditer(text, start, end):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, end))
    return out


def _ends_with_abbreviation(text: str, start: int, end: int) -> bool:
    """True when the candidate sentence ends with an abbreviation such as "e.g." or "Dr."."""
    chunk = text[start:end].rstrip("\"')] \t\r\n")
    if not chunk.endswith("."):
        return False
    last = chunk[:-1].rsplit(None, 1)[-1] if chunk[:-1].strip() else ""
    last = last.lstrip("\"'([")
    # single letters ("J. Smith") and known abbreviations
    return len(last) == 1 or last.lower() in _ABBREVIATIONS


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# NUL, which PostgreSQL refuses in text, and lone surrogates, which no UTF-8 answer can hold
_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")


def character_problem(text: str) -> str | None:
    """What makes ``text`` unusable as a note, an id or a name — a NUL character, or a lone
    surrogate (a half of a UTF-16 pair, which no UTF-8 text can hold) — and where, else None.
    Every input boundary refuses the same two the same way."""
    found = _UNSENDABLE.search(text)
    if found is None:
        return None
    ch = found.group()
    what = "a NUL character" if ch == "\x00" else f"a lone surrogate (U+{ord(ch):04X})"
    return f"{what} at character {found.start()}"
