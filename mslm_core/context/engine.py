"""The ConText algorithm (Harkema, Dowling, Thornblade & Chapman, J Biomed Inform 2009): is a
finding negated, uncertain, hypothetical, historical, or about someone other than the patient?

Per sentence (and per line: clinical notes break lines between items), the rules' phrases are
found in the words; where matches overlap the longest wins, so a pseudo-trigger ("no
increase", "not only") takes its words away from the trigger inside it and then drops out. A
trigger's scope runs from it to the end of the sentence (FORWARD), back to its start
(BACKWARD) or both, and stops at the first terminator of its category (or of ``ALL``) — e.g.
"but", ";", "secondary to" — at a trigger of a category it is ``terminated_by``, or after
``max_scope`` words. An entity any of whose words lies in a scope, and which does not itself
hold the trigger, takes the trigger's attribute and the cue.

Pure Python over the same word splitter as prediction; nothing here imports torch.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..text import sentence_spans, word_spans
from ..types import Assertion, Cue, Entity
from .rules import ALL, ATTRIBUTES, CATEGORIES, Rule, RuleSet, default_rules


@dataclass(frozen=True)
class Match:
    start: int  # word index in the sentence
    end: int  # exclusive
    rule: Rule


def _scope_units(text: str) -> list[tuple[int, int]]:
    """Sentences, each further cut at line breaks."""
    out: list[tuple[int, int]] = []
    for a, b in sentence_spans(text):
        pos = a
        while (nl := text.find("\n", pos, b)) != -1:
            if nl > pos:
                out.append((pos, nl))
            pos = nl + 1
        if pos < b:
            out.append((pos, b))
    return out


class ContextEngine:
    """``engine.apply(text, entities)`` → the entities with their :class:`Assertion`."""

    def __init__(self, rules: RuleSet, max_scope: int | str | None = "rules"):
        """``max_scope``: words (punctuation not counted) a trigger reaches at most when its
        rule sets none; ``"rules"``: the rule set's own default; None: to the end of the
        sentence or the next terminator."""
        self.rules = rules
        if isinstance(max_scope, str) and max_scope != "rules":
            raise ValueError(f'max_scope must be a number, None or "rules", got {max_scope!r}')
        self.max_scope: int | None = rules.max_scope if isinstance(max_scope, str) else max_scope
        # first word → [(phrase, rule)], longest phrases first
        index: dict[str, list[tuple[tuple[str, ...], Rule]]] = {}
        for rule in rules.rules:
            for phrase in rule.phrases:
                index.setdefault(phrase[0], []).append((phrase, rule))
        for entries in index.values():
            entries.sort(key=lambda e: -len(e[0]))
        self._index = index

    @classmethod
    def default(cls) -> ContextEngine:
        return cls(default_rules())

    # -- matching ---------------------------------------------------------------------------
    def matches(self, words: Sequence[str]) -> list[Match]:
        """The rules' matches in ``words`` (lower-cased) after overlap resolution: the longest
        match wins; matches of exactly the same words all stay (one phrase may be a trigger of
        one category and a terminator of another) unless one is a pseudo-trigger, which takes
        the words alone. Pseudo-triggers are dropped last."""
        found: list[Match] = []
        n = len(words)
        for i, w in enumerate(words):
            for phrase, rule in self._index.get(w, ()):
                k = len(phrase)
                if i + k <= n and (k == 1 or tuple(words[i : i + k]) == phrase):
                    found.append(Match(i, i + k, rule))
        # longest first; of the same words, a pseudo-trigger first (it then takes them all)
        found.sort(key=lambda m: (m.start - m.end, m.start, m.rule.direction != "PSEUDO"))
        kept: list[Match] = []
        for m in found:
            if all(
                ((m.start, m.end) == (k.start, k.end) and k.rule.direction != "PSEUDO")
                or m.end <= k.start
                or k.end <= m.start
                for k in kept
            ):
                kept.append(m)
        kept.sort(key=lambda m: (m.start, m.end))
        return [m for m in kept if m.rule.direction != "PSEUDO"]

    def scopes(
        self, trigger: Match, matches: Sequence[Match], rank: Sequence[int]
    ) -> list[tuple[int, int]]:
        """Word ranges ``[lo, hi)`` the trigger reaches in a sentence whose ``rank[i]`` counts
        the words (not punctuation) before word ``i`` (``len(rank)``: the words + 1)."""
        rule = trigger.rule
        n = len(rank) - 1
        max_scope = rule.max_scope if rule.max_scope is not None else self.max_scope

        def ends(m: Match) -> bool:
            if m is trigger:
                return False
            if m.rule.direction == "TERMINATE":
                return m.rule.category in (ALL, rule.category)
            return m.rule.is_trigger and m.rule.category in rule.terminated_by

        out: list[tuple[int, int]] = []
        if rule.direction in ("FORWARD", "BIDIRECTIONAL"):
            hi = n
            for m in matches:
                if m.start >= trigger.end and ends(m):
                    hi = min(hi, m.start)
            if max_scope is not None:  # the first index past max_scope words
                hi = min(hi, bisect.bisect_left(rank, rank[trigger.end] + max_scope + 1) - 1)
            if hi > trigger.end:
                out.append((trigger.end, hi))
        if rule.direction in ("BACKWARD", "BIDIRECTIONAL"):
            lo = 0
            for m in matches:
                if m.end <= trigger.start and ends(m):
                    lo = max(lo, m.end)
            if max_scope is not None:
                lo = max(lo, bisect.bisect_left(rank, rank[trigger.start] - max_scope))
            if lo < trigger.start:
                out.append((lo, trigger.start))
        return out

    # -- entities ---------------------------------------------------------------------------
    def apply(self, text: str, entities: Sequence[Entity]) -> list[Entity]:
        """``entities`` (offsets into ``text``), each with its ``assertion`` set; order kept."""
        if not entities:
            return []
        units = _scope_units(text)
        starts = [a for a, _ in units]
        by_unit: dict[int, list[int]] = {}
        for idx, e in enumerate(entities):
            u = bisect.bisect_right(starts, e.start) - 1
            by_unit.setdefault(max(u, 0), []).append(idx)
        cues: list[list[tuple[int, Cue]]] = [[] for _ in entities]
        for u, members in by_unit.items():
            a, b = units[u] if units else (0, len(text))
            spans = [(a + s, a + t) for s, t in word_spans(text[a:b])]
            if not spans:
                continue
            words = [text[s:t].lower() for s, t in spans]
            matches = self.matches(words)
            triggers = [m for m in matches if m.rule.is_trigger]
            if not triggers:
                continue
            rank = [0]
            for w in words:
                rank.append(rank[-1] + (w[0].isalnum() or w[0] == "_"))
            # each trigger's scopes and cue, once per sentence
            reach = []
            for t in triggers:
                c_start, c_end = spans[t.start][0], spans[t.end - 1][1]
                cue = Cue(CATEGORIES[t.rule.category], text[c_start:c_end], c_start, c_end)
                reach.append((t, self.scopes(t, matches, rank), cue))
            ends = [t for _, t in spans]
            word_starts = [s for s, _ in spans]
            for idx in members:
                e = entities[idx]
                # the entity's words: every word overlapping [e.start, e.end)
                lo = bisect.bisect_right(ends, e.start)
                hi = bisect.bisect_left(word_starts, e.end)
                if lo >= hi:
                    continue
                for t, scopes, cue in reach:
                    if not t.rule.applies_to(e.type) or (t.start < hi and lo < t.end):
                        continue
                    if any(s_lo < hi and lo < s_hi for s_lo, s_hi in scopes):
                        distance = t.start - hi if t.start >= hi else lo - t.end
                        cues[idx].append((distance, cue))
        out: list[Entity] = []
        for e, found in zip(entities, cues, strict=True):
            ordered = tuple(c for _, c in sorted(found, key=lambda dc: (dc[0], dc[1].start)))
            flags = {attr: any(c.attribute == attr for c in ordered) for attr in ATTRIBUTES}
            out.append(replace(e, assertion=Assertion(**flags, cues=ordered)))
        return out

    def apply_all(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> list[list[Entity]]:
        return [self.apply(t, ents) for t, ents in zip(texts, entities, strict=True)]
