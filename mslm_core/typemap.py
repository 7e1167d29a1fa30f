"""Type maps: how one corpus's entity types land on a job's target schema.

A type map is ``{source type: target}``; the target is

- a type name: the mentions are renamed (``"Sign_symptom": "Problem"``);
- ``null``: the mentions are dropped and their words are plain words (``O``) for every type;
- a list of type names: the mention is one of them, the corpus does not say which
  (``"Procedure": ["Procedure", "Test"]`` for CHIA, whose procedures are diagnostic and
  therapeutic alike). ``"O"`` in the list says it may also be no entity at all
  (``"Value": ["Result", "O"]``).

``"*"`` gives the target of every source type the map does not name; without it such types
keep their own name. A listed target is written into the mention's label as its members
sorted and joined by ``|`` (``"Procedure|Test"``, ``"O|Result"``): :func:`label_set` reads it
back. Training turns such labels into the set of tags a word may take (``mslm_core.partial``);
evaluation accepts any member (``metrics.judge``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import ConfigError

OUTSIDE = "O"
WILDCARD = "*"
SEPARATOR = "|"

Target = str | list[str] | None


def label_set(label: str) -> frozenset[str]:
    """The types a (mapped) mention label allows: ``"Procedure|Test"`` → {Procedure, Test};
    ``"O"`` among them: the mention may be no entity."""
    return frozenset(label.split(SEPARATOR))


def is_plain(label: str) -> bool:
    """A label naming exactly one type (no alternatives, not possibly ``O``)."""
    return SEPARATOR not in label


def _check_type(name: object, where: str, allow_outside: bool = False) -> str:
    if not isinstance(name, str):
        raise ConfigError(f"{where}: a type name must be a string, got {name!r}")
    if name == OUTSIDE and allow_outside:
        return name
    problem = None
    if not name.strip() or name != name.strip() or any(c.isspace() for c in name):
        problem = "must be a non-empty name without spaces"
    elif not name.isprintable():
        problem = "holds control characters"
    elif name == OUTSIDE:
        problem = "'O' means no entity: use null to drop a type, or list it with types"
    elif SEPARATOR in name or name == WILDCARD:
        problem = f"may not contain {SEPARATOR!r} or be {WILDCARD!r}"
    elif len(name) > 100:
        problem = "is longer than 100 characters"
    if problem:
        raise ConfigError(f"{where}: type {name!r} {problem}")
    return name


@dataclass(frozen=True)
class TypeMap:
    """A validated type map (see the module's docstring)."""

    mapping: tuple[tuple[str, tuple[str, ...] | None], ...] = ()

    @classmethod
    def parse(cls, data: Mapping[str, Any] | None, where: str = "type_map") -> TypeMap:
        """From JSON (``{source: target}``); a bad entry is a ConfigError naming its field."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: must be an object {{source type: target}}")
        if len(data) > 1000:
            raise ConfigError(f"{where}: at most 1,000 entries, got {len(data)}")
        items: list[tuple[str, tuple[str, ...] | None]] = []
        for source, target in data.items():
            field = f"{where}.{source}"
            if source != WILDCARD:
                _check_type(source, f"{where} (a key)")
            if target is None:
                items.append((source, None))
            elif isinstance(target, str):
                items.append((source, (_check_type(target, field),)))
            elif isinstance(target, list):
                members = sorted({_check_type(t, field, allow_outside=True) for t in target})
                if not [m for m in members if m != OUTSIDE]:
                    raise ConfigError(f"{field}: a list needs at least one type besides 'O'")
                items.append((source, tuple(members)))
            else:
                raise ConfigError(
                    f"{field}: the target must be a type name, a list of them or null, "
                    f"got {type(target).__name__}"
                )
        return cls(tuple(sorted(items)))

    def to_json(self) -> dict[str, Target]:
        out: dict[str, Target] = {}
        for source, target in self.mapping:
            if target is None:
                out[source] = None
            elif len(target) == 1 and target[0] != OUTSIDE:
                out[source] = target[0]
            else:
                out[source] = list(target)
        return out

    def __bool__(self) -> bool:
        return bool(self.mapping)

    def label(self, source_type: str) -> str | None:
        """The mention label a source type becomes (None: dropped)."""
        table = dict(self.mapping)
        target = table.get(source_type, table.get(WILDCARD, (source_type,)))
        return None if target is None else SEPARATOR.join(target)

    def targets(self, source_types: Iterable[str]) -> set[str]:
        """The target types these source types can become (``O`` not counted): the types a
        corpus with them annotates."""
        out: set[str] = set()
        for t in source_types:
            label = self.label(t)
            if label is not None:
                out |= label_set(label) - {OUTSIDE}
        return out

    def apply(self, sentences: Iterable[Any]) -> list[Any]:
        """Sentences (``corpus.Sentence``) with their mentions relabelled or dropped."""
        if not self.mapping:
            return list(sentences)
        out = []
        for s in sentences:
            kept: list[Any] = []
            index: dict[int, int] = {}  # a kept mention's index before → after
            for i, m in enumerate(s.mentions):
                label = self.label(m.label)
                if label is not None:
                    index[i] = len(kept)
                    kept.append(replace(m, label=label))
            relations = [(index[a], index[b]) for a, b in s.relations if a in index and b in index]
            out.append(replace(s, mentions=kept, relations=relations))
        return out
