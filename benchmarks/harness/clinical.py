"""Gold assertion labels of the clinical corpora (brat standoff) for the ConText benchmark.

The corpora themselves — MACCROBAT2020 (200 case reports; ``POLARITY`` of events), CHIA
(eligibility criteria; ``Negation``/``Mood`` linked to entities), and the PubTator releases of
NCBI-disease and BC5CDR the benchmarks read — are fetched at pinned commits with pinned sha256
by the product (:mod:`mslm_core.corpora`; ``mslm corpora fetch``), into a cache outside the
repository, never committed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mslm_core.corpora import (
    BratDocument,
    BratEntity,
    PinnedCorpus,
    brat_documents,
    corpora,
    default_cache,
    fetch_corpus,
    read_brat,
)

DEFAULT_CACHE = default_cache()
__all__ = [
    "DEFAULT_CACHE",
    "BratDocument",
    "BratEntity",
    "GoldDocument",
    "GoldEntity",
    "PinnedCorpus",
    "brat_documents",
    "chia_gold",
    "corpora",
    "fetch_corpus",
    "maccrobat_gold",
    "read_brat",
]


# -- gold assertions --------------------------------------------------------------------------
@dataclass
class GoldEntity:
    start: int
    end: int
    type: str
    negated: bool
    possible: bool  # uncertain (MACCROBAT) / mood (CHIA: possible or hypothetical)
    # None: the corpus does not label it. MACCROBAT: a finding inside a History span /
    # inside a Family_history span; CHIA: a Has_temporal of a historical kind (HISTORICAL_TIME)
    historical: bool | None = None
    family: bool | None = None


@dataclass
class GoldDocument:
    name: str
    text: str
    entities: list[GoldEntity]


# CHIA: a temporal modifier that puts its entity in the past
HISTORICAL_TIME = re.compile(
    r"\b(history|historical|previous(ly)?|prior|past|ago|former(ly)?|earlier|pre-?existing|"
    r"remote)\b",
    re.IGNORECASE,
)

# MACCROBAT: the findings its POLARITY attribute is about (events); NEG → negated,
# UNCERTAIN / MAYBE_NEG / MAYBE_POS → possible.
MACCROBAT_POSSIBLE = {"UNCERTAIN", "MAYBE_NEG", "MAYBE_POS"}
# CHIA: the clinical entity types a Negation or Mood can modify.
CHIA_TYPES = {"Condition", "Drug", "Procedure", "Observation", "Measurement", "Device"}


def maccrobat_gold(folder: Path) -> list[GoldDocument]:
    docs = []
    for d in brat_documents(folder):
        polarity: dict[str, str] = {}
        for name, target, value in d.attributes:
            if name == "POLARITY" and target in d.events:
                polarity[d.events[target]] = value
        spans = {
            kind: [(e.start, e.end) for e in d.entities.values() if e.type == kind]
            for kind in ("History", "Family_history")
        }

        def inside(
            kind: str, e: BratEntity, spans: dict[str, list[tuple[int, int]]] = spans
        ) -> bool:
            return any(a <= e.start and e.end <= b for a, b in spans[kind])

        ents = []
        for trigger in sorted(set(d.events.values())):
            e = d.entities.get(trigger)
            if e is None:
                continue
            p = polarity.get(trigger, "POS")
            ents.append(
                GoldEntity(
                    e.start,
                    e.end,
                    e.type,
                    p == "NEG",
                    p in MACCROBAT_POSSIBLE,
                    historical=inside("History", e),
                    family=inside("Family_history", e),
                )
            )
        docs.append(GoldDocument(d.name, d.text, sorted(ents, key=lambda g: g.start)))
    return docs


def chia_gold(folder: Path) -> list[GoldDocument]:
    docs = []
    for d in brat_documents(folder):
        negated_ids: set[str] = set()
        mood_ids: set[str] = set()
        past_ids: set[str] = set()
        for kind, a1, a2 in d.relations:
            if kind == "Has_negation":
                negated_ids.add(a1)
            elif kind == "Has_mood":
                mood_ids.add(a1)
            elif (
                kind == "Has_temporal"
                and (t := d.entities.get(a2)) is not None
                and HISTORICAL_TIME.search(t.text)
            ):
                past_ids.add(a1)

        def reached(ids: set[str], e: BratEntity, d: BratDocument = d) -> bool:
            if e.id in ids:
                return True
            # through a Scope that holds the entity
            return any(
                (s := d.entities.get(i)) is not None
                and s.type == "Scope"
                and s.start <= e.start
                and e.end <= s.end
                for i in ids
            )

        ents = [
            GoldEntity(
                e.start,
                e.end,
                e.type,
                reached(negated_ids, e),
                reached(mood_ids, e),
                historical=reached(past_ids, e),
            )
            for e in d.entities.values()
            if e.type in CHIA_TYPES
        ]
        docs.append(GoldDocument(d.name, d.text, sorted(ents, key=lambda g: g.start)))
    return docs
