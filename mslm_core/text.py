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


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (rule-based; never drops a character
    that belongs to a word). Leading/trailing whitespace of each sentence is excluded."""
    spans: list[tuple[int, int]] = []
    for p_start, p_end in _split(text, _PARAGRAPH, 0, len(text)):
        start = p_start
        for m in _SENT_END.finditer(text, p_start, p_end):
            if _ends_with_abbreviation(text, start, m.start()):
                continue
            spans.append((start, m.start()))
            start = m.end()
        spans.append((start, p_end))
    return [s for s in (_strip(text, a, b) for a, b in spans) if s[0] < s[1]]


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
