"""Clinical context for each entity: negated, possible, hypothetical, historical, family —
the ConText algorithm over rules a site can extend (see :mod:`.rules` and :mod:`.engine`)."""

from .engine import ContextEngine
from .rules import (
    ATTRIBUTES,
    CATEGORIES,
    DIRECTIONS,
    Rule,
    RuleSet,
    default_rules,
    load_rules,
    rules_for,
)

__all__ = [
    "ATTRIBUTES",
    "CATEGORIES",
    "DIRECTIONS",
    "ContextEngine",
    "Rule",
    "RuleSet",
    "default_rules",
    "load_rules",
    "rules_for",
]
