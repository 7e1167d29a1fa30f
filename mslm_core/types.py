"""The values that cross the library's modules: gold and predicted mentions over words, and
entities in raw text. Plain frozen dataclasses; nothing here imports the rest of the library,
so the corpus readers, the predictor and the renderers all depend on this module, never on
each other."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

_Frozen = TypeVar("_Frozen", "Entity", "LinkedConcept", "Attachment")


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

    attribute: str  # one of ASSERTION_ATTRIBUTES: negated, possible, … allergy
    text: str
    start: int
    end: int


def _attribute(says: str) -> Any:
    """An assertion attribute: False unless a cue of its kind reaches the entity; ``says``:
    what it means, with typical cues (the API's and the formats' documentation)."""
    return field(default=False, metadata={"says": says})


@dataclass(frozen=True)
class Assertion:
    """Is the finding present, and whose? Each attribute is True when a ConText trigger of its
    kind (or a section that sets it) reaches the entity; ``cues`` are those triggers, nearest
    first, then the section headers. The attributes are declared here once: the context
    rules' categories, the API's schema, the client, the formats and the web page follow
    :data:`ASSERTION_ATTRIBUTES`."""

    negated: bool = _attribute('"no evidence of", "denies", "negative for" …')
    possible: bool = _attribute('uncertain: "possible", "suspected", "cannot exclude" …')
    hypothetical: bool = _attribute(
        'not (yet) real: "rule out", "if", "should he develop", "return if" …'
    )
    historical: bool = _attribute(
        'in the past: "history of", "status post", "resolved", a Past Medical History section'
    )
    family: bool = _attribute(
        'the experiencer is not the patient: "mother had", a Family History section'
    )
    allergy: bool = _attribute(
        'an allergy or intolerance to it: "allergic to", "intolerant of", an Allergies section'
    )
    cues: tuple[Cue, ...] = ()

    @property
    def present(self) -> bool:
        """The finding is asserted for the patient, now: none of the attributes is set."""
        return not any(getattr(self, a) for a in ASSERTION_ATTRIBUTES)

    def only(self, attributes: Collection[str]) -> Assertion:
        """This assertion with the attributes outside ``attributes`` unset and their cues
        dropped (a type that carries some attributes only: ``mslm_core.clinical_types``)."""
        dropped = [a for a in ASSERTION_ATTRIBUTES if a not in attributes]
        if not dropped:
            return self
        kept = tuple(c for c in self.cues if c.attribute not in dropped)
        return replace(self, **dict.fromkeys(dropped, False), cues=kept)


#: The assertion attributes in order → what each means.
ASSERTION_ATTRIBUTES: dict[str, str] = {
    f.name: f.metadata["says"] for f in fields(Assertion) if "says" in f.metadata
}


@dataclass(frozen=True)
class LinkedConcept:
    """A concept an entity may denote: ``id`` and ``name`` in the linked vocabulary, ``score``
    the similarity of its best-matching name (1.0: an exact name), ``vocabulary`` the
    vocabulary it comes from (``MeSH``, an OMOP vocabulary such as ``SNOMED``) and ``code`` its
    code there; ``concept_id`` its OMOP concept id when the vocabulary is OMOP's (an Athena
    import), and ``source_id`` the non-standard concept whose name matched when it was reached
    through "Maps to"; ``confidence`` the calibrated probability that it is the entity's concept
    (None: the vocabulary has no calibration)."""

    id: str
    name: str
    score: float
    vocabulary: str
    url: str | None = None  # the concept's page, when the vocabulary gives a URL pattern
    code: str | None = None
    concept_id: int | None = None
    source_id: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class Attachment:
    """A modifier's head (``mslm_core.relations``): the head entity's span in the same text,
    the modifier's ``role`` for it (dose, route, frequency, duration, value, site, severity)
    and the probability that this is its head."""

    start: int
    end: int
    role: str
    confidence: float


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
    section: str | None = None  # the note's section it lies in (context.sections), when known
    # set by the linking step (mslm_core.linking): the concept (None below the threshold) and
    # the candidates, best first; candidates None: no linking step ran
    concept: LinkedConcept | None = None
    candidates: tuple[LinkedConcept, ...] | None = None
    head: Attachment | None = None  # set by the relation step on a modifier tied to a head

    def to_dict(self) -> dict[str, Any]:
        """The entity as JSON values: what ``dataclasses.asdict`` gives, without the
        ``assertion`` and ``section`` no step set, nor ``concept`` and ``candidates`` when no
        linking step ran (built field by field: asdict deep-copies every value, and an
        answer renders thousands of concepts)."""
        out = {name: getattr(self, name) for name in _ENTITY_SCALARS}
        if self.assertion is not None:
            out["assertion"] = _plain(self.assertion)
        if self.section is not None:
            out["section"] = self.section
        if self.candidates is not None:
            out["concept"] = None if self.concept is None else _plain(self.concept)
            out["candidates"] = [_plain(c) for c in self.candidates]
        return out


_ENTITY_SCALARS = ("start", "end", "text", "type", "confidence", "detection_score", "type_score")


def _plain(value: Any) -> Any:
    """A frozen dataclass of this module (and its tuples of them) as dicts and lists; the
    values are immutable (str, numbers, bool, None) and are not copied."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def where_free(entities: Sequence[Entity], found: Sequence[Entity]) -> list[Entity]:
    """``entities`` with each of ``found`` that overlaps none of them, in text order: what a
    rule finds where the model found nothing."""
    added = [n for n in found if not any(e.start < n.end and n.start < e.end for e in entities)]
    return sorted([*entities, *added], key=lambda e: (e.start, e.end)) if added else list(entities)


def with_fields(value: _Frozen, **changes: Any) -> _Frozen:
    """``dataclasses.replace(value, **changes)`` for the frozen dataclasses here, which have
    no ``__post_init__``, at a tenth of its cost: a shallow copy with the fields set (a
    linking step replaces every entity and candidate it touches; replace's generic path was
    a sixth of its time)."""
    out = object.__new__(type(value))
    out.__dict__.update(value.__dict__)
    for name, new in changes.items():
        if name not in value.__dataclass_fields__:
            raise TypeError(f"{type(value).__name__} has no field {name!r}")
        object.__setattr__(out, name, new)
    return out
