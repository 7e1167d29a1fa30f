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

Pure Python over the same word splitter as prediction; nothing here imports torch. Linear in
the length of the text (issue 29: it was quadratic in the number of trigger words, and one
request of 12,000 "no" held the service for a minute): overlaps are resolved with a per-word
owner table, a scope's end is a bisection in per-category position lists, and an entity looks
at the triggers nearest to it only — those a scope could reach (every scope is at most the
largest ``max_scope`` long), and at most :data:`MAX_TRIGGERS_SEEN` on each side when a rule
reaches to the end of its sentence.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..text import sentence_spans, word_spans
from ..types import Assertion, Cue, Entity
from .rules import ALL, ATTRIBUTES, CATEGORIES, Rule, RuleSet, default_rules

#: With a rule that reaches to the end of its sentence (no max_scope), an entity looks at this
#: many triggers on each side at most (nearest first); a clinical sentence has a handful.
MAX_TRIGGERS_SEEN = 64


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
        # first word → [(phrase length, {phrase: its rules})], longest first: a word costs a
        # look-up per phrase length, not a comparison per phrase ("no" starts ~100 of them)
        by_first: dict[str, dict[int, dict[tuple[str, ...], list[Rule]]]] = {}
        for rule in rules.rules:
            for phrase in rule.phrases:
                by_length = by_first.setdefault(phrase[0], {})
                by_length.setdefault(len(phrase), {}).setdefault(phrase, []).append(rule)
        self._index = {
            first: sorted(by_length.items(), reverse=True) for first, by_length in by_first.items()
        }
        # the farthest any trigger reaches, in words (None: some rule reaches to the end of
        # its sentence)
        reaches = [
            r.max_scope if r.max_scope is not None else self.max_scope
            for r in rules.rules
            if r.is_trigger
        ]
        bounded = [x for x in reaches if x is not None]
        self._reach: int | None = None if len(bounded) < len(reaches) else max(bounded, default=0)

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
            for k, phrases in self._index.get(w, ()):
                if i + k <= n:
                    for rule in phrases.get(tuple(words[i : i + k]), ()):
                        found.append(Match(i, i + k, rule))
        # longest first; of the same words, a pseudo-trigger first (it then takes them all)
        found.sort(key=lambda m: (m.start - m.end, m.start, m.rule.direction != "PSEUDO"))
        # owner[w]: the first kept match over word w. Kept matches never overlap but for
        # matches of the very same words, so checking m's own words against it is the same as
        # checking m against every kept match — in time linear in the words.
        owner: list[Match | None] = [None] * n
        kept: list[Match] = []
        for m in found:
            if all(
                (o := owner[j]) is None
                or ((o.start, o.end) == (m.start, m.end) and o.rule.direction != "PSEUDO")
                for j in range(m.start, m.end)
            ):
                kept.append(m)
                for j in range(m.start, m.end):
                    owner[j] = owner[j] or m
        kept.sort(key=lambda m: (m.start, m.end))
        return [m for m in kept if m.rule.direction != "PSEUDO"]

    def scopes(
        self, trigger: Match, matches: Sequence[Match] | Stops, rank: Sequence[int]
    ) -> list[tuple[int, int]]:
        """Word ranges ``[lo, hi)`` the trigger reaches in a sentence whose ``rank[i]`` counts
        the words (not punctuation) before word ``i`` (``len(rank)``: the words + 1).
        ``matches``: the sentence's matches, or their :class:`Stops` (built once per sentence
        when it has many triggers)."""
        stops = matches if isinstance(matches, Stops) else Stops(matches)
        rule = trigger.rule
        n = len(rank) - 1
        max_scope = rule.max_scope if rule.max_scope is not None else self.max_scope
        out: list[tuple[int, int]] = []
        if rule.direction in ("FORWARD", "BIDIRECTIONAL"):
            hi = min(n, stops.next_start(rule, trigger.end))
            if max_scope is not None:  # the first index past max_scope words
                hi = min(hi, bisect.bisect_left(rank, rank[trigger.end] + max_scope + 1) - 1)
            if hi > trigger.end:
                out.append((trigger.end, hi))
        if rule.direction in ("BACKWARD", "BIDIRECTIONAL"):
            lo = max(0, stops.last_end(rule, trigger.start))
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
            stops = Stops(matches)
            reach = []
            for t in triggers:
                c_start, c_end = spans[t.start][0], spans[t.end - 1][1]
                cue = Cue(CATEGORIES[t.rule.category], text[c_start:c_end], c_start, c_end)
                reach.append((t, self.scopes(t, stops, rank), cue))
            trigger_starts = [t.start for t in triggers]
            ends = [t for _, t in spans]
            word_starts = [s for s, _ in spans]
            for idx in members:
                e = entities[idx]
                # the entity's words: every word overlapping [e.start, e.end)
                lo = bisect.bisect_right(ends, e.start)
                hi = bisect.bisect_left(word_starts, e.end)
                if lo >= hi:
                    continue
                for k in self._near(trigger_starts, triggers, rank, lo, hi):
                    t, scopes, cue = reach[k]
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

    def _near(
        self,
        starts: Sequence[int],
        triggers: Sequence[Match],
        rank: Sequence[int],
        lo: int,
        hi: int,
    ) -> list[int]:
        """The indices of the triggers that may reach words ``[lo, hi)``: outwards from them,
        while a trigger is within the farthest reach (in words) of any rule — and, when a rule
        reaches to the end of the sentence, :data:`MAX_TRIGGERS_SEEN` on each side."""
        limit = MAX_TRIGGERS_SEEN if self._reach is None else len(triggers)
        out: list[int] = []
        left = bisect.bisect_left(starts, lo) - 1  # starting before the entity
        seen = 0
        while left >= 0 and seen < limit:
            t = triggers[left]
            if self._reach is not None and rank[lo] - rank[min(t.end, lo)] > self._reach:
                break
            out.append(left)
            left -= 1
            seen += 1
        right = bisect.bisect_left(starts, lo)  # starting inside or after it
        seen = 0
        while right < len(triggers) and seen < limit:
            t = triggers[right]
            if self._reach is not None and rank[t.start] - rank[hi] > self._reach:
                break
            out.append(right)
            right += 1
            seen += 1
        return out

    def apply_all(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> list[list[Entity]]:
        return [self.apply(t, ents) for t, ents in zip(texts, entities, strict=True)]


class Stops:
    """Where a sentence's scopes stop: for each category, the sorted starts and ends of its
    terminators and of its triggers (a rule may be ``terminated_by`` another category's
    triggers). A scope's end is then a bisection, not a pass over every match."""

    def __init__(self, matches: Sequence[Match]):
        terminators: dict[str, list[Match]] = {}
        triggers: dict[str, list[Match]] = {}
        for m in matches:
            if m.rule.direction == "TERMINATE":
                terminators.setdefault(m.rule.category, []).append(m)
            elif m.rule.is_trigger:
                triggers.setdefault(m.rule.category, []).append(m)
        self._starts = {
            (kind, c): sorted(m.start for m in ms)
            for kind, table in (("term", terminators), ("trig", triggers))
            for c, ms in table.items()
        }
        self._ends = {
            (kind, c): sorted(m.end for m in ms)
            for kind, table in (("term", terminators), ("trig", triggers))
            for c, ms in table.items()
        }

    def _lists(self, rule: Rule) -> list[tuple[str, str]]:
        keys = [("term", ALL), ("term", rule.category)]
        return keys + [("trig", c) for c in rule.terminated_by]

    def next_start(self, rule: Rule, at: int) -> int:
        """The first start ``>= at`` of a match that ends ``rule``'s forward scope (a large
        number when none)."""
        best = 1 << 62
        for key in self._lists(rule):
            found = self._starts.get(key)
            if found:
                i = bisect.bisect_left(found, at)
                if i < len(found):
                    best = min(best, found[i])
        return best

    def last_end(self, rule: Rule, at: int) -> int:
        """The last end ``<= at`` of a match that ends ``rule``'s backward scope (-1: none)."""
        best = -1
        for key in self._lists(rule):
            found = self._ends.get(key)
            if found:
                i = bisect.bisect_right(found, at) - 1
                if i >= 0:
                    best = max(best, found[i])
        return best
