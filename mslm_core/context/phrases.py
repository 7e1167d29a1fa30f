"""Phrases in rules files: a phrase is its lower-cased words, split the way notes are
(``mslm_core.text``); a ``pattern`` (spaCy-like token patterns: ``LOWER`` a word or
``{"IN": [...]}``, ``OP: "?"``) expands to every phrase it matches. Shared by the ConText rules
and the section headers. In rules (not headers), a word of a pattern may also be a number named
by its shape, spaCy's ``SHAPE`` ("dddd": a four-digit number such as a year, "ddddx": "1970s",
"ddx": "20s"; :func:`shape`). A word with a digit is matched by its digits or by its shape; one
phrase names its numbers one way or the other, not both."""

from __future__ import annotations

import itertools
import re
from typing import Any

from ..errors import ConfigError
from ..text import word_spans

MAX_EXPANSIONS = 10_000  # phrases one pattern may expand to
SHAPED = "\x00"  # a phrase's word that names a shape: this mark, then the shape ("\x00dddd")


def shape(word: str) -> str:
    """A word's shape as spaCy writes it (digits d, lower-case x, upper-case X, any other
    character itself; a run of one kind cut at four), marked as a shape (:data:`SHAPED`)."""
    out, last, run = [SHAPED], "", 0
    for ch in word:
        kind = "d" if ch.isdigit() else "x" if ch.islower() else "X" if ch.isupper() else ch
        run = run + 1 if kind == last else 1
        last = kind
        if run <= 4:
            out.append(kind)
    return "".join(out)


_DIGIT = re.compile(r"\d")


def has_digit(word: str) -> bool:
    return _DIGIT.search(word) is not None


def words(phrase: str) -> tuple[str, ...]:
    """A phrase cut into lower-cased words the way notes are (``mslm_core.text``)."""
    return tuple(phrase[a:b].lower() for a, b in word_spans(phrase))


def field_error(where: str, field_name: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: field {field_name!r}: {message}")


def expand(pattern: Any, where: str, shapes: bool = False) -> tuple[tuple[str, ...], ...]:
    """Every phrase ``pattern`` matches; ``shapes``: its words may be ``SHAPE``s."""
    if not isinstance(pattern, list) or not pattern:
        raise field_error(where, "pattern", "must be a non-empty list of word patterns or null")
    keys = ("LOWER", "SHAPE") if shapes else ("LOWER",)
    options: list[list[tuple[str, ...]]] = []
    for i, token in enumerate(pattern):
        at = f"pattern[{i}]"
        if not isinstance(token, dict) or sum(k in token for k in keys) != 1:
            raise field_error(where, at, f"must be an object with one of {', '.join(keys)}")
        extra = set(token) - {*keys, "OP"}
        if extra:
            supported = f"supported: {', '.join(keys)}, OP"
            raise field_error(where, at, f"unsupported key(s) {sorted(extra)}; {supported}")
        key = "LOWER" if "LOWER" in token else "SHAPE"
        value = token[key]
        if isinstance(value, dict):
            if set(value) != {"IN"} or not isinstance(value["IN"], list) or not value["IN"]:
                message = f'must be a {key.lower()} or {{"IN": [...]}}'
                raise field_error(where, f"{at}.{key}", message)
            choices = value["IN"]
        else:
            choices = [value]
        if key == "SHAPE":
            if not all(isinstance(c, str) and c and set(c) <= set("dxX") for c in choices):
                raise field_error(where, f"{at}.SHAPE", "every choice must be a shape of d, x, X")
            alts: list[tuple[str, ...]] = [(SHAPED + c,) for c in choices]
        elif not all(isinstance(c, str) and words(c) for c in choices):
            raise field_error(where, f"{at}.LOWER", "every choice must be a string holding a word")
        else:
            alts = [words(c) for c in choices]
        op = token.get("OP")
        if op == "?":
            alts.append(())
        elif op is not None:
            raise field_error(where, f"{at}.OP", f'only "?" is supported, got {op!r}')
        options.append(alts)
    count = 1
    for alts in options:
        count *= len(alts)
    if count > MAX_EXPANSIONS:
        message = f"expands to {count} phrases (at most {MAX_EXPANSIONS})"
        raise field_error(where, "pattern", message)
    phrases = {tuple(itertools.chain.from_iterable(combo)) for combo in itertools.product(*options)}
    phrases.discard(())
    if any(w.startswith(SHAPED) for p in phrases for w in p) and any(
        has_digit(w) for p in phrases for w in p if not w.startswith(SHAPED)
    ):
        message = "a number is matched by its shape: name it by SHAPE, not by its digits"
        raise field_error(where, "pattern", message)
    return tuple(sorted(phrases))
