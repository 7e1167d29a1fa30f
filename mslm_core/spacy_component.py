"""The annotation pipeline as a spaCy component, beside medspaCy's and scispaCy's own.

``pip install mslm`` registers the factory (the ``spacy_factories`` entry point), so that::

    nlp = spacy.blank("en")  # or medspaCy's, scispaCy's, a site's pipeline
    nlp.add_pipe("mslm", config={"model": "/models/clinical"})
    doc = nlp("No fever. History of diabetes.")
    [(e.text, e.label_, e._.is_negated, e._.is_historical) for e in doc.ents]

Each of the model's entities becomes a span of ``doc.ents`` (merged with the entities already
there, the longer span kept where two overlap; a span that does not fall on token boundaries
takes the tokens it touches), labelled with its type, with the service's clinical context and
concept. On each span: medspaCy's attribute names — ``is_negated``, ``is_uncertain`` (our
``possible``), ``is_historical``, ``is_hypothetical``, ``is_family`` — and ``is_allergy``,
``section_category`` (medspaCy's name for the section), ``concept`` (the linked concept as a
dict, or None), ``confidence`` and ``mslm`` (the entity as the REST API returns it). An
attribute medspaCy registered first keeps its registration; the component sets its value on
the spans it makes. Nothing here is imported unless spaCy asks for the factory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from .pipeline import AnnotateOptions, AnnotationPipeline
from .types import Entity

#: medspaCy's ConText attribute → ours.
MEDSPACY_ATTRIBUTES = {
    "is_negated": "negated",
    "is_uncertain": "possible",
    "is_historical": "historical",
    "is_hypothetical": "hypothetical",
    "is_family": "family",
    "is_allergy": "allergy",
}
SPAN_ATTRIBUTES = (*MEDSPACY_ATTRIBUTES, "section_category", "concept", "confidence", "mslm")


def _register() -> None:
    for name in SPAN_ATTRIBUTES:
        if not Span.has_extension(name):
            Span.set_extension(name, default=False if name.startswith("is_") else None)


class MSLMComponent:
    """Entities of one model (a bundle), with clinical context and, when asked, concepts."""

    def __init__(self, pipeline: AnnotationPipeline, options: AnnotateOptions, batch_size: int):
        _register()
        self.pipeline = pipeline
        self.options = pipeline.options(options)
        self.batch_size = batch_size

    def __call__(self, doc: Doc) -> Doc:
        (entities,) = self.pipeline([doc.text], self.options)
        return self._set(doc, entities)

    def pipe(self, stream: Iterable[Doc], batch_size: int | None = None) -> Iterator[Doc]:
        """Documents a batch at a time: one pass of the model per batch."""
        size = batch_size or self.batch_size
        batch: list[Doc] = []
        for doc in stream:
            batch.append(doc)
            if len(batch) == size:
                yield from self._batch(batch)
                batch = []
        yield from self._batch(batch)

    def _batch(self, docs: list[Doc]) -> Iterator[Doc]:
        if not docs:
            return
        found = self.pipeline([d.text for d in docs], self.options)
        for doc, entities in zip(docs, found, strict=True):
            yield self._set(doc, entities)

    def _set(self, doc: Doc, entities: list[Entity]) -> Doc:
        spans = []
        for e in entities:
            span = doc.char_span(e.start, e.end, label=e.type, alignment_mode="expand")
            if span is None:  # only whitespace under it
                continue
            a = e.assertion
            for name, ours in MEDSPACY_ATTRIBUTES.items():
                span._.set(name, bool(a is not None and getattr(a, ours)))
            as_json = e.to_dict()
            span._.set("section_category", e.section)
            span._.set("concept", as_json.get("concept"))
            span._.set("confidence", e.confidence)
            span._.set("mslm", as_json)
            spans.append(span)
        doc.ents = filter_spans([*doc.ents, *spans])
        return doc


@Language.factory(
    "mslm",
    default_config={
        "model": None,
        "min_confidence": None,
        "context": True,
        "linking": False,
        "vocabulary": "mesh",
        "style": None,
        "backend": "auto",
        "batch_size": 32,
    },
)
def make_mslm(
    nlp: Language,
    name: str,
    model: str | None,
    min_confidence: float | None,
    context: bool,
    linking: bool,
    vocabulary: str,
    style: str | None,
    backend: str,
    batch_size: int,
) -> MSLMComponent:
    """``model``: a bundle folder (``mslm train`` or ``mslm export``'s); ``min_confidence``:
    the service's default when None; ``context``: ConText assertions and sections;
    ``linking``: concepts from ``vocabulary`` (``mesh``, the packaged MeSH, or a TSV/OBO
    file); ``style``: a source-styles model's style; ``backend``: ``auto`` (ONNX when the
    bundle has it), ``onnx`` or ``torch``."""
    from .errors import ConfigError

    if not model:
        raise ConfigError(f'the "{name}" component needs config={{"model": "<bundle folder>"}}')
    engine = None
    if context:
        from .context import ContextEngine, rules_for

        engine = ContextEngine(rules_for(None, "extend"))
    linker = None
    if linking:
        from .linking import builtin

        mesh = vocabulary.lower() == "mesh"
        linker = builtin.load_linker(
            builtin.DEFAULT_VOCABULARY if mesh else vocabulary, cache=builtin.user_cache()
        )
    pipeline = AnnotationPipeline.from_bundle(
        model, context=engine, linker=linker, backend=backend, style=style
    )
    given: dict[str, Any] = {"context": context, "linking": linking, "style": style}
    if min_confidence is not None:
        given["min_confidence"] = min_confidence
    return MSLMComponent(pipeline, AnnotateOptions(**given), batch_size)
