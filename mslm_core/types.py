"""The values that cross the library's modules: gold and predicted mentions over words, and
entities in raw text. Plain frozen dataclasses; nothing here imports the rest of the library,
so the corpus readers, the predictor and the renderers all depend on this module, never on
each other."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, order=True)
class Mention:
    """An entity mention over words: ``words[start:end]`` (end exclusive), typed ``label``."""

    start: int
    end: int
    label: str


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
class Entity:
    """A predicted entity in raw text: ``text == input[start:end]`` (code points)."""

    start: int
    end: int
    text: str
    type: str
    confidence: float
    detection_score: float
    type_score: float

    def to_dict(self) -> dict:
        return asdict(self)
