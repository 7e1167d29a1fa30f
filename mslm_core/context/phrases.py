"""Phrases in rules files: a phrase is its lower-cased words, split the way notes are
(``mslm_core.text``); a ``pattern`` (spaCy-like token patterns: ``LOWER`` a word or
``{"IN": [...]}``, ``OP: "?"``) expands to every phrase it matches. Shared by the ConText rules
and the section headers."""

from __future__ import annotations

import itertools
from typing import Any

from ..errors import ConfigError
from ..text import word_spans

MAX_EXPANSIONS = 10_000  # phrases one pattern may expand to


def words(phrase: str) -> tuple[str, ...]:
    """A phrase cut into lower-cased words the way notes are (``mslm_core.text``)."""
    return tuple(phrase[a:b].lower() for a, b in word_spans(phrase))


def field_error(where: str, field_name: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: field {field_name!r}: {message}")


def expand(pattern: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(pattern, list) or not pattern:
        raise field_error(where, "pattern", "must be a non-empty list of word patterns or null")
    options: list[list[tuple[str, ...]]] = []
    for i, token in enumerate(pattern):
        at = f"pattern[{i}]"
        if not isinstance(token, dict) or "LOWER" not in token:
            raise field_error(where, at, 'must be an object with "LOWER"')
        extra = set(token) - {"LOWER", "OP"}
        if extra:
            supported = "supported: LOWER, OP"
            raise field_error(where, at, f"unsupported key(s) {sorted(extra)}; {supported}")
        value = token["LOWER"]
        if isinstance(value, dict):
            if set(value) != {"IN"} or not isinstance(value["IN"], list) or not value["IN"]:
                raise field_error(where, f"{at}.LOWER", 'must be a word or {"IN": [words…]}')
            choices = value["IN"]
        else:
            choices = [value]
        if not all(isinstance(c, str) and words(c) for c in choices):
            raise field_error(where, f"{at}.LOWER", "every choice must be a string holding a word")
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
    return tuple(sorted(phrases))
