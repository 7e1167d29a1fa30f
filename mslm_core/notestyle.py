"""Training text rewritten the way clinicians write notes (``TrainConfig.note_style``).

The corpora the clinical model learns from are edited prose: case reports, trial criteria,
abstracts. Notes are not: "Pt c/o SOB and CP, denies N/V. h/o HTN, DM2." A share of the
training sentences is rewritten in that style, every gold mention carried over exactly (its
words may change, its type and extent never do):

- **shorthand** — a long form written as the abbreviation clinicians use for it
  (``mslm_core.shorthand``: a sense meant in at least half of the short form's uses), inside a
  gold mention ("shortness of breath" → "SOB", the mention now "SOB") or outside any ("history
  of" → "h/o", "patient" → "pt"); a mention only when the long form is the whole mention;
- **telegraphic** — articles and the copula dropped ("the patient was febrile" → "patient
  febrile");
- **punctuation** — the closing full stop and commas dropped;
- **case** — the sentence in upper case, as headers and some notes are, or lower case;
- **list** — a bullet or a list number before it ("- ", "1. "), as a list item.

Short forms in :data:`HELD_OUT` are never written, so that what the model does with
shorthand it never saw can be measured (``benchmarks/note_style.py``).

Each rewrite is drawn from a generator seeded per sentence: the same configuration rewrites
the same sentences the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .corpus.model import Sentence
from .shorthand import Shorthand, packaged
from .text import words_of
from .types import Mention

#: Short forms the rewriting never writes: the note-style check set measures the model on
#: them as shorthand it was never shown (a third of the short forms of its test notes, drawn
#: at random: benchmarks/data/note-style/split.json).
HELD_OUT: frozenset[str] = frozenset(
    {
        "a/p",
        "aki",
        "ams",
        "asa",
        "ble",
        "bmp",
        "bp",
        "bun",
        "cad",
        "cbc",
        "chf",
        "cp",
        "crp",
        "ct",
        "cxr",
        "dccv",
        "des",
        "egd",
        "esr",
        "fev1",
        "hi",
        "hiv",
        "hld",
        "hsm",
        "inr",
        "k",
        "l2",
        "lad",
        "lle",
        "map",
        "n/v/d",
        "nkda",
        "o2",
        "osa",
        "ot",
        "pe",
        "picc",
        "ppi",
        "pth",
        "pud",
        "ra",
        "sem",
        "sz",
        "tee",
        "ttp",
        "ua",
        "vt",
        "wbc",
        "xrt",
    }
)
#: The share of a short form's uses a sense must have to be written for its long form.
DOMINANT = 0.6
_ARTICLES = frozenset({"the", "a", "an"})
_COPULA = frozenset({"was", "were", "is", "are"})
_BULLETS = (["-"], ["*"], ["•"], ["1", "."], ["2", ")"])


@dataclass(frozen=True)
class Rates:
    """How often each rewrite applies to a sentence chosen for rewriting (a long form: each
    occurrence; an article or a copula: each word; a comma: each)."""

    shorthand: float = 0.8
    telegraphic: float = 0.6
    full_stop: float = 0.6
    comma: float = 0.3
    upper: float = 0.08
    lower: float = 0.15
    bullet: float = 0.25


class NoteStyle:
    """Rewrites sentences in note style with a shorthand table (default: the packaged one)."""

    def __init__(
        self,
        shorthand: Shorthand | None = None,
        rates: Rates = Rates(),
        held_out: frozenset[str] = HELD_OUT,
    ):
        table = shorthand if shorthand is not None else packaged()
        self.rates = rates
        # long form as lower-case words → the spellings of its short forms, with weights
        self.forms: dict[tuple[str, ...], list[tuple[list[str], float]]] = {}
        for long, senses in table.by_long_form(DOMINANT).items():
            for sense in senses:
                if sense.short in held_out or sense.short.lower() in held_out:
                    continue
                spelled = sense.forms or ((sense.short.upper(), 1),)
                for variant in _long_variants(long):
                    key = tuple(w.lower() for w in words_of(variant))
                    # a long form of 4 letters or more, longer than its short form ("ph",
                    # "day", "six" are not rewritten)
                    if sum(map(len, key)) < 4 or len(variant) <= len(sense.short):
                        continue
                    options = self.forms.setdefault(key, [])
                    options.extend((words_of(form), float(count)) for form, count in spelled)
        self.longest = max((len(k) for k in self.forms), default=0)

    def __call__(self, sentence: Sentence, rng: np.random.Generator) -> Sentence:
        """``sentence`` in note style (its mentions, their types and extents, carried over)."""
        words = sentence.words
        r = self.rates
        out: list[str] = []
        mentions: list[Mention] = []
        at = 0
        for m in sorted(sentence.mentions):
            out.extend(self._run(words[at : m.start], rng, outside=True, last=False))
            inner = self._run(words[m.start : m.end], rng, outside=False, last=False)
            mentions.append(Mention(len(out), len(out) + len(inner), m.label, m.concept))
            out.extend(inner)
            at = m.end
        out.extend(self._run(words[at:], rng, outside=True, last=True))
        draw = rng.random()
        if draw < r.upper:
            out = [w.upper() for w in out]
        elif draw < r.upper + r.lower:
            out = [w.lower() for w in out]
        if out and rng.random() < r.bullet:
            bullet = _BULLETS[int(rng.integers(len(_BULLETS)))]
            shift = len(bullet)
            mentions = [
                Mention(m.start + shift, m.end + shift, m.label, m.concept) for m in mentions
            ]
            out = [*bullet, *out]
        if not out:  # a sentence of articles alone: kept as it was
            return sentence
        rewritten = Sentence.from_words(out, mentions)
        rewritten.annotated = sentence.annotated
        return rewritten

    def _run(
        self, words: Sequence[str], rng: np.random.Generator, outside: bool, last: bool
    ) -> list[str]:
        """A run of words rewritten: each long form (the longest first) as a short form; and
        ``outside`` a mention, articles, the copula, commas and (``last``: the run ends the
        sentence) the closing full stop dropped. A mention's words are never dropped."""
        r = self.rates
        out: list[str] = []
        i = 0
        while i < len(words):
            for n in range(min(self.longest, len(words) - i), 0, -1):
                key = tuple(w.lower() for w in words[i : i + n])
                if key in self.forms and rng.random() < r.shorthand:
                    out.extend(self._pick(key, rng))
                    i += n
                    break
            else:
                word = words[i]
                lower = word.lower()
                drop = outside and (
                    ((lower in _ARTICLES or lower in _COPULA) and rng.random() < r.telegraphic)
                    or (word == "," and rng.random() < r.comma)
                    or (word == "." and last and i == len(words) - 1 and rng.random() < r.full_stop)
                )
                if not drop:
                    out.append(word)
                i += 1
        if not outside and not out:  # a mention always keeps a word
            return list(words)
        return out

    def _pick(self, key: tuple[str, ...], rng: np.random.Generator) -> list[str]:
        options = self.forms[key]
        weights = np.asarray([w for _, w in options])
        return list(options[int(rng.choice(len(options), p=weights / weights.sum()))][0])


def _long_variants(long: str) -> list[str]:
    """A long form and how else prose writes it: "nausea/vomiting" is also "nausea and
    vomiting"; "complaining of/complaints of" is either."""
    out = [long]
    if "/" in long:
        parts = [p.strip() for p in long.split("/") if p.strip()]
        if len(parts) == 2 and all(len(p.split()) == 1 for p in parts):
            out.append(f"{parts[0]} and {parts[1]}")
        elif len(parts) >= 2:
            out.extend(parts)
    return out


def rewrite_share(
    sentences: Sequence[Sentence], share: float, seed: int, style: NoteStyle | None = None
) -> tuple[list[Sentence], int]:
    """``sentences`` with about ``share`` of them rewritten in note style (which ones, and how,
    drawn from ``seed``); returns them and how many were rewritten."""
    if share <= 0:
        return list(sentences), 0
    style = style or NoteStyle()
    pick = np.random.default_rng([seed, 59]).random(len(sentences)) < share
    out, n = [], 0
    for k, (sentence, chosen) in enumerate(zip(sentences, pick, strict=True)):
        if chosen:
            out.append(style(sentence, np.random.default_rng([seed, 59, k])))
            n += 1
        else:
            out.append(sentence)
    return out, n
