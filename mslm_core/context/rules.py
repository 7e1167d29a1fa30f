"""ConText rules: what a rule is, how a rules file reads, and how a site's file joins ours.

A rules file is JSON: ``{"max_scope": N, "rules": [RULE, …]}`` — ``max_scope``: the words
(punctuation not counted) a trigger reaches when its rule sets none (absent or null: the rest of
the sentence); other top-level keys (``name``, ``sources``, ``notes``) are documentation. A
RULE::

    {"literal": "no evidence of",          # the phrase (case-insensitive, cut into words)
     "category": "NEGATED_EXISTENCE",      # see CATEGORIES, or "ALL" for a terminator
     "direction": "FORWARD",               # see DIRECTIONS
     "pattern": null,                      # optional: words, each {"LOWER": "w"} or
                                           #   {"LOWER": {"IN": ["w1", "w2 w3"]}}, "OP": "?",
                                           #   or a number by its shape {"SHAPE": "dddd"}
     "max_scope": null,                    # optional: at most this many words of scope
     "allowed_types": null,                # optional: only entities of these types
     "excluded_types": null,               # optional: never entities of these types
     "terminated_by": null,                # optional: triggers of these categories end it
     "source": "medspacy"}                 # optional: where the rule comes from

The pattern form is the subset of spaCy's token patterns that medspaCy's ``context_rules.json``
uses (``LOWER`` with a word or ``IN`` a list, ``OP: "?"``), so those rules read unchanged, and
``SHAPE`` for a number ("in 2010": ``{"SHAPE": "dddd"}``; ``phrases.shape``); each pattern is
expanded here into the word sequences it matches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..types import ASSERTION_ATTRIBUTES
from .phrases import expand, field_error, words
from .sections import default_sections, parse_sections

# Category → the attribute an entity carries when a trigger of that category reaches it (the
# attributes: ``types.Assertion``; a test checks that every one has its category).
CATEGORIES: dict[str, str] = {
    "NEGATED_EXISTENCE": "negated",
    "POSSIBLE_EXISTENCE": "possible",
    "HYPOTHETICAL": "hypothetical",
    "HISTORICAL": "historical",
    "FAMILY": "family",
    "ALLERGY": "allergy",
}
ATTRIBUTES: tuple[str, ...] = tuple(ASSERTION_ATTRIBUTES)
ALL = "ALL"  # a terminator's category: it ends the scope of every category
# FORWARD/BACKWARD/BIDIRECTIONAL: a trigger and where its scope runs. TERMINATE: ends the scope
# of triggers of its category. PSEUDO: a phrase that contains a trigger but is not one
# ("no increase", "not only"); it only takes the words away from shorter matches.
DIRECTIONS = ("FORWARD", "BACKWARD", "BIDIRECTIONAL", "TERMINATE", "PSEUDO")
_FIELDS = {
    "literal",
    "category",
    "direction",
    "pattern",
    "max_scope",
    "allowed_types",
    "excluded_types",
    "terminated_by",
    "source",
    "comment",
}


@dataclass(frozen=True)
class Rule:
    literal: str
    category: str
    direction: str
    phrases: tuple[tuple[str, ...], ...]  # lower-cased word sequences the rule matches
    max_scope: int | None = None
    allowed_types: frozenset[str] | None = None
    excluded_types: frozenset[str] = frozenset()
    terminated_by: frozenset[str] = frozenset()
    source: str = ""

    @property
    def is_trigger(self) -> bool:
        return self.direction in ("FORWARD", "BACKWARD", "BIDIRECTIONAL")

    def applies_to(self, entity_type: str) -> bool:
        if entity_type in self.excluded_types:
            return False
        return self.allowed_types is None or entity_type in self.allowed_types


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    origin: str = ""
    max_scope: int | None = None  # words a trigger reaches when its rule sets no max_scope
    sections: Any = None  # context.sections.SectionRules: section headers and what they set

    def __len__(self) -> int:
        return len(self.rules)

    def only(self, categories: Iterable[str], directions: Iterable[str]) -> RuleSet:
        """The rules of these categories and directions (e.g. the NegEx-only baseline)."""
        cats, dirs = set(categories), set(directions)
        kept = tuple(r for r in self.rules if r.category in cats and r.direction in dirs)
        origin = f"{self.origin} ({'/'.join(sorted(cats))}, {'/'.join(sorted(dirs))})"
        return RuleSet(kept, origin, self.max_scope)  # no sections: triggers alone

    def extended_by(self, site: RuleSet) -> RuleSet:
        """``site``'s rules added to these; a site rule matching the same words as one of
        ours in the same role replaces ours — roles: trigger or pseudo-trigger (a site can turn
        our trigger into a pseudo-trigger and back), terminator of a category."""

        def keys(r: Rule) -> set[tuple[tuple[str, str] | str, tuple[str, ...]]]:
            role = ("TERMINATE", r.category) if r.direction == "TERMINATE" else "trigger"
            return {(role, p) for p in r.phrases}

        taken = set().union(*(keys(r) for r in site.rules)) if site.rules else set()
        kept = tuple(r for r in self.rules if not keys(r) & taken)
        max_scope = site.max_scope if site.max_scope is not None else self.max_scope
        sections = self.sections
        if site.sections:
            sections = sections.extended_by(site.sections) if sections else site.sections
        return RuleSet(kept + site.rules, f"{self.origin} + {site.origin}", max_scope, sections)


def _scope(value: Any, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise field_error(
            where, "max_scope", f"must be a positive whole number of words or null, got {value!r}"
        )
    return value


def _types(value: Any, where: str, name: str) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise field_error(where, name, "must be a list of entity type names or null")
    return frozenset(value)


def parse_rule(raw: Any, where: str) -> Rule:
    """One rule from its JSON object; errors name ``where`` and the field."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a rule must be an object, got {type(raw).__name__}")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(_FIELDS)}")
    literal = raw.get("literal")
    if not isinstance(literal, str) or not words(literal):
        raise field_error(where, "literal", "must be a string holding at least one word")
    where = f"{where} ({literal!r})"
    direction = raw.get("direction")
    if direction not in DIRECTIONS:
        raise field_error(
            where, "direction", f"must be one of {', '.join(DIRECTIONS)}, got {direction!r}"
        )
    category = raw.get("category")
    allowed_cats = (*CATEGORIES, ALL) if direction == "TERMINATE" else tuple(CATEGORIES)
    if category not in allowed_cats:
        raise field_error(
            where, "category", f"must be one of {', '.join(allowed_cats)}, got {category!r}"
        )
    pattern = raw.get("pattern")
    phrases = expand(pattern, where, shapes=True) if pattern is not None else (words(literal),)
    max_scope = _scope(raw.get("max_scope"), where)
    terminated_by = raw.get("terminated_by") or []
    if not isinstance(terminated_by, list) or any(c not in CATEGORIES for c in terminated_by):
        raise field_error(where, "terminated_by", f"must be a list of {', '.join(CATEGORIES)}")
    source = raw.get("source", "")
    if not isinstance(source, str):
        raise field_error(where, "source", "must be a string")
    return Rule(
        literal=literal,
        category=category,
        direction=direction,
        phrases=phrases,
        max_scope=max_scope,
        allowed_types=_types(raw.get("allowed_types"), where, "allowed_types"),
        excluded_types=_types(raw.get("excluded_types"), where, "excluded_types") or frozenset(),
        terminated_by=frozenset(terminated_by),
        source=source,
    )


def parse_rules(document: Any, origin: str) -> RuleSet:
    """A rules document: ``rules`` (triggers, pseudo-triggers, terminators) and, optionally,
    ``sections`` (headers, ``context.sections``) and ``section_attributes``."""
    if not isinstance(document, dict) or not isinstance(document.get("rules", []), list):
        raise ConfigError(f'{origin}: a rules file is a JSON object with a "rules" list')
    if "rules" not in document and "sections" not in document:
        raise ConfigError(f'{origin}: a rules file is a JSON object with a "rules" list')
    rules = tuple(
        parse_rule(raw, f"{origin}: rules[{i}]") for i, raw in enumerate(document.get("rules", []))
    )
    max_scope = _scope(document.get("max_scope"), origin)
    return RuleSet(rules, origin, max_scope, parse_sections(document, origin) or None)


def load_rules(path: str | Path) -> RuleSet:
    """A rules file (see the module docstring); errors say file, rule and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the context rules file: {exc.strerror}") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg} (column {exc.colno})") from exc
    return parse_rules(document, str(path))


def default_rules() -> RuleSet:
    """The rules this package ships (``rules.json``: medspaCy, negspacy and pyConTextNLP rules
    and our own, each with its source; origins and licences in the file's ``sources``)."""
    text = resources.files(__package__).joinpath("rules.json").read_text(encoding="utf-8")
    rules = parse_rules(json.loads(text), "mslm_core/context/rules.json")
    return RuleSet(rules.rules, rules.origin, rules.max_scope, default_sections())


#: The conventions a finding's context can follow, each a named profile: ``omop`` (our rules as
#: they are: a finding to rule out or evaluate for is hypothetical, as OMOP's Rule_out) and
#: ``context`` (ConText's and NegEx's reference conventions: such a finding is affirmed, under
#: consideration), each laid over the rules by its ``profile-NAME.json`` (none for ``omop``).
PROFILES = ("omop", "context")
DEFAULT_PROFILE = "omop"


def profile_rules(profile: str) -> RuleSet | None:
    """What ``profile`` lays over the rules (None: nothing, for ``omop``)."""
    if profile not in PROFILES:
        raise ConfigError(f"context profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    if profile == DEFAULT_PROFILE:
        return None
    name = f"profile-{profile}.json"
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return parse_rules(json.loads(text), f"mslm_core/context/{name}")


def with_profile(rules: RuleSet, profile: str) -> RuleSet:
    """``rules`` under ``profile``'s conventions."""
    overlay = profile_rules(profile)
    return rules if overlay is None else rules.extended_by(overlay)


def rules_for(
    site_file: str | Path | None, mode: str = "extend", profile: str = DEFAULT_PROFILE
) -> RuleSet:
    """The rules a service runs: ours under ``profile``'s conventions, ``extend``-ed by a
    site's file (its rules win over the profile's) or ``replace``-d by it (the profile laid
    over the site's)."""
    if mode not in ("extend", "replace"):
        raise ConfigError(f"context rules mode must be extend or replace, got {mode!r}")
    if site_file and mode == "replace":
        return with_profile(load_rules(site_file), profile)
    ours = with_profile(default_rules(), profile)
    return ours.extended_by(load_rules(site_file)) if site_file else ours
