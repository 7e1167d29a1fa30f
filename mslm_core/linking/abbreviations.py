"""Abbreviations defined in a text, the Schwartz–Hearst way (Schwartz & Hearst, PSB 2003): a
short form in parentheses after its long form, ``adenomatous polyposis coli (APC)``, and the
long form found by matching the short form's characters right to left, its first character
at the start of a word."""

from __future__ import annotations

import re

_PAREN = re.compile(r"\(([^()]{1,20})\)")


def _short_form_ok(short: str) -> bool:
    words = short.split()
    return (
        1 <= len(words) <= 2
        and 2 <= len(short) <= 10
        and short[0].isalnum()
        and any(c.isalpha() for c in short)
    )


def best_long_form(short: str, candidate: str) -> str | None:
    """The shortest end of ``candidate`` that holds the characters of ``short`` in order,
    right to left, the first one starting a word; None when there is none."""
    s, pos = len(short) - 1, len(candidate) - 1
    while s >= 0:
        c = short[s].lower()
        if not c.isalnum():
            s -= 1
            continue
        while pos >= 0 and (
            candidate[pos].lower() != c or (s == 0 and pos > 0 and candidate[pos - 1].isalnum())
        ):
            pos -= 1
        if pos < 0:
            return None
        pos -= 1
        s -= 1
    start = candidate.rfind(" ", 0, pos + 1) + 1
    return candidate[start:].strip()


def abbreviations(text: str) -> dict[str, str]:
    """Short form → long form for each ``long form (SF)`` in ``text`` (the first definition of
    a short form wins)."""
    found: dict[str, str] = {}
    for match in _PAREN.finditer(text):
        short = match.group(1).strip()
        if not _short_form_ok(short) or short in found:
            continue
        before = text[: match.start()].rstrip()
        words = before.split()
        limit = min(len(short) + 5, len(short) * 2)
        candidate = " ".join(words[-limit:])
        # stop at a clause boundary: a long form does not cross punctuation
        for stop in (";", ":", ".", ",", "("):
            if stop in candidate:
                candidate = candidate.rsplit(stop, 1)[1]
        long = best_long_form(short, candidate.strip())
        if long and len(long) > len(short) and len(long.split()) <= limit:
            found[short] = long
    return found
