"""OCR damage mended in what the model reads: ``c0ugh``, ``pulrnonary``, ``lNDlCATl0N``,
``10 rng``, ``G1ucose`` are read as ``cough``, ``pulmonary``, ``INDICATION``, ``10 mg``,
``Glucose``.

Scanned notes confuse a few shapes: ``0`` and ``o``, ``1``, ``l`` and ``I``, ``rn`` and ``m``.
:func:`mended` reads one word. A word the lexicon knows is left alone; otherwise each of those
places may be read the other way, and the variant the lexicon knows best wins (``pulrnonary``
→ ``pulmonary``, ``BlD`` → ``BID``, ``1eft`` → ``left``). A word no variant of which is known
is still mended where the damage is plain (:func:`_plain_damage`: ``thr0mb0phlebitis``,
``FlNDlNGS``). What is left alone: words of one or two characters (``T1``, ``Cl``, ``S1``), a
word with two digits in a row (``10th``, ``D15``), a number and its unit (``1cm``) or a name and
its number (``Table1``), a camel-case code (``mGluR1``) and an abbreviation's ``1`` (``GD1``).

The lexicon: the English word list of `pyspellchecker <https://pypi.org/project/pyspellchecker/>`_
(MIT; 160,000 words with their frequencies), the words of the packaged linking vocabulary
(MeSH names and synonyms: drugs, diseases, anatomy) and the clinical abbreviations and their
senses (``mslm_core/data/shorthand.tsv``), so that ``HbA1c``, ``HCO3``, ``SpO2`` stay as they
are. Only the words the model reads change: a mention's span, its text and everything rules
read (context, shorthand, measurements) stay the note's own characters; the linker looks a
mention up by its mended words (:func:`mended_text`).
"""

from __future__ import annotations

import csv
import gzip
import itertools
import re
from functools import cache
from pathlib import Path

from .shorthand import packaged
from .text import word_spans

__all__ = ["lexicon", "mended", "mended_text"]

#: The linking package's packaged vocabulary (``linking.builtin.DEFAULT_VOCABULARY``), by its
#: path: the linker reads words mended, so this module cannot import the linking package.
_MESH = Path(__file__).resolve().parent / "linking" / "data" / "mesh-default.tsv.gz"

#: The places a scanner misreads, and how each may be read instead (lower case).
_READINGS = {"rn": ("m",), "0": ("o",), "1": ("l", "i"), "l": ("i",)}
_PLACES = re.compile("|".join(sorted(map(re.escape, _READINGS), key=len, reverse=True)))
#: The digits a scanner makes of letters.
_DIGITS = "".join(place for place in _READINGS if place.isdigit())
#: A word worth a look: a digit that may be a letter beside a letter, ``rn``, an ``l`` beside a
#: capital or opening a word before a consonant (``lnsulin``).
_SUSPECT = re.compile(r"[a-zA-Z][01]|[01][a-zA-Z]|[rR][nN]|l[A-Z]|[A-Z]l|^l[^aeiouyl]")
#: At most this many places are tried together (2^8 variants).
_MOST_PLACES = 8
#: Two digits in a row not inside letters: a number ("10th", "100m", "D15"), never a damaged
#: word ("swe11ing" is one).
_CODE = re.compile(r"(?<![a-zA-Z])\d\d|\d\d(?![a-zA-Z])")
#: A small letter then a capital (neither an ``l``): a code ("mGluR1", "pT1bN0M0").
_CAMEL = re.compile(r"[a-km-z][A-Z]")
_TERM_WORD = re.compile(r"[a-z][a-z0-9]+")


@cache
def lexicon() -> dict[str, int]:
    """Every known word (lower case) and its frequency: pyspellchecker's English list, then the
    linking vocabulary's and the shorthand inventory's words (frequency 1 where the list has
    none)."""
    from spellchecker import SpellChecker

    words: dict[str, int] = dict(SpellChecker(language="en", distance=1).word_frequency.dictionary)
    extra: set[str] = set()
    with gzip.open(_MESH, "rt", encoding="utf-8") as f:
        for row in csv.reader((line for line in f if not line.startswith("#")), delimiter="\t"):
            for field in row[1:3]:
                extra.update(_TERM_WORD.findall(field.lower()))
    for senses in packaged().senses.values():
        for sense in senses:
            extra.update(_TERM_WORD.findall(f"{sense.short} {sense.long}".lower()))
    for word in extra:
        words.setdefault(word, 1)
    return words


def mended(word: str) -> str:
    """``word`` as it was before a scanner damaged it, or ``word`` itself."""
    if len(word) < 3 or not _SUSPECT.search(word) or _CODE.search(word):
        return word
    known = lexicon()
    lower = word.lower()
    if lower in known or sum(ch.isalpha() for ch in word) < 2 or _CAMEL.search(word):
        return word
    if (lower[0] == "1" and (lower[1:] in known or len(lower) < 5)) or (
        lower[-1] == "1" and lower[:-1] in known
    ):
        return word  # a number and its unit ("1cm", "1ug"), a name and its number ("Table1")
    places = [m.span() for m in _PLACES.finditer(lower)][:_MOST_PLACES]
    capitals = _is_capitals(word, places)
    options = [_readings(word, lower[a:b], capitals) for a, b in places]
    best, best_key = None, None
    for choice in itertools.product(*options):
        variant = _rebuild(lower, places, choice)
        if variant == lower or variant not in known:
            continue
        changes = sum(c != lower[a:b] for c, (a, b) in zip(choice, places, strict=True))
        key = (known[variant], -changes)
        if best_key is None or key > best_key:
            best, best_key = choice, key
    if best is not None:
        return _cased(word, places, best, capitals)
    return _plain_damage(word, capitals)


def mended_text(text: str) -> str:
    """``text`` with each of its words :func:`mended` (what a mention is linked by: ``c0ugh``
    is looked up as ``cough``)."""
    out, last = [], 0
    for a, b in word_spans(text):
        out += [text[last:a], mended(text[a:b])]
        last = b
    out.append(text[last:])
    return "".join(out)


def _readings(word: str, place: str, capitals: bool) -> tuple[str, ...]:
    """How a place may be read: as it stands, or as :data:`_READINGS` says, but for an
    abbreviation's ``1`` (a number: ``GD1``) and a short word of capitals' ``RN`` (two letters:
    ``RNFL``)."""
    if capitals and place == "1" and sum(ch.isalpha() for ch in word) < 4:
        return (place,)
    if capitals and place == "rn" and len(word) < 6:
        return (place,)
    return (place, *_READINGS[place])


def _rebuild(lower: str, places: list[tuple[int, int]], choice: tuple[str, ...]) -> str:
    out, last = [], 0
    for (a, b), c in zip(places, choice, strict=True):
        out += [lower[last:a], c]
        last = b
    out.append(lower[last:])
    return "".join(out)


def _cased(
    word: str, places: list[tuple[int, int]], choice: tuple[str, ...], capitals: bool
) -> str:
    """The chosen reading with the word's own case: capitals in a word of capitals."""
    out, last = [], 0
    for (a, b), c in zip(places, choice, strict=True):
        original = word[a:b]
        out.append(word[last:a])
        if c == original.lower():
            out.append(original)
        else:
            out.append(c.upper() if capitals else c)
        last = b
    out.append(word[last:])
    return "".join(out)


def _is_capitals(word: str, places: list[tuple[int, int]]) -> bool:
    inside = {i for a, b in places for i in range(a, b)}
    letters = [ch for i, ch in enumerate(word) if ch.isalpha() and i not in inside]
    return bool(letters) and all(ch.isupper() for ch in letters)


def _plain_damage(word: str, capitals: bool) -> str:
    """A word no reading of which is known, mended where the damage is plain: in a word of
    small letters with no other digit, a ``0`` or ``1`` with a letter before it and two after;
    in a word of four capitals or more, such a ``0`` and every ``l`` (a ``1`` there is a gene's
    or a stage's number: ``CSF1R``, ``T1WI``)."""
    letters = sum(ch.isalpha() for ch in word)
    small = all(ch.islower() for ch in word if ch.isalpha())
    if letters < 4 or not (small or capitals):
        return word
    if any(ch.isdigit() and ch not in _DIGITS for ch in word):
        return word
    out = []
    for i, ch in enumerate(word):
        # a letter before, two after: "thr0mb0phlebitis", not a code's "1a"
        after = word[i + 1 : i + 3]
        between = i > 0 and word[i - 1].isalpha() and len(after) == 2 and after.isalpha()
        if ch == "0" and between:
            out.append("O" if capitals else "o")
        elif ch == "1" and between and not capitals:
            out.append("l")
        elif ch == "l" and capitals:
            out.append("I")
        else:
            out.append(ch)
    return "".join(out)
