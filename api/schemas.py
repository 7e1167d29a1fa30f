"""Request and response bodies, one class per direction (``JobCreate`` in, ``JobOut`` out)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    create_model,
    model_validator,
)

from mslm_core.active import STRATEGIES as ACTIVE_STRATEGIES
from mslm_core.charsets import DetectedBy
from mslm_core.config import (
    CHOICES,
    DEFAULT_STRATEGY,
    JOB_OPTIONS,
    STRATEGY_CHOICES,
    TrainConfig,
)
from mslm_core.notes import NOTE_FORMATS
from mslm_core.pipeline import ANNOTATE_OPTIONS, DEFAULTS, AnnotateOptions
from mslm_core.pipeline import JOB_OPTIONS as ANNOTATION_JOB_OPTIONS
from mslm_core.render import OUTPUTS, outputs_help
from mslm_core.sources import MAX_SOURCES, MAX_WEIGHT
from mslm_core.types import ASSERTION_ATTRIBUTES
from store.documents import MAX_DOCUMENTS

ASSERTION_ATTRIBUTE_NAMES = tuple(ASSERTION_ATTRIBUTES)
OUTPUT_FORMATS = tuple(OUTPUTS)

# Text that reaches the database as an id, a key or a name: no control characters (PostgreSQL
# refuses NUL in text: a 422 here, not an error there), at most 200 characters.
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=NO_CONTROL)]
# A note to annotate: any length, any Unicode but NUL and lone surrogates, which every input
# boundary refuses with a 422 naming the text and the character (mslm_core.text.character_problem).
# The document says so (a schema-valid body is accepted); the check itself is the route's, so
# that its answer names where the character is.
NoteText = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^[^\x00]*$",
            "description": "any length, any Unicode but NUL and lone surrogates",
        }
    ),
]
# a type map's target: a type, a list of types ("O" among them: maybe no entity), or null
TypeTarget = Identifier | list[Identifier] | None


def _keys_are_identifiers(schema: dict[str, Any]) -> None:
    """JSON Schema of a ``dict[Identifier, X]`` as pydantic validates it: pydantic writes the
    key pattern as ``patternProperties``, which leaves a key outside the pattern unchecked (a
    control character in a key made any value schema-valid, and the service refused it)."""
    ((pattern, value),) = schema.pop("patternProperties").items()  # one key pattern
    schema["additionalProperties"] = value
    schema.setdefault("propertyNames", {})["pattern"] = pattern


# the style a model trained with source styles reads text as: a corpus it was trained on ("":
# none, for a model trained with a blank style too)
Style = Annotated[str, StringConstraints(max_length=200, pattern=NO_CONTROL)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- annotate ---------------------------------------------------------------------------------
_OPTIONS = {f.name: f for f in dataclasses.fields(AnnotateOptions)}
#: the options written in a request's ``labelstudio`` object rather than at its top
_LABELSTUDIO_NAMES = ("from_name", "to_name")


def _bounds(spec: dataclasses.Field[Any]) -> dict[str, Any]:
    bounds = spec.metadata["bounds"]
    return {} if bounds is None else {k: v for k, v in vars(bounds).items() if v is not None}


def _annotate_option(name: str) -> tuple[Any, Any]:
    """An annotation option as the API takes it: the kind, default, help, bounds and choices
    of its field in ``mslm_core.pipeline.AnnotateOptions``."""
    spec = _OPTIONS[name]
    meta, default = spec.metadata, cast(Any, spec.default)
    if name == "style":
        return Style | None, Field(None, description=meta["help"])
    if spec.default_factory is not dataclasses.MISSING:  # the per-type thresholds
        value = Annotated[float, Field(allow_inf_nan=False, **_bounds(spec))]
        return dict[str, value], Field(
            default_factory=dict, max_length=1000, description=meta["help"]
        )
    if meta["choices"] is not None:
        return Literal[tuple(meta["choices"])], Field(default, description=meta["help"])
    if name in _LABELSTUDIO_NAMES:
        return Identifier, Field(default, description=meta["help"])
    return type(default), Field(default, description=meta["help"], **_bounds(spec))


class _Texts(Strict):
    texts: list[NoteText] = Field(min_length=1, description="raw texts")
    model: Identifier | None = Field(None, description="a model id; default: the active model")


if TYPE_CHECKING:  # their fields are mslm_core.pipeline's AnnotateOptions
    _AnnotateOptions = _Texts
    LabelStudioNames = Strict
else:
    _AnnotateOptions = create_model(
        "_AnnotateOptions",
        __base__=_Texts,
        **{n: _annotate_option(n) for n in ANNOTATE_OPTIONS if n not in _LABELSTUDIO_NAMES},
    )
    LabelStudioNames = create_model(
        "LabelStudioNames",
        __base__=Strict,
        **{n: _annotate_option(n) for n in _LABELSTUDIO_NAMES},
    )


_OPTION_FIELDS = frozenset({*ANNOTATE_OPTIONS, "labelstudio"})


class AnnotateRequest(_AnnotateOptions):
    labelstudio: LabelStudioNames = Field(
        default_factory=LabelStudioNames,
        description="for format labelstudio: the names in the project's labelling config",
    )

    def options(self, **given: Any) -> AnnotateOptions:
        """The request's options (``given`` over them), as the pipeline takes them."""
        if not given and not self.model_fields_set & _OPTION_FIELDS:
            return DEFAULTS  # none asked for: every field's default is the pipeline's
        top = self.model_dump(include=set(ANNOTATE_OPTIONS))
        names = self.labelstudio.model_dump()
        return AnnotateOptions(**{**top, **names, **given})


class CueOut(BaseModel):
    attribute: Literal[ASSERTION_ATTRIBUTE_NAMES] = Field(  # type: ignore[valid-type]
        description="the attribute it sets"
    )
    text: str = Field(description="the trigger phrase or section header: texts[i][start:end]")
    start: int
    end: int


_ASSERTION_DOC = """ConText (Harkema et al. 2009) over the entity's sentence, and the note's
section: each attribute is true when a trigger of its kind reaches the entity, or its section
sets it. Present, for the patient, now: all false."""
if TYPE_CHECKING:  # its fields are the attributes mslm_core.types declares

    class AssertionOut(BaseModel):
        cues: list[CueOut]

else:
    AssertionOut = create_model(
        "AssertionOut",
        __doc__=_ASSERTION_DOC,
        **{a: (bool, Field(description=says)) for a, says in ASSERTION_ATTRIBUTES.items()},
        cues=(
            list[CueOut],
            Field(description="what set the attributes: triggers nearest first, then the header"),
        ),
    )


class ConceptOut(BaseModel):
    id: str = Field(
        description="its id in the linked vocabulary (an OMOP concept id for one "
        "imported from Athena)"
    )
    name: str = Field(description="the concept's preferred name")
    score: float = Field(description="similarity of its best-matching name; 1.0: an exact name")
    vocabulary: str = Field(description="the vocabulary it comes from (MeSH, SNOMED, RxNorm …)")
    url: str | None = Field(None, description="its page (MSLM_VOCABULARY_URL); null: none")
    code: str | None = Field(None, description="its code in that vocabulary (D003920, 73211009)")
    concept_id: int | None = Field(
        None, description="its OMOP standard concept id, when the vocabulary is OMOP's"
    )
    source_id: str | None = Field(
        None, description='the non-standard concept whose name matched, reached by "Maps to"'
    )
    confidence: float | None = Field(
        None,
        description="the calibrated probability that it is the entity's concept (the top "
        "candidate; null: the vocabulary has no calibration)",
    )


class EntityOut(BaseModel):
    start: int = Field(description="offset into the submitted string (code points)")
    end: int = Field(description="end offset, exclusive: text == texts[i][start:end]")
    text: str
    type: str
    confidence: float = Field(description="detection_score × type_score")
    detection_score: float
    type_score: float
    assertion: AssertionOut | None = Field(
        None,
        description="clinical context; absent when the service runs with MSLM_CONTEXT off, and "
        "for the clinical schema's types it is not about (Dosage, Result, Anatomy …) unless "
        "the modifier is tied to a head: then its head's (a dose of a negated drug is negated)",
    )
    section: str | None = Field(
        None,
        description="the note's section the entity lies in (history_of_present_illness, "
        "past_medical_history, family_history, allergy, medications, review_of_systems, "
        "observation_and_plan, …: mslm_core/context/sections.json and the site's rules); "
        "absent before the first header and when MSLM_CONTEXT is off",
    )
    concept: ConceptOut | None = Field(
        None,
        description="the linked concept (null below MSLM_LINK_THRESHOLD); absent when the "
        "service links to no vocabulary (MSLM_VOCABULARY=none and none activated), and for "
        "types that are not linked (the clinical schema's Dosage and Result: no MeSH branch)",
    )
    candidates: list[ConceptOut] | None = Field(
        None,
        description="candidate concepts, best first; absent when there is no vocabulary or "
        "the type is not linked",
    )


class TextLanguage(BaseModel):
    code: str = Field(description="ISO 639-1")
    probability: float


class RelationOut(BaseModel):
    type: str = Field(
        description="the modifier's role for its head: dose, route, frequency, duration (of a "
        "Drug, or a Problem's duration), value (of a Test or a Problem), site (an Anatomy of "
        "a Problem, Test or Procedure), severity (of a Problem)"
    )
    head: int = Field(description="index into this result's entities: the drug, test, finding")
    modifier: int = Field(description="index into this result's entities: the modifier")
    confidence: float = Field(description="the probability that this is the modifier's head")


class FactPart(BaseModel):
    entity: int = Field(description="index into this result's entities")
    text: str
    start: int
    end: int
    confidence: float = Field(description="the entity's confidence, times its tie's for a modifier")
    quantity: dict[str, Any] | None = Field(
        None,
        description="a dose's or a value's number (or low/high, or numbers of a ratio such as "
        "a blood pressure), comparator (<, <=, >, >=, ~), unit as written and its UCUM code "
        "(ucum), or qualitative (positive, normal …)",
    )
    timing: dict[str, Any] | None = Field(
        None,
        description="a frequency as FHIR Timing.repeat counts it: frequency per period "
        "period_unit (h, d, wk, mo), period_max, when (HS, MORN, EVE, C), as_needed, count",
    )
    iso8601: str | None = Field(None, description="a duration, ISO 8601 (P3D, PT48H)")
    code: dict[str, str] | None = Field(
        None, description="a route as a SNOMED CT code: system, code, display"
    )


class MedicationOut(BaseModel):
    drug: FactPart
    dose: FactPart | None = None
    route: FactPart | None = None
    frequency: FactPart | None = None
    duration: FactPart | None = None
    assertion: dict[str, bool] | None = Field(
        None, description="the drug's clinical context (absent when no context step ran)"
    )


class MeasurementOut(BaseModel):
    test: FactPart
    value: FactPart
    unit: str | None = Field(None, description="the value's unit: UCUM, else as written")
    number: float | None = None
    comparator: str | None = None
    low: float | None = None
    high: float | None = None
    numbers: list[float] | None = Field(None, description="a ratio's numbers: 120/80")
    qualitative: str | None = Field(None, description="a value in words: positive, normal")
    assertion: dict[str, bool] | None = Field(
        None, description="the test's clinical context (absent when no context step ran)"
    )


class FactsOut(BaseModel):
    medications: list[MedicationOut] = Field(
        default_factory=list, description="each Drug with the regimen tied to it"
    )
    measurements: list[MeasurementOut] = Field(
        default_factory=list, description="each Test with the value tied to it"
    )


class TextResult(BaseModel):
    entities: list[EntityOut]
    relations: list[RelationOut] = Field(
        default_factory=list,
        description="each modifier tied to its head (a model whose bundle has a relation "
        "scorer; empty otherwise)",
    )
    facts: FactsOut = Field(
        default_factory=FactsOut,
        description="the medications and measurements the relations make of the entities",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="what to know about this text's answer: written in another language than "
        "the model reads (it was annotated all the same unless MSLM_REFUSE_OTHER_LANGUAGES)",
    )
    language: TextLanguage | None = Field(
        None, description="the text's language, when it is surely another than the model's"
    )


class ServedModel(BaseModel):
    id: str
    backend: str
    precision: str
    provider: str
    types: list[str]
    language: str = Field("en", description="the language the model reads (ISO 639-1)")


class LinkedVocabulary(BaseModel):
    name: str = Field(description="the vocabulary entities were linked to (MeSH, OMOP …)")
    concepts: int = Field(description="how many concepts it holds")
    calibrated: bool = Field(
        description="whether each concept comes with a confidence and abstains below its "
        "type's threshold"
    )


class ContextUsed(BaseModel):
    profile: str = Field(
        description="the conventions the clinical context followed: omop or context "
        "(the option context_profile)"
    )


class AnnotateResponse(BaseModel):
    model: ServedModel
    linking: LinkedVocabulary | None = Field(
        description="what the entities were linked to; null: no linking"
    )
    context: ContextUsed | None = Field(
        None, description="the clinical context's conventions; null: no clinical context"
    )
    results: list[TextResult]


# The other shapes of a 200 from /v1/annotate (``format``), documented so that the OpenAPI
# document tells the truth and generated clients can read them; built by mslm_core.render.
class BioCLocation(BaseModel):
    offset: int
    length: int


class BioCAnnotation(BaseModel):
    id: str
    infons: dict[str, str] = Field(
        description="type, confidence; the clinical context (negated … family: "
        '"true"/"false", cues); strings, as BioC infons are'
    )
    text: str
    locations: list[BioCLocation]


class BioCPassage(BaseModel):
    infons: dict[str, str]
    offset: int
    text: str
    sentences: list[dict[str, Any]]
    annotations: list[BioCAnnotation]
    relations: list[dict[str, Any]]


class BioCDocument(BaseModel):
    id: str = Field(description="the text's index in the request")
    infons: dict[str, str]
    passages: list[BioCPassage]
    relations: list[dict[str, Any]]


class BioCCollection(BaseModel):
    """``format: bioc``: a BioC JSON collection, one document per text."""

    source: str
    date: str
    key: str
    infons: dict[str, str]
    documents: list[BioCDocument]


class LabelStudioValue(BaseModel):
    start: int
    end: int
    text: str
    labels: list[str]


class LabelStudioRegion(BaseModel):
    id: str
    from_name: str
    to_name: str
    type: Literal["labels"]
    value: LabelStudioValue
    score: float
    meta: dict[str, list[str]] | None = Field(
        None, description="text: the clinical context, when the entity is not asserted present"
    )


class LabelStudioPrediction(BaseModel):
    model_version: str
    result: list[LabelStudioRegion]
    score: float | None = Field(None, description="the lowest region score; absent: no region")


class LabelStudioTask(BaseModel):
    """``format: labelstudio``: a task with pre-annotations, ready to import."""

    data: dict[str, str]
    predictions: list[LabelStudioPrediction]


# -- datasets ---------------------------------------------------------------------------------
class SplitFile(BaseModel):
    filename: str
    format: str
    bytes: int
    sha256: str
    documents: int | None = Field(
        None, description="documents with ids (a version after the first); null: as uploaded"
    )


class DatasetOut(BaseModel):
    id: str
    name: str
    created_by: str | None = Field(
        None, description="the id of the API key that created it (never the secret)"
    )
    created_at: dt.datetime
    files: dict[str, SplitFile]
    stats: dict[str, dict[str, Any]] = Field(description="per split: sentences, mentions, …")
    types: list[str]
    version: int = Field(description="the latest version (1: as uploaded)")
    unlabelled: int = Field(description="documents waiting to be labelled (what suggest ranks)")


class DatasetList(BaseModel):
    data: list[DatasetOut]
    count: int


class EntityIn(Strict):
    start: int = Field(ge=0, description="character offset of the first character")
    end: int = Field(ge=1, description="character offset after the last character")
    label: Identifier
    concept: Identifier | None = None


class DocumentIn(Strict):
    id: Identifier = Field(description="the document's id: a document with this id is replaced")
    text: str = Field(min_length=1)
    entities: list[EntityIn] | None = Field(
        None,
        max_length=10_000,
        description="its annotation ([] : labelled, no entity); null or absent: not labelled "
        "yet — it goes to the pool that suggest ranks",
    )


class DocumentsChange(Strict):
    documents: list[DocumentIn] = Field(default_factory=list, max_length=MAX_DOCUMENTS)
    remove: list[Identifier] = Field(
        default_factory=list, max_length=MAX_DOCUMENTS, description="ids of documents to delete"
    )


class VersionChange(BaseModel):
    source: str = Field(description="upload, api or labelstudio")
    added: int = 0
    replaced: int = 0
    removed: int = 0
    documents: int | None = Field(None, description="labelled documents in the version")
    unlabelled: int = 0


class DatasetVersionOut(BaseModel):
    dataset_id: str
    version: int
    created_by: str | None
    created_at: dt.datetime
    change: VersionChange
    stats: dict[str, dict[str, Any]]
    types: list[str]
    kept: bool = Field(
        description="its files are kept (the latest, or a job trained on it); the record always is"
    )


class DatasetVersionList(BaseModel):
    data: list[DatasetVersionOut]
    count: int


class SuggestRequest(Strict):
    limit: int = Field(10, ge=1, le=1000, description="how many documents to suggest")
    strategy: Literal[ACTIVE_STRATEGIES] = Field(  # type: ignore[valid-type]
        "least_confidence",
        description="least_confidence: 1 - the normalised confidence of the note's decisions; "
        "margin: the closest call between two choices; entropy: the mean normalised entropy",
    )
    diversity: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="0: by uncertainty alone; higher: near-identical notes are spread out "
        "(maximal marginal relevance over TF-IDF)",
    )
    model: Identifier | None = Field(None, description="a model id; default: the active model")
    max_documents: int = Field(
        1000,
        ge=1,
        le=10_000,
        description="pool documents scored at most (the first ones): scoring costs what "
        "annotating costs",
    )


class Suggestion(BaseModel):
    id: str
    text: str
    uncertainty: float = Field(description="in [0, 1], from the model's calibrated confidences")
    score: float = Field(description="the priority after diversity (the order)")
    similar_to: str | None = Field(
        None, description="the suggested document ranked before it that it is most like"
    )


class SuggestResponse(BaseModel):
    model: str
    strategy: str
    diversity: float
    version: int
    pool: int = Field(description="unlabelled documents in the dataset's latest version")
    scored: int
    data: list[Suggestion]


# -- jobs -------------------------------------------------------------------------------------
class ExportOptions(Strict):
    onnx: bool = True
    quantize: Literal["int8"] | None = None


class JobDataset(Strict):
    """One of the datasets a job trains on (docs/clinical-schema.md, 'Jobs on several corpora')."""

    id: Identifier
    type_map: dict[Identifier, TypeTarget] = Field(
        default_factory=dict,
        max_length=1000,
        json_schema_extra=_keys_are_identifiers,
        description="source type → target type, a list of types the corpus does not tell "
        "apart ('O' listed: maybe no entity), or null (dropped: its words are plain words); "
        "'*' names every other type. A type the job's schema has and this dataset does not "
        "annotate is not learned as O from it (partial labels).",
    )
    weight: float = Field(
        1.0,
        gt=0.0,
        le=MAX_WEIGHT,
        description="how many times each of its training sentences is seen per epoch on "
        "average (0.5: a random half each epoch)",
    )


def _one_of_dataset_id_or_datasets(schema: dict[str, Any]) -> None:
    """The document says what the validator does: exactly one of the two, neither null."""
    for name in ("dataset_id", "datasets"):
        prop = schema["properties"][name]
        (given,) = [t for t in prop.pop("anyOf") if t.get("type") != "null"]
        prop.pop("default", None)
        prop.update(given)
    schema["oneOf"] = [{"required": ["dataset_id"]}, {"required": ["datasets"]}]


def _job_option(name: str) -> tuple[Any, Any]:
    """A job option as the API takes it: the type, help and bounds of TrainConfig's field (a
    setting of a few words: one of them)."""
    spec = _TRAIN_FIELDS[name]
    kind = next(t for t in typing.get_args(_TRAIN_HINTS[name]) or (_TRAIN_HINTS[name],) if t)
    if name in CHOICES:
        kind = Literal[CHOICES[name]]
    bounds = spec.metadata["bounds"]
    limits = {} if bounds is None else {k: v for k, v in vars(bounds).items() if v is not None}
    return kind | None, Field(None, description=spec.metadata["help"], **limits)


_TRAIN_HINTS = typing.get_type_hints(TrainConfig)
_TRAIN_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
if TYPE_CHECKING:  # its fields are mslm_core.config's JOB_OPTIONS (but the two below)
    _JobOptions = Strict
else:
    _JobOptions = create_model(
        "_JobOptions",
        __base__=Strict,
        **{n: _job_option(n) for n in JOB_OPTIONS if n not in ("base_model", "strategy")},
    )


class JobCreate(_JobOptions):
    model_config = ConfigDict(json_schema_extra=_one_of_dataset_id_or_datasets)  # + Strict's

    dataset_id: Identifier | None = Field(None, description="one dataset, as uploaded")
    datasets: list[JobDataset] | None = Field(
        None,
        min_length=1,
        max_length=MAX_SOURCES,
        description="several datasets mapped onto one schema (instead of dataset_id), each "
        "listed once",
    )
    base_model: str | None = Field(
        None,
        description="an encoder allowed by MSLM_BASE_MODELS (the document lists this deployment's)",
    )
    strategy: Literal[STRATEGY_CHOICES] | None = Field(  # type: ignore[valid-type]
        None,
        description=f"default: {DEFAULT_STRATEGY} (docs/benchmarks.md, 'Does MSLM help?')",
        # the web page's strategy list and its default are read from here
        json_schema_extra={"x-default": DEFAULT_STRATEGY},
    )
    export: ExportOptions = Field(default_factory=ExportOptions)
    idempotency_key: Identifier | None = None

    @model_validator(mode="after")
    def _one_way_to_name_the_data(self) -> JobCreate:
        if (self.dataset_id is None) == (self.datasets is None):
            raise ValueError("give either dataset_id or datasets")
        for name in {"dataset_id", "datasets"} & self.model_fields_set:
            if getattr(self, name) is None:  # as the document says: left out, never null
                raise ValueError(f"{name} is null: leave it out")
        return self

    def params(self) -> dict[str, Any]:
        return self.model_dump(
            exclude={"dataset_id", "datasets", "export", "idempotency_key"}, exclude_none=True
        )


# store.tables.STATES (a test keeps them equal); an unknown state is a 422 naming the field
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobDatasetOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str | None = Field(validation_alias="dataset_id", description="null: deleted since")
    type_map: dict[str, Any]
    weight: float
    version: int | None = Field(
        None, description="the dataset's version it trained on (null: made before versions: 1)"
    )


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    state: str
    dataset_id: str | None = Field(description="its (first) dataset")
    datasets: list[JobDatasetOut] = Field(description="every dataset it trains on, in order")
    created_by: str | None = Field(
        None, description="the id of the API key that created it (never the secret)"
    )
    params: dict[str, Any]
    export: dict[str, Any]
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    attempts: int
    cancel_requested: bool
    progress: dict[str, Any] = Field(
        description="step, steps, epoch, epochs, loss, dev_f1, best_dev_f1; while it runs also "
        "phase (preparing, warm-up, training, evaluating, finishing, exporting), elapsed_s, "
        "steps_per_s (its own measured pace) and eta_s (seconds left, from that pace and the "
        "phases still to come; null until it has measured some steps)"
    )
    history: list[dict[str, Any]]
    metrics: dict[str, Any]
    model_id: str | None
    error: str | None
    warnings: list[str] = Field(
        default_factory=list,
        description="why its model is below the job's floor (min_dev_f1, or no entity predicted "
        "on dev): such a model is stored but served only when an admin forces it",
    )
    replaces: str | None = Field(
        None,
        description="the job whose served model this job's model replaces once it succeeds "
        "(the first start's full model replacing its early one)",
    )


class JobList(BaseModel):
    data: list[JobOut]
    count: int


# -- models -----------------------------------------------------------------------------------
class ModelOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    created_at: dt.datetime
    job_id: str | None
    created_by: str | None = Field(
        None, description="the id of the API key that created it (never the secret)"
    )
    base_model: str
    strategy: str
    types: list[str]
    precisions: list[str]
    metrics: dict[str, Any]
    warnings: list[str] = Field(
        default_factory=list,
        description="below its job's floor (JobOut.warnings): served only with force=true",
    )
    active: bool = False
    styles: list[str] = Field(
        default_factory=lambda: [""],
        description="the `style`s a request may read text as: the corpora the model was "
        "trained on with `source_styles`, and '' (none) when it has a blank style — or no "
        "styles at all, its only reading",
    )
    style: str = Field("", description="the style it reads text in when a request names none")


class ModelDetail(ModelOut):
    manifest: dict[str, Any]


class ModelList(BaseModel):
    data: list[ModelOut]
    count: int


# -- vocabularies -----------------------------------------------------------------------------
class VocabularyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str = Field(description="the name linked concepts carry (their `vocabulary`)")
    filename: str
    format: Literal["tsv", "obo"]
    sha256: str
    bytes: int
    concepts: int
    names: int = Field(description="names and synonyms, all concepts together")
    url_pattern: str = Field(description="a concept's page, {id} standing for its id; empty: none")
    source: str = Field(description="provenance, from the file's first line (TSV)")
    created_by: str | None = Field(
        None, description="the id of the API key that imported it (never the secret)"
    )
    created_at: dt.datetime
    active: bool = False


class LinkingOut(BaseModel):
    """What answers link to now, in this replica (the others follow within seconds)."""

    id: str = Field(description="the stored vocabulary's id, or 'default': MSLM_VOCABULARY")
    origin: Literal["store", "packaged", "file", "none"] = Field(
        description="store: imported; packaged: the MeSH vocabulary shipped with mslm; file: "
        "MSLM_VOCABULARY's file; none: no linking"
    )
    name: str | None
    concepts: int
    rerank: str | None = Field(
        None, description="the encoder whose embeddings re-rank candidates; null: TF-IDF order"
    )


class VocabularyList(BaseModel):
    data: list[VocabularyOut]
    count: int
    linking: LinkingOut


# -- evaluations ------------------------------------------------------------------------------
class EvaluationCreate(Strict):
    model_id: Identifier
    dataset_id: Identifier
    split: Literal["train", "dev", "test"] = "test"
    type_map: dict[Identifier, TypeTarget] = Field(
        default_factory=dict,
        max_length=1000,
        json_schema_extra=_keys_are_identifiers,
        description="the dataset's types mapped onto the model's (as a job's type_map); with "
        "a map the dataset is judged on the types it annotates: the model's other types are "
        "neither right nor wrong there",
    )


class EvaluationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    state: str
    model_id: str
    dataset_id: str | None
    created_by: str | None = Field(
        None, description="the id of the API key that created it (never the secret)"
    )
    split: str
    type_map: dict[str, Any] = Field(description="how the dataset's types were mapped")
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    metrics: dict[str, Any]
    error: str | None


# -- annotation jobs (bulk) -------------------------------------------------------------------
class NotesEncoding(BaseModel):
    name: str = Field(description="the encoding, as Python names it (utf-8, cp1252, utf-16…)")
    detected_by: DetectedBy = Field(
        description="given with the upload, its byte-order mark, every byte UTF-8 (or nearly: "
        "confidence), or charset-normalizer's guess"
    )
    confidence: float | None = Field(
        None, description="a guess's confidence; for UTF-8 with bad bytes, the share that is UTF-8"
    )


class NoteInputOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    filename: str
    format: str = Field(description="the file's format: " + ", ".join(NOTE_FORMATS))
    bytes: int
    sha256: str
    notes: int = Field(description="notes read")
    problems: list[dict[str, Any]] = Field(
        description="notes that could not be read: where (line, record, document), reason, "
        "id; with warning true, what was read with a doubt (a guessed encoding, a byte that "
        "did not decode) and kept"
    )
    encoding: NotesEncoding | None = Field(
        None, description="how the file's bytes were read as text (none: Parquet)"
    )
    created_at: dt.datetime


class NoteInputList(BaseModel):
    data: list[NoteInputOut]
    count: int


class FileSource(Strict):
    kind: Literal["file"]
    input: Identifier = Field(description="a notes file (POST /v1/annotation-jobs/inputs)")


class SqlSource(Strict):
    kind: Literal["sql"]
    warehouse: Identifier = Field(description="a name in MSLM_WAREHOUSES")
    query: Annotated[
        str, StringConstraints(min_length=1, max_length=20_000, pattern=r"(?is)^\s*(select|with)\b")
    ] = Field(
        description="a SELECT returning note_id (an integer) and note_text; run read-only, "
        "paged by note_id"
    )


class FileOutput(Strict):
    kind: Literal["file"]
    format: Literal[OUTPUT_FORMATS] = Field(  # type: ignore[valid-type]
        "jsonl",
        description=outputs_help(),
    )


SqlName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")]


class Staging(Strict):
    schema_: SqlName = Field(
        alias="schema",
        description="the schema of the CDM v5.4 DRUG_EXPOSURE and MEASUREMENT tables the facts "
        "are staged in (the job adds nlp_fact_source there: each row's NOTE_NLP rows)",
    )
    drugs: Literal["with_regimen", "all"] = Field(
        "with_regimen",
        description="with_regimen: a drug is staged when a dose, route, frequency or duration "
        "is tied to it; all: every drug the note gives the patient now",
    )


class OmopOutput(Strict):
    kind: Literal["omop"]
    warehouse: Identifier = Field(description="a name in MSLM_WAREHOUSES")
    table: Annotated[
        str,
        StringConstraints(pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$"),
    ] = Field("note_nlp", description="schema.table of an OMOP CDM v5.4 NOTE_NLP table")
    staging: Staging | None = Field(
        None,
        description="also stage the facts as DRUG_EXPOSURE and MEASUREMENT rows (type concept "
        "32858 NLP; the person, date and visit from the NOTE table beside NOTE_NLP); needs "
        "the clinical context and a model with a relation scorer (docs/bulk.md)",
    )


class _AnnotationJobSource(Strict):
    source: FileSource | SqlSource = Field(discriminator="kind")
    output: FileOutput | OmopOutput = Field(
        default_factory=lambda: FileOutput(kind="file", format="jsonl"), discriminator="kind"
    )
    model: Identifier | None = Field(None, description="a model id; default: the active model")


if TYPE_CHECKING:  # its fields are mslm_core.pipeline's AnnotateOptions that jobs take
    _AnnotationJobOptions = _AnnotationJobSource
else:
    _AnnotationJobOptions = create_model(
        "_AnnotationJobOptions",
        __base__=_AnnotationJobSource,
        **{n: _annotate_option(n) for n in ANNOTATION_JOB_OPTIONS},
    )


class AnnotationJobCreate(_AnnotationJobOptions):
    chunk_size: int | None = Field(
        None, ge=1, le=100_000, description="notes per chunk (default MSLM_BULK_CHUNK_NOTES)"
    )

    def options(self) -> AnnotateOptions:
        """The job's options, as the pipeline takes them."""
        return AnnotateOptions(**self.model_dump(include=set(ANNOTATION_JOB_OPTIONS)))


class AnnotationJobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    state: str
    model_id: str
    source: dict[str, Any]
    output: dict[str, Any]
    params: dict[str, Any]
    chunk_size: int
    created_by: str | None = Field(
        None, description="the id of the API key that created it (never the secret)"
    )
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    cancel_requested: bool
    progress: dict[str, Any] = Field(
        description="total, done, committed, failed_notes, other_language_notes (annotated, "
        "written in another language than the model's), entities, chunks by state, "
        "notes_per_second, elapsed_seconds, eta_seconds"
    )
    error: str | None


class AnnotationJobList(BaseModel):
    data: list[AnnotationJobOut]
    count: int


class NoteError(BaseModel):
    note_id: str | None
    reason: str
    where: str | None = None
    chunk: int | None = None
    warning: bool = Field(
        False, description="annotated all the same (written in another language than the model's)"
    )


class NoteErrorList(BaseModel):
    data: list[NoteError]
    count: int
