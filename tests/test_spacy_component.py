"""The spaCy component (issue 61): ``nlp.add_pipe("mslm")`` with the real spaCy, found by its
entry point, setting ``doc.ents`` and medspaCy's attribute names beside other components."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

spacy = pytest.importorskip("spacy")

TEXT = "No sign of diabetes or cancer today . History of cisplatin ."


@pytest.fixture(scope="module")
def model(toy_bundle, tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("spacy") / "toy"
    shutil.copytree(toy_bundle, copy)
    return copy


@pytest.fixture(scope="module")
def service(model):
    """What the service's pipeline finds in TEXT, with its clinical context."""
    from mslm_core.context import ContextEngine, rules_for
    from mslm_core.pipeline import AnnotateOptions, AnnotationPipeline

    pipeline = AnnotationPipeline.from_bundle(
        model, context=ContextEngine(rules_for(None)), backend="torch"
    )
    (entities,) = pipeline([TEXT], pipeline.options(AnnotateOptions(linking=False)))
    assert entities, "the toy model finds nothing: the tests below would prove nothing"
    return entities


def _fresh(code: str, *args: str) -> Any:
    """What ``code`` prints last (JSON), run in a fresh interpreter with ``args``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LOGURU_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_factory_is_found_by_its_entry_point_alone(model):
    """A fresh interpreter that never imports mslm_core: spaCy finds "mslm" itself."""
    code = (
        "import json, spacy, sys\n"
        "nlp = spacy.blank('en')\n"
        "nlp.add_pipe('mslm', config={'model': sys.argv[1], 'backend': 'torch'})\n"
        "doc = nlp(sys.argv[2])\n"
        "print(json.dumps([[e.text, e.label_] for e in doc.ents]))\n"
    )
    assert _fresh(code, str(model), TEXT)


def test_doc_ents_and_medspacy_attributes_are_the_service_s(model, service):
    nlp = spacy.blank("en")
    nlp.add_pipe("mslm", config={"model": str(model), "backend": "torch"})
    doc = nlp(TEXT)
    got = [(e.start_char, e.end_char, e.label_) for e in doc.ents]
    assert got == [(e.start, e.end, e.type) for e in service]
    for span, e in zip(doc.ents, service, strict=True):
        assert e.assertion is not None
        assert span._.is_negated == e.assertion.negated
        assert span._.is_historical == e.assertion.historical
        assert span._.is_uncertain == e.assertion.possible
        assert span._.is_family == e.assertion.family
        assert span._.confidence == e.confidence
        assert span._.mslm == e.to_dict()
        assert span._.concept is None  # linking off by default
    negated = {e.text for e in doc.ents if e._.is_negated}
    assert negated == {e.text for e in service if e.assertion and e.assertion.negated}
    assert negated  # "No sign of diabetes or cancer"


def test_it_runs_beside_other_components_and_keeps_their_entities(model):
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "WHEN", "pattern": "today"}])
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("mslm", config={"model": str(model), "backend": "torch", "batch_size": 2})
    docs = list(nlp.pipe([TEXT, "cancer .", "Nothing here .", TEXT]))
    assert [e.label_ for e in docs[0].ents if e.text == "today"] == ["WHEN"]
    assert [(e.text, e.label_) for e in docs[0].ents] == [(e.text, e.label_) for e in docs[3].ents]
    assert any(e.label_ != "WHEN" for e in docs[0].ents)


def test_an_attribute_another_library_registered_keeps_its_registration(model):
    """medspaCy's ConText registers ``is_negated`` on Span itself: ours does not fight it."""
    from spacy.tokens import Span

    if not Span.has_extension("is_negated"):
        Span.set_extension("is_negated", default=False)
    nlp = spacy.blank("en")
    nlp.add_pipe("mslm", config={"model": str(model), "backend": "torch"})
    doc = nlp(TEXT)
    assert any(e._.is_negated for e in doc.ents)


def test_a_missing_model_says_how_to_give_one():
    from mslm_core.errors import ConfigError

    nlp = spacy.blank("en")
    with pytest.raises(ConfigError, match='config=\\{"model": "<bundle folder>"\\}'):
        nlp.add_pipe("mslm")


MEDSPACY = """
import json, sys
import medspacy
from medspacy.target_matcher import TargetRule

context = sys.argv[3] == "ours"
nlp = medspacy.load()  # PyRuSH's sentences, medspaCy's target matcher and its ConText
nlp.get_pipe("medspacy_target_matcher").add([TargetRule("today", "WHEN")])
config = {"model": sys.argv[1], "backend": "torch", "context": context}
nlp.add_pipe("mslm", before=None if context else "medspacy_context", config=config)
doc = nlp(sys.argv[2])
print(json.dumps({
    "pipes": nlp.pipe_names,
    "sentences": [s.end_char for s in doc.sents],
    "ents": [[e.start_char, e.end_char, e.label_, e._.is_negated, e._.is_historical]
             for e in doc.ents],
}))
"""


def _beside_medspacy(model: Path, context: str) -> dict:
    """TEXT through medspaCy's pipeline with ours added, in a fresh interpreter (medspaCy
    registers its attributes for the whole process)."""
    pytest.importorskip("medspacy", reason="scripts/setup.sh installs medspaCy")
    return dict(_fresh(MEDSPACY, str(model), TEXT, context))


def test_beside_medspacy_its_context_reads_our_entities(model, service):
    """medspaCy's pipeline (its sentences, target matcher and ConText) with our entities put
    in before its ConText: medspaCy's entity is kept, ours are the service's, and medspaCy's
    ConText judges ours — "No sign of …" negates the first sentence's, "History of …" makes
    the second's historical."""
    out = _beside_medspacy(model, "medspacy")
    assert out["pipes"][-2:] == ["mslm", "medspacy_context"]
    ents = out["ents"]
    assert [e[:3] for e in ents if e[2] == "WHEN"] == [
        [TEXT.index("today"), TEXT.index("today") + 5, "WHEN"]
    ]
    ours = [e for e in ents if e[2] != "WHEN"]
    assert [tuple(e[:3]) for e in ours] == [(e.start, e.end, e.type) for e in service]
    first = out["sentences"][0]
    after_no = [e for e in ours if 2 < e[0] < first]
    after_history = [e for e in ours if e[0] > TEXT.index("History of") + 10]
    assert after_no and after_history, "the toy model finds too little for medspaCy to judge"
    assert all(e[3] for e in after_no)
    assert all(e[4] and not e[3] for e in after_history)


def test_beside_medspacy_with_our_context(model, service):
    """Our context instead of medspaCy's for our entities: the attributes medspaCy's ConText
    registered carry the service's verdicts."""
    out = _beside_medspacy(model, "ours")
    ours = [e for e in out["ents"] if e[2] != "WHEN"]
    assert [(*e[:3], e[3], e[4]) for e in ours] == [
        (e.start, e.end, e.type, e.assertion.negated, e.assertion.historical)
        for e in service
        if e.assertion is not None
    ]
