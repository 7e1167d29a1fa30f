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
the length of the text, however many trigger words it holds: overlaps are resolved with a per-word
owner table, a scope's end is a bisection in per-category position lists, and an entity looks
at the triggers nearest to it only — those a scope could reach (every scope is at most the
largest ``max_scope`` long), and at most :data:`MAX_TRIGGERS_SEEN` on each side when a rule
reaches to the end of its sentence.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..text import sentence_spans, word_spans
from ..types import Assertion, Cue, Entity
from .phrases import SHAPED, has_digit, shape
from .rules import (
    ALL,
    ATTRIBUTES,
    CATEGORIES,
    DEFAULT_PROFILE,
    Rule,
    RuleSet,
    rules_for,
    with_profile,
)
from .sections import Section, Sectionizer

#: With a rule that reaches to the end of its sentence (no max_scope), an entity looks at this
#: many triggers on each side at most (nearest first); a clinical sentence has a handful.
MAX_TRIGGERS_SEEN = 64
#: What separates the items of a coordinated list, and how long an item may be: a forward
#: scope that reaches into a list runs to the list's end, past its word limit ("denies fever,
#: chills, nausea, vomiting, diarrhea, …, or rash"), and stops before a longer stretch, which
#: is a new clause rather than an item. At most LIST_ITEMS items past the limit.
LIST_SEPARATORS = frozenset({",", "and", "or", "nor", "/"})
LIST_ITEM_WORDS = 4
LIST_ITEMS = 64
#: An announced list: a forward trigger followed, within this many words, by a colon ("call
#: your doctor for any of the following: fever greater than 101, …, weight gain of more than
#: three pounds per day, or dizziness") reaches every item to its clause's end, however long
#: each item is; on a line that ends with the colon, the list items on the lines below it
#: ("Return if you develop:" then "- chest pain", "- fainting").
ANNOUNCED_WITHIN = 6
#: A line that is an item of a list: a bullet or a number first ("- chest pain", "2) fainting").
LIST_ITEM_LINE = re.compile(r"\s*(?:[-*\u2022\u00b7\u25aa\u2023\u2013]|\d{1,2}[.)])\s+\S")
_CARRIED = 1 << 40  # a carried cue's "distance": after the triggers of the entity's own line
#: A section's attribute that gives way to a trigger of another attribute on the entity: a
#: relative's illness named under Past Medical History is the family's, not the patient's past.
SECTION_YIELDS: dict[str, frozenset[str]] = {
    "historical": frozenset({"family"}),
    "hypothetical": frozenset({"negated"}),  # "Discharge instructions: … no signs of infection"
}
#: Per profile, an attribute that gives way to another's cue on the same finding, whatever set
#: it. ConText's convention: a finding said to be absent has no past of its own ("no history of
#: seizures", "s/p lumpectomy, with no recurrence": negated, not historical); MACCROBAT marks
#: such findings historical, and the default profile keeps both. Under both, what may come is
#: not history ("once the infection is completely resolved": hypothetical, not historical).
YIELDS: dict[str, dict[str, frozenset[str]]] = {
    "omop": {"historical": frozenset({"hypothetical"})},
    "context": {"historical": frozenset({"negated", "hypothetical"})},
}
_CATEGORY_OF = {attribute: category for category, attribute in CATEGORIES.items()}
_HEADER = 1 << 62  # a section header's "distance": its cue comes after every trigger's
#: Shorthand that negates itself: "NKDA" (no known drug allergies), "NAD" (no acute distress)
#: is a finding said to be absent, its own cue.
SELF_NEGATED = frozenset({"nkda", "nka", "nkfa", "nkma", "nad"})


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


def _words(text: str, a: int, b: int) -> tuple[list[tuple[int, int]], list[str]]:
    """The words of ``text[a:b]``: their spans in ``text`` and their lower-cased forms."""
    spans = [(a + s, a + t) for s, t in word_spans(text[a:b])]
    return spans, [text[s:t].lower() for s, t in spans]


def _ranks(words: Sequence[str]) -> list[int]:
    """``rank[i]``: the words (not punctuation) before word ``i``; ``len(words) + 1`` long."""
    rank = [0]
    for w in words:
        rank.append(rank[-1] + (w[0].isalnum() or w[0] == "_"))
    return rank


def _ends_with_colon(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` ends with a colon, trailing blanks aside."""
    return text[a:b].rstrip().endswith(":")


class ContextEngine:
    """``engine.apply(text, entities)`` → the entities with their :class:`Assertion`."""

    def __init__(
        self,
        rules: RuleSet,
        max_scope: int | str | None = "rules",
        profile: str = DEFAULT_PROFILE,
        site: tuple[str | Path | None, str] | None = None,
    ):
        """``max_scope``: words (punctuation not counted) a trigger reaches at most when its
        rule sets none; ``"rules"``: the rule set's own default; None: to the end of the
        sentence or the next terminator. ``profile``: the conventions ``rules`` follow
        (``rules.PROFILES``); ``site``: the site's rules file and mode they were made with
        (:meth:`configured`), so that :meth:`with_profile` makes them again under another."""
        self.rules = rules
        self.profile = profile
        self._site = site
        self._profiles: dict[str, ContextEngine] = {profile: self}
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
        self._shaped = any(w.startswith(SHAPED) for r in rules.rules for p in r.phrases for w in p)
        # the farthest any trigger reaches, in words (None: some rule reaches to the end of
        # its sentence)
        reaches = [
            r.max_scope if r.max_scope is not None else self.max_scope
            for r in rules.rules
            if r.is_trigger
        ]
        bounded = [x for x in reaches if x is not None]
        # nested triggers' ends are not in start order: a start bounds an end by this much
        self._longest = max((len(p) for r in rules.rules for p in r.phrases), default=1)
        self._reach: int | None = None if len(bounded) < len(reaches) else max(bounded, default=0)
        self.sectionizer = Sectionizer(rules.sections) if rules.sections else None

    @classmethod
    def default(cls) -> ContextEngine:
        return cls.configured()

    @classmethod
    def configured(
        cls,
        site_file: str | Path | None = None,
        mode: str = "extend",
        profile: str = DEFAULT_PROFILE,
    ) -> ContextEngine:
        """Our rules under ``profile``, extended or replaced by a site's file
        (``rules.rules_for``)."""
        return cls(rules_for(site_file, mode, profile), profile=profile, site=(site_file, mode))

    def with_profile(self, profile: str) -> ContextEngine:
        """This engine under ``profile``'s conventions (made once, then kept): its rules made
        again under it, or, for rules given as they are, the profile laid over them."""
        found = self._profiles.get(profile)
        if found is None:
            if self._site is not None:
                found = ContextEngine.configured(*self._site, profile)
            else:
                found = ContextEngine(with_profile(self.rules, profile), profile=profile)
            found._profiles = self._profiles  # one family: each profile made once
            self._profiles[profile] = found
        return found

    # -- matching ---------------------------------------------------------------------------
    def matches(self, words: Sequence[str]) -> list[Match]:
        """The rules' matches in ``words`` (lower-cased) after overlap resolution: the longest
        match wins; matches of exactly the same words all stay (one phrase may be a trigger of
        one category and a terminator of another) unless one is a pseudo-trigger, which takes
        the words alone. Pseudo-triggers are dropped last."""
        found: list[Match] = []
        n = len(words)
        # a word with a digit is also read as its shape ("2010" → dddd: "in 2010"), when a
        # rule names one
        shaped = [shape(w) if has_digit(w) else w for w in words] if self._shaped else words
        for i, w in enumerate(words):
            for k, phrases in self._index.get(w, ()):
                if i + k <= n:
                    for rule in phrases.get(tuple(words[i : i + k]), ()):
                        found.append(Match(i, i + k, rule))
            for k, phrases in self._index.get(shaped[i], ()) if shaped is not words else ():
                if i + k <= n:
                    key = tuple(shaped[i : i + k])
                    if key != tuple(words[i : i + k]):  # a phrase with a shape in it
                        for rule in phrases.get(key, ()):
                            found.append(Match(i, i + k, rule))
        # longest first; of the same words, a pseudo-trigger first (it then takes them all). A
        # shorter trigger inside a longer one of its category whose scope runs the other way
        # stays ("EXTREMITIES: No edema": ": no" looks back, "no" forward)
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
                or _reaches_elsewhere(m.rule, o.rule)
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
            clause = min(n, stops.next_start(rule, trigger.end))
            hi = clause
            if stops.announces(trigger.end, clause, rank):
                max_scope = None  # an announced list: to its clause's end
            if max_scope is not None:  # the first index past max_scope words
                hi = min(hi, bisect.bisect_left(rank, rank[trigger.end] + max_scope + 1) - 1)
                if hi < clause:
                    hi = stops.through_list(trigger.end, hi, clause, rank)
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
    # -- sections ---------------------------------------------------------------------------
    def section_of(self, text: str, entities: Sequence[Entity]) -> list[Section | None]:
        """The section each entity lies in (None: before the first header, or no section
        rules)."""
        if self.sectionizer is None or not entities:
            return [None] * len(entities)
        found = self.sectionizer.find(text)
        starts = [s.start for s in found]
        return [Sectionizer.at(found, starts, e.start) for e in entities]

    def sectioned(self, text: str, entities: Sequence[Entity]) -> list[Entity]:
        """``entities`` with their ``section`` (its category) set; nothing else changes."""
        return [
            replace(e, section=s.category if s else None)
            for e, s in zip(entities, self.section_of(text, entities), strict=True)
        ]

    def sectioned_all(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> list[list[Entity]]:
        return [self.sectioned(t, ents) for t, ents in zip(texts, entities, strict=True)]

    def apply(self, text: str, entities: Sequence[Entity]) -> list[Entity]:
        """``entities`` (offsets into ``text``), each with its ``assertion`` and ``section``
        set; order kept. A section whose category sets an attribute (Family History → family)
        sets it on its entities, the header as the cue, after the triggers' cues."""
        if not entities:
            return []
        sections = self.section_of(text, entities)
        set_by = self.rules.sections.attributes if self.rules.sections else {}
        cues: list[list[tuple[int, Cue]]] = [[] for _ in entities]
        for idx, s in enumerate(sections):
            if s is not None and s.category in set_by:
                if s.inline and text.find("\n", s.header_end, entities[idx].start) != -1:
                    continue  # a header inside a line sets its attribute on that line only
                cue = Cue(set_by[s.category], s.header, s.header_start, s.header_end)
                cues[idx].append((_HEADER, cue))
        units = _scope_units(text)
        starts = [a for a, _ in units]
        by_unit: dict[int, list[int]] = {}
        for idx, e in enumerate(entities):
            u = bisect.bisect_right(starts, e.start) - 1
            by_unit.setdefault(max(u, 0), []).append(idx)
        for u, carried in self._announced_lines(text, units, by_unit).items():
            for idx in by_unit[u]:
                for rule, cue in carried:
                    if rule.applies_to(entities[idx].type):
                        cues[idx].append((_CARRIED, cue))
        for u, members in by_unit.items():
            a, b = units[u] if units else (0, len(text))
            spans, words = _words(text, a, b)
            if not spans:
                continue
            matches = self.matches(words)
            self._section_terminated(text, spans, matches, members, entities, cues)
            triggers = [m for m in matches if m.rule.is_trigger]
            if not triggers:
                continue
            rank = _ranks(words)
            # each trigger's scopes and cue, once per sentence
            stops = Stops(matches, words)
            reach = []
            for t in triggers:
                c_start, c_end = spans[t.start][0], spans[t.end - 1][1]
                cue = Cue(CATEGORIES[t.rule.category], text[c_start:c_end], c_start, c_end)
                reach.append((t, self.scopes(t, stops, rank), cue))
            trigger_starts = [t.start for t in triggers]
            # the longest forward and backward scopes here, in words (None: unbounded rules)
            far = None
            if self._reach is not None:
                forward = [b - t.end for t, sc, _ in reach for a, b in sc if a >= t.end]
                backward = [t.start - a for t, sc, _ in reach for a, b in sc if b <= t.start]
                far = (max(forward, default=0), max(backward, default=0))
            ends = [t for _, t in spans]
            word_starts = [s for s, _ in spans]
            for idx in members:
                e = entities[idx]
                # the entity's words: every word overlapping [e.start, e.end)
                lo = bisect.bisect_right(ends, e.start)
                hi = bisect.bisect_left(word_starts, e.end)
                if lo >= hi:
                    continue
                for k in self._near(trigger_starts, triggers, lo, hi, far):
                    t, scopes, cue = reach[k]
                    # a trigger the entity holds whole is no cue of it; one the entity runs
                    # past reaches the words after it ("No [evidence of obstruction]")
                    if not t.rule.applies_to(e.type) or (lo <= t.start and t.end <= hi):
                        continue
                    if any(s_lo < hi and lo < s_hi for s_lo, s_hi in scopes):
                        distance = max(0, t.start - hi if t.start >= hi else lo - t.end)
                        cues[idx].append((distance, cue))
        out: list[Entity] = []
        for found in cues:  # a section's attribute that a trigger on the entity overrides
            if found and found[0][0] == _HEADER:
                header = found[0][1]
                if any(c.attribute in SECTION_YIELDS.get(header.attribute, ()) for _, c in found):
                    del found[0]
        yields = YIELDS.get(self.profile, {})
        for e, found, s in zip(entities, cues, sections, strict=True):
            ordered = _without_repeats(
                tuple(c for _, c in sorted(found, key=lambda dc: (dc[0], dc[1].start)))
            )
            if e.text.lower().replace(".", "") in SELF_NEGATED:
                ordered = (Cue("negated", e.text, e.start, e.end), *ordered)
            said = {c.attribute for c in ordered}
            ordered = tuple(c for c in ordered if not yields.get(c.attribute, set()) & said)
            flags = {attr: any(c.attribute == attr for c in ordered) for attr in ATTRIBUTES}
            assertion = Assertion(**flags, cues=ordered)
            out.append(replace(e, assertion=assertion, section=s.category if s else None))
        return out

    @staticmethod
    def _section_terminated(
        text: str,
        spans: Sequence[tuple[int, int]],
        matches: Sequence[Match],
        members: Sequence[int],
        entities: Sequence[Entity],
        cues: list[list[tuple[int, Cue]]],
    ) -> None:
        """A section's cue on an entity ends at a terminator of its category before the entity
        in its sentence: under Discharge Instructions (hypothetical) "You were admitted for
        pneumonia" tells what happened (`you were`), it is no instruction."""
        first: dict[str, int] = {}  # category → where its first terminator here ends
        for m in matches:
            if m.rule.direction == "TERMINATE":
                first.setdefault(m.rule.category, spans[m.end - 1][1])
        for idx in members:
            found = cues[idx]
            if first and found and found[0][0] == _HEADER:
                category = _CATEGORY_OF.get(found[0][1].attribute, "")
                if first.get(category, len(text) + 1) <= entities[idx].start:
                    del found[0]

    def _announced_lines(
        self, text: str, units: Sequence[tuple[int, int]], by_unit: dict[int, list[int]]
    ) -> dict[int, list[tuple[Rule, Cue]]]:
        """The cues a line ending with a colon carries to the list items on the lines below it
        ("Return to the ER if you develop:" then "- chest pain", "- fainting"): those of its
        forward triggers whose scope reaches the colon. Each line is looked at once."""
        out: dict[int, list[tuple[Rule, Cue]]] = {}
        for u, (a, b) in enumerate(units):
            if u + 1 not in by_unit or not _ends_with_colon(text, a, b):
                continue
            items = []
            v = u + 1
            while v < len(units) and LIST_ITEM_LINE.match(text, units[v][0], units[v][1]):
                items.append(v)
                if _ends_with_colon(text, *units[v]):
                    break  # an item that announces a list of its own: its items are its
                v += 1
            if not any(i in by_unit for i in items):
                continue
            spans, words = _words(text, a, b)
            matches = self.matches(words)
            stops = Stops(matches, words)
            rank = _ranks(words)
            carried = []
            for t in matches:
                if t.rule.direction not in ("FORWARD", "BIDIRECTIONAL"):
                    continue
                reach = self.scopes(t, stops, rank)
                if any(hi >= len(words) - 1 and lo >= t.end for lo, hi in reach):
                    c_start, c_end = spans[t.start][0], spans[t.end - 1][1]
                    cue = Cue(CATEGORIES[t.rule.category], text[c_start:c_end], c_start, c_end)
                    carried.append((t.rule, cue))
            if carried:
                for i in items:
                    if i in by_unit:
                        out[i] = carried
        return out

    def _near(
        self,
        starts: Sequence[int],
        triggers: Sequence[Match],
        lo: int,
        hi: int,
        far: tuple[int, int] | None,
    ) -> list[int]:
        """The indices of the triggers that may reach words ``[lo, hi)``, outwards from them:
        those starting at most ``far`` words (before, after) away — the sentence's longest
        forward and backward scopes, with the longest phrase's slack, since nested triggers'
        ends are not in start order — or, when a rule reaches to the end of the sentence
        (``far`` None), :data:`MAX_TRIGGERS_SEEN` on each side."""
        limit = MAX_TRIGGERS_SEEN if far is None else len(triggers)
        out: list[int] = []
        left = bisect.bisect_left(starts, lo) - 1  # starting before the entity
        seen = 0
        while left >= 0 and seen < limit:
            if far is not None and lo - triggers[left].start > far[0] + self._longest:
                break
            out.append(left)
            left -= 1
            seen += 1
        right = bisect.bisect_left(starts, lo)  # starting inside or after it
        seen = 0
        while right < len(triggers) and seen < limit:
            if far is not None and triggers[right].start - hi > far[1]:
                break
            out.append(right)
            right += 1
            seen += 1
        return out

    def apply_all(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> list[list[Entity]]:
        return [self.apply(t, ents) for t, ents in zip(texts, entities, strict=True)]


def _without_repeats(cues: tuple[Cue, ...]) -> tuple[Cue, ...]:
    """Cues in order, the last (a section's header, when it sets an attribute) left out when
    it overlaps a trigger of its attribute ("Family History:" is a trigger and a header)."""
    if len(cues) < 2:
        return cues
    last = cues[-1]
    if any(
        c.attribute == last.attribute and c.start < last.end and last.start < c.end
        for c in cues[:-1]
    ):
        return cues[:-1]
    return cues


def _reaches_elsewhere(shorter: Rule, longer: Rule) -> bool:
    """A trigger inside a longer trigger of the same category whose scope runs another way:
    both stay."""
    return (
        shorter.is_trigger
        and longer.is_trigger
        and shorter.category == longer.category
        and shorter.direction != longer.direction
    )


class Stops:
    """Where a sentence's scopes stop: for each category, the sorted starts and ends of its
    terminators and of its triggers (a rule may be ``terminated_by`` another category's
    triggers). A scope's end is then a bisection, not a pass over every match."""

    def __init__(self, matches: Sequence[Match], words: Sequence[str] = ()):
        """``words``: the sentence's (lower-cased), where its list separators are."""
        self.separators = [i for i, w in enumerate(words) if w in LIST_SEPARATORS]
        self.colons = [i for i, w in enumerate(words) if w == ":"]
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

    def announces(self, start: int, clause: int, rank: Sequence[int]) -> bool:
        """Whether a colon follows ``start`` within :data:`ANNOUNCED_WITHIN` words, inside its
        clause, with words after it: the trigger announces a list."""
        i = bisect.bisect_left(self.colons, start)
        if i == len(self.colons):
            return False
        colon = self.colons[i]
        return (
            colon < clause - 1
            and rank[colon] - rank[start] <= ANNOUNCED_WITHIN
            and rank[clause] > rank[colon + 1]
        )

    def through_list(self, start: int, hi: int, clause: int, rank: Sequence[int]) -> int:
        """Where a forward scope from ``start``, cut at ``hi`` by its word limit, ends when it
        is in a list (a separator between ``start`` and ``hi``): at the end of the last item
        of at most LIST_ITEM_WORDS words before ``clause`` (its clause's end); else ``hi``."""
        seps = self.separators
        i = bisect.bisect_left(seps, start)
        if i >= len(seps) or seps[i] >= hi:
            return hi  # no list
        k = bisect.bisect_left(seps, hi) - 1  # the last separator before the cut
        pos, end = seps[k] + 1, hi
        for _ in range(LIST_ITEMS):
            k += 1
            nxt = seps[k] if k < len(seps) and seps[k] < clause else clause
            if rank[nxt] - rank[pos] > LIST_ITEM_WORDS:
                break  # a clause, not an item
            end = nxt
            if nxt >= clause:
                break
            pos = nxt + 1
        return max(hi, end)

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
