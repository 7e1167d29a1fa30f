"""Typed results: frozen dataclasses built from the service's JSON (``from_dict``).

Fields mirror the REST contract (``api/schemas.py``); keys a newer service adds are ignored,
so an older client keeps working.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: job and evaluation states after which nothing changes
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


def _time(value: Any) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else None


def _required_time(value: Any) -> dt.datetime:
    parsed = _time(value)
    if parsed is None:
        raise ValueError(f"expected an ISO 8601 time, got {value!r}")
    return parsed


# -- annotate ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cue:
    """The trigger phrase or section header that set an assertion attribute:
    ``text == texts[i][start:end]``."""

    attribute: str  # the attribute it sets: negated, possible, … allergy
    text: str
    start: int
    end: int

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cue:
        return cls(d["attribute"], d["text"], int(d["start"]), int(d["end"]))


@dataclass(frozen=True)
class Assertion:
    """The entity's clinical context (ConText, and the note's section): each attribute the
    service reports — negated, possible, hypothetical, historical, family, allergy, and any a
    newer service adds — True when a trigger of its kind or its section sets it; read them as
    attributes (``a.negated``) or as ``a.flags``. ``present`` when none is set."""

    flags: tuple[tuple[str, bool], ...]  # (attribute, set), in the service's order
    cues: tuple[Cue, ...] = ()

    def __getattr__(self, name: str) -> bool:
        for attribute, value in self.__dict__.get("flags", ()):
            if attribute == name:
                return bool(value)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def present(self) -> bool:
        return not any(value for _, value in self.flags)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Assertion:
        return cls(
            flags=tuple((k, bool(v)) for k, v in d.items() if k != "cues"),
            cues=tuple(Cue.from_dict(c) for c in d.get("cues", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **dict(self.flags),
            "cues": [
                {"attribute": c.attribute, "text": c.text, "start": c.start, "end": c.end}
                for c in self.cues
            ],
        }


@dataclass(frozen=True)
class Concept:
    """A concept an entity may denote (the service's MSLM_VOCABULARY)."""

    id: str  # its id in the linked vocabulary (an OMOP concept id for an Athena import)
    name: str
    score: float  # similarity of its best-matching name; 1.0: an exact name
    vocabulary: str  # the vocabulary it comes from: MeSH, SNOMED, RxNorm …
    url: str | None = None  # its page, when the service has MSLM_VOCABULARY_URL
    code: str | None = None  # its code in that vocabulary
    concept_id: int | None = None  # its OMOP standard concept id, for an OMOP vocabulary
    source_id: str | None = None  # the non-standard concept whose name matched ("Maps to")
    confidence: float | None = None  # calibrated probability that it is right (top candidate)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Concept:
        return cls(
            d["id"],
            d["name"],
            float(d["score"]),
            d["vocabulary"],
            d.get("url"),
            d.get("code"),
            d.get("concept_id"),
            d.get("source_id"),
            d.get("confidence"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "score": self.score,
            "vocabulary": self.vocabulary,
            "url": self.url,
        }


@dataclass(frozen=True)
class Entity:
    """One mention: ``text == texts[i][start:end]`` (code-point offsets, end exclusive)."""

    start: int
    end: int
    text: str
    type: str
    confidence: float  # detection_score × type_score
    detection_score: float
    type_score: float
    assertion: Assertion | None = None  # None when the service runs with MSLM_CONTEXT off
    concept: Concept | None = None  # None below the threshold, or with no vocabulary
    candidates: tuple[Concept, ...] | None = None  # None when the service links no concepts
    section: str | None = None  # the note's section (None: before any header, or no context)

    @property
    def present(self) -> bool:
        """Asserted for the patient, now (True when the service reports no context)."""
        return self.assertion is None or self.assertion.present

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Entity:
        assertion = d.get("assertion")
        concept, candidates = d.get("concept"), d.get("candidates")
        return cls(
            start=int(d["start"]),
            end=int(d["end"]),
            text=d["text"],
            type=d["type"],
            confidence=float(d["confidence"]),
            detection_score=float(d["detection_score"]),
            type_score=float(d["type_score"]),
            assertion=Assertion.from_dict(assertion) if assertion is not None else None,
            concept=Concept.from_dict(concept) if concept is not None else None,
            candidates=None
            if candidates is None
            else tuple(Concept.from_dict(c) for c in candidates),
            section=d.get("section"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "type": self.type,
            "confidence": self.confidence,
            "detection_score": self.detection_score,
            "type_score": self.type_score,
        }
        if self.assertion is not None:
            out["assertion"] = self.assertion.to_dict()
        if self.section is not None:
            out["section"] = self.section
        if self.candidates is not None:
            out["concept"] = None if self.concept is None else self.concept.to_dict()
            out["candidates"] = [c.to_dict() for c in self.candidates]
        return out


@dataclass(frozen=True)
class TextLanguage:
    """A text's language (ISO 639-1) when it is surely another than the model's."""

    code: str
    probability: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TextLanguage:
        return cls(code=d["code"], probability=float(d["probability"]))


@dataclass(frozen=True)
class Relation:
    """A modifier tied to its head: indexes into the result's entities; ``type`` the
    modifier's role (dose, route, frequency, duration, value, site, severity)."""

    type: str
    head: int
    modifier: int
    confidence: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Relation:
        return cls(d["type"], int(d["head"]), int(d["modifier"]), float(d["confidence"]))


@dataclass(frozen=True)
class FactPart:
    """One part of a fact: its entity (index), span, confidence and normalised value
    (``quantity`` of a dose or a value, ``timing`` of a frequency, ``iso8601`` of a duration,
    ``code`` of a route)."""

    entity: int
    text: str
    start: int
    end: int
    confidence: float
    quantity: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    iso8601: str | None = None
    code: dict[str, str] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> FactPart | None:
        if d is None:
            return None
        return cls(
            entity=int(d["entity"]),
            text=d["text"],
            start=int(d["start"]),
            end=int(d["end"]),
            confidence=float(d["confidence"]),
            quantity=d.get("quantity"),
            timing=d.get("timing"),
            iso8601=d.get("iso8601"),
            code=d.get("code"),
        )


@dataclass(frozen=True)
class Medication:
    drug: FactPart
    dose: FactPart | None = None
    route: FactPart | None = None
    frequency: FactPart | None = None
    duration: FactPart | None = None
    assertion: dict[str, bool] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Medication:
        parts = {k: FactPart.from_dict(d.get(k)) for k in ("dose", "route", "frequency")}
        drug = FactPart.from_dict(d["drug"])
        assert drug is not None
        return cls(
            drug=drug,
            duration=FactPart.from_dict(d.get("duration")),
            assertion=d.get("assertion"),
            **parts,
        )


@dataclass(frozen=True)
class Measurement:
    test: FactPart
    value: FactPart
    unit: str | None = None
    number: float | None = None
    comparator: str | None = None
    low: float | None = None
    high: float | None = None
    numbers: list[float] | None = None
    qualitative: str | None = None
    assertion: dict[str, bool] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        test, value = FactPart.from_dict(d["test"]), FactPart.from_dict(d["value"])
        assert test is not None and value is not None
        keys = ("unit", "number", "comparator", "low", "high", "numbers", "qualitative")
        return cls(
            test=test, value=value, assertion=d.get("assertion"), **{k: d.get(k) for k in keys}
        )


@dataclass(frozen=True)
class Facts:
    """A text's medications (each drug with its regimen) and measurements (each test with
    its value)."""

    medications: list[Medication] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Facts:
        d = d or {}
        return cls(
            [Medication.from_dict(m) for m in d.get("medications", [])],
            [Measurement.from_dict(m) for m in d.get("measurements", [])],
        )


@dataclass(frozen=True)
class TextResult:
    entities: list[Entity]
    relations: list[Relation] = field(default_factory=list)
    facts: Facts = field(default_factory=Facts)
    warnings: list[str] = field(default_factory=list)
    language: TextLanguage | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TextResult:
        language = d.get("language")
        return cls(
            entities=[Entity.from_dict(e) for e in d.get("entities", [])],
            relations=[Relation.from_dict(r) for r in d.get("relations") or []],
            facts=Facts.from_dict(d.get("facts")),
            warnings=list(d.get("warnings") or []),
            language=None if language is None else TextLanguage.from_dict(language),
        )


@dataclass(frozen=True)
class ServedModel:
    """The model that answered an annotate request."""

    id: str
    backend: str = ""
    precision: str = ""
    provider: str = ""
    types: list[str] = field(default_factory=list)
    language: str = "en"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServedModel:
        return cls(
            id=d["id"],
            backend=d.get("backend", ""),
            precision=d.get("precision", ""),
            provider=d.get("provider", ""),
            types=list(d.get("types", [])),
            language=d.get("language", "en"),
        )


@dataclass(frozen=True)
class LinkedVocabulary:
    """What an answer's entities were linked to."""

    name: str
    concepts: int
    calibrated: bool  # concepts come with a confidence, and none below its type's threshold

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LinkedVocabulary:
        return cls(d["name"], int(d["concepts"]), bool(d["calibrated"]))


@dataclass(frozen=True)
class ContextUsed:
    """The conventions an answer's clinical context followed."""

    profile: str  # omop or context

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ContextUsed:
        return cls(str(d["profile"]))


@dataclass(frozen=True)
class AnnotateResponse:
    model: ServedModel
    linking: LinkedVocabulary | None  # None: no linking
    results: list[TextResult]  # one per submitted text, in order
    context: ContextUsed | None = None  # None: no clinical context

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AnnotateResponse:
        linking = d.get("linking")
        context = d.get("context")
        return cls(
            model=ServedModel.from_dict(d["model"]),
            linking=LinkedVocabulary.from_dict(linking) if linking else None,
            results=[TextResult.from_dict(r) for r in d["results"]],
            context=ContextUsed.from_dict(context) if context else None,
        )


# -- datasets ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitFile:
    filename: str
    format: str
    bytes: int
    sha256: str
    documents: int | None = None  # documents with ids (a version after the first)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SplitFile:
        return cls(d["filename"], d["format"], int(d["bytes"]), d["sha256"], d.get("documents"))


@dataclass(frozen=True)
class Dataset:
    id: str
    name: str
    created_at: dt.datetime
    files: dict[str, SplitFile]  # split → file
    stats: dict[str, dict[str, Any]]  # split → sentences, mentions, types, …
    types: list[str]
    created_by: str | None = None  # the id of the API key that uploaded it
    version: int = 1  # the latest (1: as uploaded)
    unlabelled: int = 0  # documents waiting in the pool (what suggest ranks)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Dataset:
        return cls(
            id=d["id"],
            name=d.get("name", ""),
            created_at=_required_time(d["created_at"]),
            files={k: SplitFile.from_dict(v) for k, v in d.get("files", {}).items()},
            stats=dict(d.get("stats", {})),
            types=list(d.get("types", [])),
            created_by=d.get("created_by"),
            version=int(d.get("version", 1)),
            unlabelled=int(d.get("unlabelled", 0)),
        )


@dataclass(frozen=True)
class Document:
    """A document to add to a dataset (or to replace the one with its ``id``): ``entities``
    as ``(start, end, label)`` character offsets, end exclusive; None: not labelled yet (it
    waits in the pool that :meth:`Client.suggest` ranks)."""

    id: str
    text: str
    entities: Sequence[tuple[int, int, str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.entities is not None:
            body["entities"] = [{"start": a, "end": b, "label": t} for a, b, t in self.entities]
        return body


@dataclass(frozen=True)
class VersionChange:
    source: str  # upload | api | labelstudio
    added: int = 0
    replaced: int = 0
    removed: int = 0
    documents: int | None = None  # labelled documents in the version
    unlabelled: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VersionChange:
        return cls(
            d.get("source", ""),
            int(d.get("added", 0)),
            int(d.get("replaced", 0)),
            int(d.get("removed", 0)),
            d.get("documents"),
            int(d.get("unlabelled", 0)),
        )


@dataclass(frozen=True)
class DatasetVersion:
    dataset_id: str
    version: int
    created_at: dt.datetime
    change: VersionChange
    stats: dict[str, dict[str, Any]]
    types: list[str]
    kept: bool  # its files are kept (the latest, or a job trained on it)
    created_by: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DatasetVersion:
        return cls(
            dataset_id=d["dataset_id"],
            version=int(d["version"]),
            created_at=_required_time(d["created_at"]),
            change=VersionChange.from_dict(d.get("change") or {}),
            stats=dict(d.get("stats", {})),
            types=list(d.get("types", [])),
            kept=bool(d.get("kept", True)),
            created_by=d.get("created_by"),
        )


@dataclass(frozen=True)
class Suggestion:
    """A pool document to label next: its uncertainty in [0, 1] and its priority (``score``)
    after diversity; ``similar_to``: the suggestion before it that it is most like."""

    id: str
    text: str
    uncertainty: float
    score: float
    similar_to: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Suggestion:
        return cls(
            d["id"], d["text"], float(d["uncertainty"]), float(d["score"]), d.get("similar_to")
        )


@dataclass(frozen=True)
class Suggestions:
    model: str
    strategy: str
    diversity: float
    version: int
    pool: int  # unlabelled documents in the dataset
    scored: int
    data: list[Suggestion]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Suggestions:
        return cls(
            model=d["model"],
            strategy=d["strategy"],
            diversity=float(d["diversity"]),
            version=int(d["version"]),
            pool=int(d["pool"]),
            scored=int(d["scored"]),
            data=[Suggestion.from_dict(x) for x in d.get("data", [])],
        )


# -- jobs -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobProgress:
    """Where training is (the worker updates it every step; empty while queued)."""

    epoch: int | None = None  # 1-based, current
    epochs: int | None = None
    step: int | None = None  # optimizer steps done
    steps: int | None = None  # optimizer steps planned
    loss: float | None = None
    dev_f1: float | None = None  # of the last finished epoch
    best_dev_f1: float | None = None
    done: bool = False
    phase: str | None = None  # preparing, warm-up, training, evaluating, finishing, exporting
    elapsed_s: float | None = None  # since the worker started it
    steps_per_s: float | None = None  # its own measured pace
    eta_s: float | None = None  # seconds left (None until some steps are measured)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobProgress:
        return cls(
            epoch=d.get("epoch"),
            epochs=d.get("epochs"),
            step=d.get("step"),
            steps=d.get("steps"),
            loss=d.get("loss"),
            dev_f1=d.get("dev_f1"),
            best_dev_f1=d.get("best_dev_f1"),
            done=bool(d.get("done", False)),
            phase=d.get("phase"),
            elapsed_s=d.get("elapsed_s"),
            steps_per_s=d.get("steps_per_s"),
            eta_s=d.get("eta_s"),
        )


@dataclass(frozen=True)
class JobDataset:
    """One dataset of a job on several: its type map onto the job's schema (source type →
    target type, a list of types the dataset does not tell apart — ``"O"`` listed: maybe no
    entity — or None: dropped) and its sampling weight per epoch."""

    id: str | None  # None: deleted since
    type_map: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    version: int | None = None  # in a job: the dataset's version it trained on (not sent)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type_map": dict(self.type_map), "weight": self.weight}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobDataset:
        return cls(
            d.get("id"),
            dict(d.get("type_map") or {}),
            float(d.get("weight", 1.0)),
            d.get("version"),
        )


@dataclass(frozen=True)
class Job:
    id: str
    state: str  # queued → running → succeeded | failed | cancelled
    dataset_id: str | None  # its (first) dataset
    params: dict[str, Any]
    export: dict[str, Any]
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    attempts: int
    cancel_requested: bool
    progress: JobProgress
    history: list[dict[str, Any]]  # one entry per epoch: loss, dev_f1, …
    metrics: dict[str, Any]
    model_id: str | None
    error: str | None
    created_by: str | None = None  # the id of the API key that submitted it
    datasets: list[JobDataset] = field(default_factory=list)  # every dataset, in order
    # why its model is below the job's floor (served only with activate_model(force=True))
    warnings: list[str] = field(default_factory=list)
    replaces: str | None = None  # the job whose served model its model replaces

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        return cls(
            id=d["id"],
            state=d["state"],
            dataset_id=d.get("dataset_id"),
            params=dict(d.get("params", {})),
            export=dict(d.get("export", {})),
            created_at=_required_time(d["created_at"]),
            started_at=_time(d.get("started_at")),
            finished_at=_time(d.get("finished_at")),
            attempts=int(d.get("attempts", 0)),
            cancel_requested=bool(d.get("cancel_requested", False)),
            progress=JobProgress.from_dict(d.get("progress") or {}),
            history=list(d.get("history", [])),
            metrics=dict(d.get("metrics", {})),
            model_id=d.get("model_id"),
            error=d.get("error"),
            created_by=d.get("created_by"),
            datasets=[JobDataset.from_dict(x) for x in d.get("datasets") or []],
            warnings=list(d.get("warnings") or []),
            replaces=d.get("replaces"),
        )


# -- models -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Model:
    id: str
    created_at: dt.datetime
    job_id: str | None
    base_model: str
    strategy: str
    types: list[str]
    precisions: list[str]  # fp32, int8, …
    metrics: dict[str, Any]
    active: bool
    manifest: dict[str, Any] | None = None  # only from get_model
    created_by: str | None = None  # the id of the API key that created it
    # the styles ``annotate(…, style=…)`` may name ("": none) and the one it reads by default
    styles: list[str] = field(default_factory=lambda: [""])
    style: str = ""
    warnings: list[str] = field(default_factory=list)  # below its job's floor: force to serve

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Model:
        return cls(
            id=d["id"],
            created_at=_required_time(d["created_at"]),
            job_id=d.get("job_id"),
            base_model=d.get("base_model", ""),
            strategy=d.get("strategy", ""),
            types=list(d.get("types", [])),
            precisions=list(d.get("precisions", [])),
            metrics=dict(d.get("metrics", {})),
            active=bool(d.get("active", False)),
            manifest=d.get("manifest"),
            created_by=d.get("created_by"),
            styles=list(d.get("styles", [""])),
            style=d.get("style", ""),
            warnings=list(d.get("warnings") or []),
        )


# -- vocabularies -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Vocabulary:
    """An imported concept vocabulary (``active``: answers link to it)."""

    id: str
    name: str  # the name linked concepts carry
    filename: str
    format: str  # tsv | obo
    concepts: int
    names: int
    url_pattern: str
    source: str  # provenance
    created_at: dt.datetime
    active: bool
    sha256: str = ""  # of the imported file
    bytes: int = 0  # its size
    created_by: str | None = None  # the id of the API key that imported it

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Vocabulary:
        return cls(
            id=d["id"],
            name=d.get("name", ""),
            filename=d.get("filename", ""),
            format=d.get("format", ""),
            concepts=int(d.get("concepts", 0)),
            names=int(d.get("names", 0)),
            url_pattern=d.get("url_pattern", ""),
            source=d.get("source", ""),
            created_at=_required_time(d["created_at"]),
            active=bool(d.get("active", False)),
            sha256=d.get("sha256", ""),
            bytes=int(d.get("bytes", 0)),
            created_by=d.get("created_by"),
        )


@dataclass(frozen=True)
class Linking:
    """What answers link to: an imported vocabulary's id, or ``default`` (the deployment's own,
    ``origin`` packaged, file or none)."""

    id: str
    origin: str  # store | packaged | file | none
    name: str | None
    concepts: int
    rerank: str | None  # the encoder that re-ranks candidates

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Linking:
        return cls(
            id=d["id"],
            origin=d.get("origin", ""),
            name=d.get("name"),
            concepts=int(d.get("concepts", 0)),
            rerank=d.get("rerank"),
        )


# -- evaluations ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Evaluation:
    id: str
    state: str
    model_id: str
    dataset_id: str | None
    split: str
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    metrics: dict[str, Any]  # strict P/R/F1, per_type, exact_match, calibration, …
    error: str | None
    type_map: dict[str, Any] = field(default_factory=dict)  # the dataset's types → the model's
    created_by: str | None = None  # the id of the API key that created it

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evaluation:
        return cls(
            id=d["id"],
            state=d["state"],
            model_id=d["model_id"],
            dataset_id=d.get("dataset_id"),
            split=d.get("split", "test"),
            created_at=_required_time(d["created_at"]),
            started_at=_time(d.get("started_at")),
            finished_at=_time(d.get("finished_at")),
            metrics=dict(d.get("metrics", {})),
            error=d.get("error"),
            type_map=dict(d.get("type_map") or {}),
            created_by=d.get("created_by"),
        )


# -- annotation jobs (bulk) -------------------------------------------------------------------
@dataclass(frozen=True)
class NoteFile:
    """A notes file uploaded for annotation jobs; ``problems``: the notes it could not read."""

    id: str
    filename: str
    format: str
    bytes: int
    sha256: str
    notes: int
    problems: list[dict[str, Any]]
    created_at: dt.datetime
    #: how its bytes were read as text: ``{"name", "detected_by", "confidence"}`` (None: Parquet)
    encoding: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NoteFile:
        return cls(
            id=d["id"],
            filename=d["filename"],
            format=d["format"],
            bytes=int(d["bytes"]),
            sha256=d["sha256"],
            notes=int(d["notes"]),
            problems=list(d.get("problems") or []),
            created_at=_required_time(d["created_at"]),
            encoding=d.get("encoding"),
        )


@dataclass(frozen=True)
class AnnotationProgress:
    """Notes ``committed`` (written for good) of ``total``, the rate since the job started,
    the time left at that rate, and the chunks by state."""

    total: int | None = None
    done: int = 0
    committed: int = 0
    failed_notes: int = 0
    other_language_notes: int = 0
    entities: int = 0
    notes_per_second: float = 0.0
    elapsed_seconds: float = 0.0
    eta_seconds: float | None = None
    chunks: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AnnotationProgress:
        return cls(
            total=d.get("total"),
            done=int(d.get("done", 0)),
            committed=int(d.get("committed", 0)),
            failed_notes=int(d.get("failed_notes", 0)),
            other_language_notes=int(d.get("other_language_notes", 0)),
            entities=int(d.get("entities", 0)),
            notes_per_second=float(d.get("notes_per_second", 0.0)),
            elapsed_seconds=float(d.get("elapsed_seconds", 0.0)),
            eta_seconds=d.get("eta_seconds"),
            chunks=dict(d.get("chunks") or {}),
        )


@dataclass(frozen=True)
class AnnotationJob:
    id: str
    state: str  # queued → running → succeeded | failed | cancelled
    model_id: str
    source: dict[str, Any]  # {"kind": "file", "input"} | {"kind": "sql", "warehouse", "query"}
    output: dict[str, Any]  # {"kind": "file", "format"} | {"kind": "omop", "warehouse", "table"}
    params: dict[str, Any]
    chunk_size: int
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    cancel_requested: bool
    progress: AnnotationProgress
    error: str | None
    created_by: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AnnotationJob:
        return cls(
            id=d["id"],
            state=d["state"],
            model_id=d["model_id"],
            source=dict(d.get("source") or {}),
            output=dict(d.get("output") or {}),
            params=dict(d.get("params") or {}),
            chunk_size=int(d["chunk_size"]),
            created_at=_required_time(d["created_at"]),
            started_at=_time(d.get("started_at")),
            finished_at=_time(d.get("finished_at")),
            cancel_requested=bool(d.get("cancel_requested", False)),
            progress=AnnotationProgress.from_dict(d.get("progress") or {}),
            error=d.get("error"),
            created_by=d.get("created_by"),
        )


# -- lists and health -------------------------------------------------------------------------
@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list endpoint: ``data`` and the total ``count`` over all pages."""

    data: list[T]
    count: int


@dataclass(frozen=True)
class Readiness:
    """``GET /readyz``: ready only when the store and broker answer and a model is loaded."""

    ready: bool
    status: str
    reasons: list[str]
    model: ServedModel | None
    model_error: str | None

    @classmethod
    def from_dict(cls, d: dict[str, Any], ready: bool) -> Readiness:
        model = d.get("model")
        return cls(
            ready=ready,
            status=str(d.get("status", "ready" if ready else "not ready")),
            reasons=list(d.get("reasons", [])),
            model=ServedModel.from_dict(model) if isinstance(model, dict) else None,
            model_error=d.get("model_error"),
        )
