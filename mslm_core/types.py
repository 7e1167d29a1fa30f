"""The values that cross the library's modules: gold and predicted mentions over words, and
entities in raw text. Plain frozen dataclasses; nothing here imports the rest of the library,
so the corpus readers, the predictor and the renderers all depend on this module, never on
each other."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True, order=True)
class Mention:
    """An entity mention over words: ``words[start:end]`` (end exclusive), typed ``label``;
    ``concept`` is the identifier a corpus links it to (``D003920``, ``OMIM:176100``,
    ``D004829+D003294``), kept through the formats that hold one (PubTator, BioC, JSONL). A
    mention is its span and type: the concept takes no part in equality or order, so
    evaluation never depends on it."""

    start: int
    end: int
    label: str
    concept: str | None = field(default=None, compare=False)


@dataclass(frozen=True, order=True)
class ScoredMention:
    """A predicted mention over words ``[start, end)`` of one sentence."""

    start: int
    end: int
    label: str
    confidence: float
    detection_score: float
    type_score: float


@dataclass(frozen=True)
class Cue:
    """The words that set an assertion attribute: ``text == input[start:end]``."""

    attribute: str  # negated, possible, hypothetical, historical or family
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Assertion:
    """Is the finding present, and whose? Each attribute is True when a ConText trigger of its
    kind reaches the entity; ``cues`` are those triggers, nearest first."""

    negated: bool = False
    possible: bool = False
    hypothetical: bool = False
    historical: bool = False
    family: bool = False
    cues: tuple[Cue, ...] = ()

    @property
    def present(self) -> bool:
        """The finding is asserted for the patient, now: none of the attributes is set."""
        return not (
            self.negated or self.possible or self.hypothetical or self.historical or self.family
        )


@dataclass(frozen=True)
class LinkedConcept:
    """A concept an entity may denote: ``score`` is the similarity of its best-matching name
    (1.0: an exact name), ``vocabulary`` the vocabulary's name (``MeSH``)."""

    id: str
    name: str
    score: float
    vocabulary: str
    url: str | None = None  # the concept's page, when the vocabulary gives a URL pattern


@dataclass(frozen=True)
class Entity:
    """A predicted entity in raw text: ``text == input[start:end]`` (code points)."""

    start: int
    end: int
    text: str
    type: str
    confidence: float
    detection_score: float
    type_score: float
    assertion: Assertion | None = None  # set by the ConText step (mslm_core.context)
    # set by the linking step (mslm_core.linking): the concept (None below the threshold) and
    # the candidates, best first; candidates None: no linking step ran
    concept: LinkedConcept | None = None
    candidates: tuple[LinkedConcept, ...] | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.assertion is None:
            del out["assertion"]
        if self.candidates is None:
            del out["concept"], out["candidates"]
        else:
            out["candidates"] = list(out["candidates"])
        return out
