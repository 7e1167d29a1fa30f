"""The annotation pipeline: what ``POST /v1/annotate``, annotation jobs and ``mslm annotate``
run, in the shape of the ``transformers`` pipelines. The options of a call are checked once
(:meth:`AnnotationPipeline.options`), then:

- **preprocess** — texts → sentences → model windows: an
  :class:`~mslm_core.predict.AnnotationPlan`, whose later chunks are prepared as it runs;
- **forward** — the plan's steps, batches of windows through the engine: the only step a
  scheduler runs (the service's micro-batcher interleaves the steps of its requests);
- **postprocess** — the decoded mentions → the note's layout → the confidence thresholds →
  the clinical context (sections, then ConText) → the concepts, in that order, each text
  under its own options: an entity a threshold drops costs no context or linking;
- **render** — the entities as the format asks: this service's JSON, BioC, PubTator, Label
  Studio pre-annotations.

::

    pipeline = AnnotationPipeline.from_bundle("runs/clinical", context=ContextEngine.default())
    options = pipeline.options(min_confidence=0.5)
    found = pipeline(["No fever today."], options)  # entities per text
    pipeline.render(["No fever today."], found, options)  # the response body and media type

What a call may ask is :class:`AnnotateOptions`, declared once: the API's request bodies (of
``/v1/annotate`` and annotation jobs), the client's option dictionaries and the command's flags
are made from it or checked against it (``tests/test_architecture.py``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import measurements, regimen
from .active import check_strategy, raw_uncertainties
from .bundle import check_style
from .clinical_types import context_applies, context_attributes, linked
from .config import Bounds
from .context.rules import PROFILES
from .errors import ConfigError
from .findings import (
    findings_by_name,
    findings_cut_from_their_site,
    findings_with_their_site,
    findings_without_their_severity,
    imaging_findings,
    problem_list_titles,
    procedures_by_name,
)
from .inference import EngineInfo, EntityExtractor, check_texts
from .language import Language, other_language
from .layout import Layout
from .render import PREDICTION_FORMATS, media_type, predictions_help, render_predictions
from .shorthand import ShorthandFinder
from .types import Assertion, Entity

if TYPE_CHECKING:
    from .context import ContextEngine
    from .linking import Linker
    from .predict import AnnotationPlan

__all__ = [
    "ANNOTATE_OPTIONS",
    "DEFAULTS",
    "JOB_OPTIONS",
    "AnnotateOptions",
    "AnnotationPipeline",
    "OptionsError",
    "Rendered",
    "thresholded",
]


class OptionsError(ConfigError):
    """An annotation option is invalid: ``field`` names it, the message says why."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


def _option(
    default: Any,
    help: str,
    *,
    job: bool = True,
    bounds: Bounds | None = None,
    choices: Sequence[str] | None = None,
) -> Any:
    """An annotation option: ``help`` says what it does (the API's description, the command's
    help); ``job``: annotation jobs take it too (the others are how a response is written);
    ``bounds``: the range of a number (of each value, for a mapping); ``choices``: the values
    a string may take."""
    meta = {"help": help, "job": job, "bounds": bounds, "choices": choices}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


STYLE_HELP = (
    "a model trained with source styles: read the texts as this corpus's (one of its styles; "
    "'': none, for a model with a blank style or none); default: the model's own"
)
FORMAT_HELP = predictions_help()


@dataclass(frozen=True)
class AnnotateOptions:
    """What one annotation call may ask; every field's default is the default of the API, the
    annotation jobs and the command alike. Checked when made (:class:`OptionsError` names the
    field); the style is checked against a model by :meth:`AnnotationPipeline.options`."""

    style: str | None = _option(None, STYLE_HELP)
    min_confidence: float = _option(
        0.0, "drop entities below this confidence", bounds=Bounds(ge=0, le=1)
    )
    min_confidence_per_type: Mapping[str, float] = _option(
        {},
        "per-type thresholds, over min_confidence (above 1: drop the type)",
        bounds=Bounds(ge=0),
    )
    context: bool = _option(
        True,
        "the clinical context of each finding (negated, possible, hypothetical, historical, "
        "family, allergy) and its section",
    )
    context_profile: str = _option(
        "default",
        "the conventions of the clinical context: omop (a finding to rule out or evaluate for "
        "is hypothetical, as OMOP's Rule_out), context (ConText's and NegEx's reference "
        "conventions: it is affirmed, under consideration; history told by a date or 'prior' "
        "is historical; a denied finding is not also historical); default: the deployment's "
        "(MSLM_CONTEXT_PROFILE)",
        choices=("default", *PROFILES),
    )
    linking: bool = _option(True, "each entity's concept in the linked vocabulary")
    format: str = _option("json", FORMAT_HELP, job=False, choices=PREDICTION_FORMATS)
    from_name: str = _option("label", "labelstudio: the Labels control's name", job=False)
    to_name: str = _option("text", "labelstudio: the Text object's name", job=False)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "style":
                if value is not None and not isinstance(value, str):
                    raise OptionsError(f.name, f"must be a string, not {type(value).__name__}")
            elif isinstance(f.default, bool):
                if not isinstance(value, bool):
                    raise OptionsError(f.name, f"must be true or false, not {value!r}")
            elif isinstance(f.default, (int, float)):
                _check_number(f.name, value, f.metadata["bounds"])
                if isinstance(f.default, int) and not float(value).is_integer():
                    raise OptionsError(f.name, f"must be a whole number, not {value!r}")
            elif isinstance(f.default, str):
                if not isinstance(value, str):
                    raise OptionsError(f.name, f"must be a string, not {type(value).__name__}")
                choices = f.metadata["choices"]
                if choices is not None and value not in choices:
                    raise OptionsError(f.name, f"must be one of {', '.join(choices)}")
            else:  # the per-type thresholds
                if not isinstance(value, Mapping):
                    raise OptionsError(f.name, "must map entity types to thresholds")
                for kind, threshold in value.items():
                    if not isinstance(kind, str):
                        raise OptionsError(f.name, f"type {kind!r} is not a string")
                    _check_number(f"{f.name}.{kind}", threshold, f.metadata["bounds"])
                object.__setattr__(self, f.name, {k: float(v) for k, v in value.items()})

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> AnnotateOptions:
        """The options an annotation job's stored parameters hold (the others: defaults)."""
        return cls(**{name: params[name] for name in JOB_OPTIONS if name in params})

    def params(self) -> dict[str, Any]:
        """The job options as an annotation job stores them (:meth:`from_params` reads them)."""
        return {name: getattr(self, name) for name in JOB_OPTIONS}


def _check_number(name: str, value: Any, bounds: Bounds | None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptionsError(name, f"must be a number, not {value!r}")
    if not math.isfinite(value):
        raise OptionsError(name, f"must be finite, not {value!r}")
    problem = bounds.problem(value) if bounds is not None else None
    if problem:
        raise OptionsError(name, f"{problem}, got {value:g}")


#: Every option, in declaration order; those annotation jobs take (the rest write a response).
ANNOTATE_OPTIONS = tuple(f.name for f in dataclasses.fields(AnnotateOptions))
JOB_OPTIONS = tuple(f.name for f in dataclasses.fields(AnnotateOptions) if f.metadata["job"])
DEFAULTS = AnnotateOptions()


def thresholded(entities: Sequence[Entity], options: AnnotateOptions = DEFAULTS) -> list[Entity]:
    """The entities at or above ``min_confidence`` and their type's own threshold (a threshold
    above 1 drops the type), in order."""
    floor, per_type = options.min_confidence, options.min_confidence_per_type
    return [e for e in entities if e.confidence >= max(floor, per_type.get(e.type, 0.0))]


@dataclass(frozen=True)
class Rendered:
    """A response as its format writes it: text (PubTator) or a JSON value, and its media
    type."""

    body: str | dict[str, Any] | list[dict[str, Any]]
    media_type: str


Options = AnnotateOptions | Sequence[AnnotateOptions] | None


class AnnotationPipeline:
    """One model's annotation, from raw texts to a response: the engine (an
    :class:`~mslm_core.inference.EntityExtractor`), the ConText engine of the clinical context
    (None: no context) and the linker of the concepts (None: no linking). ``linker`` may be
    swapped between calls (the service follows the vocabulary a site activates)."""

    def __init__(
        self,
        extractor: EntityExtractor,
        context: ContextEngine | None = None,
        linker: Linker | None = None,
        layout: Layout | None = None,
    ):
        self.extractor = extractor
        self.context = context
        self.linker = linker
        # a note's lines, list items and headers (the context's section headers, when it has
        # a site's own)
        sectionizer = context.sectionizer if context is not None else None
        self.layout = layout or Layout(sectionizer)
        # vitals and lab values are read by rule for a model that has both types
        types = set(extractor.info.types) if extractor is not None else set()
        self.measures = {"Test", "Result"} <= types
        self.doses = "Dosage" in types
        # a drug named by its class's stem ("ondansetron"), for a model that has drugs
        self.drugs = "Drug" in types
        # "severe chest pain": a finding's degree is its Severity, not part of it
        self.findings = "Problem" in types
        self.severity = "Severity" in types
        self.regimen_parts = tuple(t for t in regimen.PARTS if t in types)
        # each modifier tied to its head, when the bundle has a relation scorer
        self.relations = extractor.relations if extractor is not None else None
        # clinical shorthand of the model's types ("SOB", "HTN", "CBC", "RUQ")
        shorthand = ShorthandFinder(types) if types else None
        self.shorthand = shorthand if shorthand is not None and shorthand.kind else None

    @classmethod
    def from_bundle(
        cls,
        path: str | Path,
        *,
        context: ContextEngine | None = None,
        linker: Linker | None = None,
        **engine: Any,
    ) -> AnnotationPipeline:
        """The pipeline of a bundle; ``engine``: how it is served
        (:meth:`~mslm_core.inference.EntityExtractor.from_bundle`)."""
        return cls(EntityExtractor.from_bundle(path, **engine), context, linker)

    @property
    def id(self) -> str:
        return self.extractor.id

    @property
    def info(self) -> EngineInfo:
        return self.extractor.info

    @property
    def parallel_steps(self) -> int:
        """Steps a server may run at once (``api.serving.MicroBatcher``): two for ONNX Runtime
        on CPU, where a step's own Python (its plan, the entities' postprocessing) holds the
        interpreter while its runs wait, so a second batch's runs keep the cores busy
        meanwhile (32 clients: 287 and 301 against 277 and 276 texts/s, in turn);
        one elsewhere."""
        info = self.extractor.info if self.extractor is not None else None
        on_cpu = info is not None and info.provider == "CPUExecutionProvider"
        return 2 if on_cpu and info.backend == "onnx" else 1

    @property
    def batch_texts(self) -> int | None:
        """Texts a server's micro-batch gathers at most from several requests
        (``api.serving.MicroBatcher``; None: no bound but MSLM_MAX_BATCH_TEXTS). Where steps
        run side by side (:attr:`parallel_steps`), one step's windows: many clients of a
        sentence each then make several batches, and one batch's Python (its plan, its
        postprocessing, its answers) runs while another's windows do, where one batch of them
        all would leave the engine idle for its Python (benchmarks/api_load.py at 32
        clients: docs/settings.md, MSLM_MAX_BATCH_TEXTS)."""
        from .predict import AnnotationPlan

        return AnnotationPlan.STEP_WINDOWS if self.parallel_steps > 1 else None

    def linking(self, options: AnnotateOptions = DEFAULTS) -> dict[str, Any] | None:
        """What the concepts of an answer under ``options`` come from (None: no linking)."""
        linker = self.linker
        if linker is None or not options.linking:
            return None
        return {
            "name": linker.vocabulary.name,
            "concepts": len(linker.vocabulary),
            "calibrated": linker.calibration is not None,
        }

    def context_of(self, options: AnnotateOptions = DEFAULTS) -> dict[str, Any] | None:
        """The clinical context of an answer under ``options``: the conventions it followed
        (None: no context)."""
        engine = self._context_engine(options)
        return None if engine is None else {"profile": engine.profile}

    def _context_engine(self, options: AnnotateOptions) -> ContextEngine | None:
        if self.context is None or not options.context:
            return None
        if options.context_profile == "default":
            return self.context
        return self.context.with_profile(options.context_profile)

    def describe(self) -> dict[str, Any]:
        """The model as every answer names it: its id, what serves it, its types and the
        language it reads."""
        info = self.info
        return {
            "id": info.model_id,
            "backend": info.backend,
            "precision": info.precision,
            "provider": info.provider,
            "types": list(info.types),
            "language": self.language,
        }

    @property
    def language(self) -> str:
        """The language the model reads (ISO 639-1): its bundle's, else English (every corpus
        of the clinical recipe and the BLURB corpora are)."""
        return str(self.extractor.manifest.get("language") or "en")

    def other_languages(self, texts: Sequence[str]) -> list[Language | None]:
        """Per text, the language it is written in when that is surely not the model's."""
        return [other_language(t, self.language) for t in texts]

    # -- the options ------------------------------------------------------------------------
    def options(self, options: AnnotateOptions | None = None, **given: Any) -> AnnotateOptions:
        """``options`` (default: every default) with ``given`` over them, checked for this
        model: an :class:`OptionsError` names a bad field, a
        :class:`~mslm_core.errors.StyleError` a style the model does not read."""
        out = options or DEFAULTS
        if given:
            unknown = sorted(set(given) - set(ANNOTATE_OPTIONS))
            if unknown:
                raise OptionsError(
                    unknown[0], f"not an option (options: {', '.join(ANNOTATE_OPTIONS)})"
                )
            out = replace(out, **given)
        if out.style is not None:
            check_style(self.extractor.manifest, out.style)
        return out

    # -- the steps --------------------------------------------------------------------------
    def preprocess(self, texts: Sequence[str], options: Options = None) -> AnnotationPlan:
        """The plan of ``texts`` — its forward steps for a scheduler to run; its ``result()``
        is postprocessed (``options``: one for every text, or one per text, each checked by
        :meth:`options`) and equals ``self(texts, options)``."""
        per = _per_text(options, len(texts))
        after = partial(self.postprocess, options=per)
        return self.extractor.plan(texts, [o.style for o in per], after)

    def postprocess(
        self, texts: Sequence[str], entities: Sequence[Sequence[Entity]], options: Options = None
    ) -> list[list[Entity]]:
        """The decoded entities of ``texts`` → the note's layout (``mslm_core.layout``: no
        span across a line break, no list marker in one, no header as an entity) → a finding's
        degree apart from it ("severe" of "severe chest pain" a Severity,
        ``mslm_core.findings``) → a Dosage
        cut to its dose (``mslm_core.regimen``) → clinical shorthand
        (``mslm_core.shorthand.ShorthandFinder``) → vitals and lab values → thresholds →
        relations (each modifier's head, ``mslm_core.relations``, when the bundle has a
        scorer) → clinical context → concepts, each text under its options (one for all, or one per
        text), each step for the entity types it applies to (``mslm_core.clinical_types``:
        the clinical schema's Dosage gets neither)."""
        per = _per_text(options, len(texts))
        heads = [self.layout.headers(t) for t in texts]
        tidy = [self.layout.tidy(*x) for x in zip(texts, entities, heads, strict=True)]
        if self.findings:
            tidy = [
                findings_without_their_severity(t, es, self.severity)
                for t, es in zip(texts, tidy, strict=True)
            ]
            # what an imaging report finds, a procedure by its name, where the model missed it
            tidy = [
                procedures_by_name(t, imaging_findings(t, es, hs), hs)
                for t, es, hs in zip(texts, tidy, heads, strict=True)
            ]
        if self.doses:  # a Dosage is its dose: "25 mg PO BID" → "25 mg"
            parts = self.regimen_parts
            tidy = [regimen.doses(t, es, parts) for t, es in zip(texts, tidy, strict=True)]
            if self.drugs:  # "ondansetron 4 mg" where the model missed the drug
                tidy = [
                    regimen.drugs_before_doses(t, regimen.drugs_by_stem(t, es))
                    for t, es in zip(texts, tidy, strict=True)
                ]
            if parts:  # the rest of a drug's regimen on its line, where the model missed it
                kinds = ("Dosage", *parts)
                tidy = [regimen.chained(t, es, kinds) for t, es in zip(texts, tidy, strict=True)]
        if self.shorthand is not None:
            tidy = [self.shorthand.merged(*x) for x in zip(texts, tidy, heads, strict=True)]
        # "hives" read as a Test is a finding by name; "chest" + "pain": one finding
        if self.linker is not None and self.measures:
            names_a_finding: Callable[[str], bool] = partial(
                self.linker.names_a, entity_type="Problem"
            )
            if self.shorthand is not None:  # "abd pain" names what "abdominal pain" names
                names_a_finding = self.shorthand.spelled_out(names_a_finding)
            tidy = [
                problem_list_titles(
                    t,
                    findings_with_their_site(
                        t,
                        findings_cut_from_their_site(
                            t, findings_by_name(es, self.linker.names_a), names_a_finding
                        ),
                        names_a_finding,
                    ),
                    names_a_finding,
                )
                for t, es in zip(texts, tidy, strict=True)
            ]
        # vitals and lab values ("BP 168/94", "Cr 1.4"): a Test and its Result over the
        # model's reading; measured, so no context cue applies to the test
        measured: list[set[tuple[int, int]]] = [set() for _ in texts]
        if self.measures:
            for i, text in enumerate(texts):
                found = measurements.find(text)
                if found:
                    tidy[i] = measurements.merged(text, tidy[i], found)
                    measured[i] = {m.label for m in found}
                tidy[i] = measurements.without_thresholds(
                    text, measurements.without_lone_results(text, tidy[i])
                )
                tidy[i] = measurements.with_reference_values(
                    text, measurements.with_exam_shorthand(text, tidy[i])
                )
                tidy[i] = measurements.with_watched_tests(
                    text, measurements.without_diets(text, tidy[i])
                )
                tidy[i] = measurements.with_ordered_tests(text, tidy[i])
                tidy[i] = measurements.with_qualitative_results(
                    text,
                    measurements.with_imaging_sites(
                        text, measurements.without_words_of_no_entity(text, tidy[i])
                    ),
                )
        out = [thresholded(ents, o) for ents, o in zip(tidy, per, strict=True)]
        if self.relations is not None:  # after the thresholds: a head is a returned entity
            out = [self.relations.attach(t, es) for t, es in zip(texts, out, strict=True)]
        if self.context is not None:
            engines = [self._context_engine(o) for o in per]
            for engine in {id(e): e for e in engines if e is not None}.values():
                under = [e is engine for e in engines]  # the texts under this profile
                out = _where(partial(_in_context, engine), texts, out, under)
            out = [
                [_measured(e) if (e.start, e.end) in spans and e.type == "Test" else e for e in es]
                for es, spans in zip(out, measured, strict=True)
            ]
            out = [_with_their_heads(es) for es in out]
        linker = self.linker
        if linker is not None:
            link = partial(_for_types, linker.apply_all, applies=linked)
            out = _where(link, texts, out, [o.linking for o in per])
        return out

    def render(
        self,
        texts: Sequence[str],
        entities: Sequence[Sequence[Entity]],
        options: AnnotateOptions = DEFAULTS,
        ids: Sequence[str] | None = None,
    ) -> Rendered:
        """The response of ``texts`` and their entities in ``options.format``; ``ids`` name
        the texts in BioC and PubTator (default: their indices)."""
        fmt = options.format

        def service() -> dict[str, Any]:
            return {
                "model": self.describe(),
                "linking": self.linking(options),
                "context": self.context_of(options),
                "languages": self.other_languages(texts),
            }

        body = render_predictions(
            fmt, texts, entities, self.id, options.from_name, options.to_name, ids, service
        )
        return Rendered(body, media_type(fmt))

    def __call__(self, texts: Sequence[str], options: Options = None) -> list[list[Entity]]:
        """Entities per text, in text order (``text[start:end] == entity.text``): the forward
        pass in one go, then :meth:`postprocess`."""
        check_texts(texts)
        per = _per_text(options, len(texts))
        entities = self.extractor.predictor.annotate(texts, [o.style for o in per])
        return self.postprocess(texts, entities, per)

    def annotate_with_uncertainty(
        self, texts: Sequence[str], strategy: str, options: AnnotateOptions = DEFAULTS
    ) -> tuple[list[list[Entity]], list[float]]:
        """``self(texts, options)`` and each text's uncertainty under ``strategy``
        (:func:`mslm_core.active.uncertainties`), both from one prediction pass (read in the
        model's own style)."""
        check_texts(texts)
        check_strategy(strategy)
        predictor = self.extractor.predictor
        entities, raw, groups = predictor.annotate_with_raw(texts)
        scores = raw_uncertainties(raw, groups, len(texts), strategy, predictor.temperatures)
        return self.postprocess(texts, entities, options), scores


def _per_text(options: Options, n: int) -> list[AnnotateOptions]:
    if options is None:
        return [DEFAULTS] * n
    if isinstance(options, AnnotateOptions):
        return [options] * n
    if len(options) != n:
        raise ValueError(f"{len(options)} options for {n} texts")
    return list(options)


Step = Callable[[Sequence[str], list[list[Entity]]], list[list[Entity]]]


def _in_context(
    engine: ContextEngine, texts: Sequence[str], entities: list[list[Entity]]
) -> list[list[Entity]]:
    """The clinical context of each entity under ``engine``: its section, then ConText."""
    found = engine.sectioned_all(texts, entities)  # every entity: its section
    found = _for_types(engine.apply_all, texts, found, context_applies)
    return [[_attributes_of_its_type(e) for e in es] for es in found]


def _where(
    step: Step, texts: Sequence[str], entities: list[list[Entity]], on: Sequence[bool]
) -> list[list[Entity]]:
    """``step`` over the texts it is ``on`` for, in one call; the others' entities unchanged."""
    chosen = [i for i, yes in enumerate(on) if yes]
    if len(chosen) == len(texts):
        return step(texts, entities)
    out = list(entities)
    if chosen:
        done = step([texts[i] for i in chosen], [entities[i] for i in chosen])
        for i, ents in zip(chosen, done, strict=True):
            out[i] = ents
    return out


def _for_types(
    step: Step,
    texts: Sequence[str],
    entities: list[list[Entity]],
    applies: Callable[[str], bool],
) -> list[list[Entity]]:
    """``step`` run on the entities whose type it ``applies`` to; the others pass unchanged,
    every text's entities in their order."""
    if all(applies(e.type) for ents in entities for e in ents):
        return step(texts, entities)
    chosen = [[e for e in ents if applies(e.type)] for ents in entities]
    done = [iter(ents) for ents in step(texts, chosen)]
    return [
        [next(done[i]) if applies(e.type) else e for e in ents] for i, ents in enumerate(entities)
    ]


def _measured(e: Entity) -> Entity:
    """A measured test (a vital sign, a lab value): taken, so present whatever cue is near."""
    if e.assertion is None:
        return e
    return replace(e, assertion=Assertion())


def _with_their_heads(entities: list[Entity]) -> list[Entity]:
    """Each modifier tied to a head with the head's assertion: in "no aspirin 81 mg" the dose
    is negated with its drug, a value is its test's, a site and a severity their finding's."""
    by_span = {(e.start, e.end): e for e in entities}
    out = []
    for e in entities:
        head = by_span.get((e.head.start, e.head.end)) if e.head is not None else None
        if head is not None and head.assertion is not None:
            e = replace(e, assertion=head.assertion)
        out.append(e)
    return out


def _attributes_of_its_type(e: Entity) -> Entity:
    """The entity with the assertion attributes its type carries only (a Drug: allergy)."""
    if e.assertion is None:
        return e
    return replace(e, assertion=e.assertion.only(context_attributes(e.type)))
