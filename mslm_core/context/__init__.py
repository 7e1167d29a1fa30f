"""Clinical context for each entity: negated, possible, hypothetical, historical, family —
the ConText algorithm over rules a site can extend (see :mod:`.rules` and :mod:`.engine`)."""

from .engine import ContextEngine
from .rules import (
    ATTRIBUTES,
    CATEGORIES,
    DEFAULT_PROFILE,
    DIRECTIONS,
    PROFILES,
    Rule,
    RuleSet,
    default_rules,
    load_rules,
    rules_for,
    with_profile,
)

__all__ = [
    "ATTRIBUTES",
    "CATEGORIES",
    "DEFAULT_PROFILE",
    "DIRECTIONS",
    "PROFILES",
    "ContextEngine",
    "Rule",
    "RuleSet",
    "default_rules",
    "load_rules",
    "rules_for",
    "with_profile",
]
