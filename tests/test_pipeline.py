"""The annotation pipeline (mslm_core.pipeline): its options, the order of its steps, and one
behaviour for the route, the annotation worker and the command — the same entities, context,
concepts and model for the same texts and options."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import (
    ANNOTATE,
    JOB,
    TRAIN,
    auth,
    make_settings,
    serve_model_of,
    upload_notes,
    upload_toy,
)

from api.main import create_app
from mslm_core import cli
from mslm_core.context import ContextEngine, default_rules
from mslm_core.errors import ConfigError
from mslm_core.linking import Linker, read_vocabulary
from mslm_core.pipeline import (
    ANNOTATE_OPTIONS,
    JOB_OPTIONS,
    AnnotateOptions,
    AnnotationPipeline,
    OptionsError,
    thresholded,
)
from mslm_core.types import Entity
from store.db import session_factory
from store.models import find_model
from store.serving import active_model_id
from worker import bulk as runner
from worker.runner import run_training_job


# -- the options ------------------------------------------------------------------------------
def test_thresholds_keep_what_reaches_the_global_and_its_type_s_threshold():
    ents = [
        Entity(0, 1, "a", "Drug", 0.9, 0.9, 1.0),
        Entity(2, 3, "b", "Problem", 0.6, 0.6, 1.0),
        Entity(4, 5, "c", "Drug", 0.4, 0.4, 1.0),
    ]
    assert thresholded(ents) == ents
    assert [e.text for e in thresholded(ents, AnnotateOptions(min_confidence=0.5))] == ["a", "b"]
    per = AnnotateOptions(min_confidence=0.5, min_confidence_per_type={"Problem": 0.7})
    assert [e.text for e in thresholded(ents, per)] == ["a"]
    drop = AnnotateOptions(min_confidence_per_type={"Drug": 1.01})  # above 1: the type goes
    assert [e.text for e in thresholded(ents, drop)] == ["b"]


@pytest.mark.parametrize(
    ("given", "field", "says"),
    [
        ({"min_confidence": 1.5}, "min_confidence", "must be in [0, 1], got 1.5"),
        ({"min_confidence": float("nan")}, "min_confidence", "must be finite"),
        ({"min_confidence": "0.5"}, "min_confidence", "must be a number"),
        ({"min_confidence_per_type": {"Drug": -1}}, "min_confidence_per_type.Drug", "at least 0"),
        ({"min_confidence_per_type": [1]}, "min_confidence_per_type", "must map entity types"),
        ({"context": "yes"}, "context", "must be true or false"),
        ({"format": "xml"}, "format", "must be one of json, labelstudio, bioc, pubtator"),
        ({"style": 3}, "style", "must be a string"),
    ],
)
def test_a_bad_option_is_refused_naming_its_field(given, field, says):
    with pytest.raises(OptionsError, match=r"^\[E002\] " + field.replace(".", r"\.")) as caught:
        AnnotateOptions(**given)
    assert caught.value.field == field and says in str(caught.value)
    assert isinstance(caught.value, ConfigError)  # the command's exit 2, the API's 422


def test_a_job_stores_its_options_and_reads_them_back():
    options = AnnotateOptions(style="", min_confidence=0.2, linking=False)
    params = options.params()
    assert (
        set(params)
        == set(JOB_OPTIONS)
        == set(ANNOTATE_OPTIONS)
        - {
            "format",
            "from_name",
            "to_name",
        }
    )
    assert AnnotateOptions.from_params({**params, "max_text_chars": 10}) == options
    assert AnnotateOptions.from_params({}) == AnnotateOptions()  # a job from before: defaults


# -- the steps --------------------------------------------------------------------------------
class Spy:
    """Records the entities a step is given, and gives them back unchanged."""

    def __init__(self):
        self.seen: list[str] = []

    def apply_all(self, texts, entities):
        self.seen += [e.text for ents in entities for e in ents]
        return [list(e) for e in entities]


def test_a_dropped_entity_costs_no_context_and_no_linking():
    text = "No fever, aspirin given."
    ents = [
        Entity(3, 8, "fever", "Problem", 0.9, 0.9, 1.0),
        Entity(10, 17, "aspirin", "Drug", 0.3, 0.3, 1.0),
    ]
    engine, linker = ContextEngine(default_rules()), Spy()
    pipeline = AnnotationPipeline(None, engine, linker)  # type: ignore[arg-type]
    calls: list[str] = []
    apply_all = engine.apply_all
    engine.apply_all = lambda t, e: calls.extend(x.text for es in e for x in es) or apply_all(t, e)
    (found,) = pipeline.postprocess([text], [ents], AnnotateOptions(min_confidence=0.5))
    assert [e.text for e in found] == ["fever"] and found[0].assertion.negated
    assert calls == ["fever"] and linker.seen == ["fever"]  # aspirin never reached them


def test_each_text_is_postprocessed_under_its_own_options(tmp_path):
    vocabulary = tmp_path / "v.tsv"
    vocabulary.write_text("D1\tfever\n", "utf-8")
    linker = Linker(read_vocabulary(vocabulary), threshold=0.5)
    pipeline = AnnotationPipeline(None, ContextEngine(default_rules()), linker)  # type: ignore[arg-type]
    texts = ["No fever.", "No fever.", "No fever."]
    ents = [[Entity(3, 8, "fever", "Problem", 0.9, 0.9, 1.0)] for _ in texts]
    options = [AnnotateOptions(), AnnotateOptions(context=False), AnnotateOptions(linking=False)]
    a, b, c = (found for (found,) in pipeline.postprocess(texts, ents, options))
    assert a.assertion.negated and a.concept.id == "D1"
    assert b.assertion is None and b.section is None and b.concept.id == "D1"
    assert c.assertion.negated and c.candidates is None and "concept" not in c.to_dict()
    with pytest.raises(ValueError, match="2 options for 3 texts"):
        pipeline.postprocess(texts, ents, options[:2])


def test_each_text_s_context_follows_the_profile_it_names_and_the_answer_says_which():
    """``context_profile``: "rule out" makes a finding hypothetical under omop (the
    deployment's default here) and leaves it affirmed under context (ConText's convention);
    texts of one call may name different profiles, and the JSON answer says which it
    followed (null with the context off)."""
    text = "CT to rule out pneumonia; no fever."
    a, b = text.index("pneumonia"), text.index("fever")
    ents = [
        Entity(a, a + 9, "pneumonia", "Problem", 0.9, 0.9, 1.0),
        Entity(b, b + 5, "fever", "Problem", 0.9, 0.9, 1.0),
    ]
    pipeline = AnnotationPipeline(None, ContextEngine.default(), None)  # type: ignore[arg-type]
    options = [
        AnnotateOptions(),
        AnnotateOptions(context_profile="context"),
        AnnotateOptions(context_profile="omop"),
    ]
    found = pipeline.postprocess([text] * 3, [ents] * 3, options)
    hypothetical = [[e.assertion.hypothetical for e in es] for es in found]
    negated = [[e.assertion.negated for e in es] for es in found]
    assert hypothetical == [[True, False], [False, False], [True, False]]
    assert negated == [[False, True]] * 3  # the rest of the rules alike
    assert [pipeline.context_of(o) for o in options] == [
        {"profile": "omop"},
        {"profile": "context"},
        {"profile": "omop"},
    ]
    assert pipeline.context_of(AnnotateOptions(context=False)) is None
    under_context = ContextEngine.configured(profile="context")
    deployment = AnnotationPipeline(None, under_context, None)  # type: ignore[arg-type]
    (default,) = deployment.postprocess([text], [ents], AnnotateOptions())
    assert not default[0].assertion.hypothetical  # "default": the deployment's profile
    assert deployment.context_of(AnnotateOptions()) == {"profile": "context"}
    with pytest.raises(OptionsError, match="context_profile"):
        AnnotateOptions(context_profile="negex")


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_encoder):
    """An install with one trained, exported, active model, linking to a small vocabulary."""
    tmp = tmp_path_factory.mktemp("pipeline")
    vocabulary = tmp / "vocabulary.tsv"
    vocabulary.write_text(
        "D1\trenal failure\trenal insufficiency\nD2\tcisplatin\nD3\tcancer\tbreast cancer\n",
        encoding="utf-8",
    )
    settings = make_settings(tmp, tiny_encoder, vocabulary=vocabulary)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp / "corpus")
        job = c.post(
            "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB}
        ).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        serve_model_of(c, job["id"])
    return settings, vocabulary


TEXTS = [
    "Cisplatin caused renal failure in the patient .",
    "No renal failure after cisplatin .",
    "Family history of breast cancer ; aspirin reduces fever .",
    "",
    "The patient is well .",
]
OPTIONS = {"min_confidence": 0.05, "min_confidence_per_type": {"Chemical": 0.1}}


def _same(got: list[list[dict]], want: list[list[dict]]) -> None:
    """The same entities (spans, types, context, concepts); scores equal up to float noise
    (a micro-batch pads its windows otherwise than one call)."""
    scores = ("confidence", "detection_score", "type_score")

    def strip(results: list[list[dict]]) -> list[list[dict]]:
        return [[{k: v for k, v in e.items() if k not in scores} for e in r] for r in results]

    def flat(results: list[list[dict]]) -> list[float]:
        return [e[k] for r in results for e in r for k in scores]

    assert strip(got) == strip(want)
    assert np.allclose(flat(got), flat(want), atol=1e-5)


def test_the_route_the_worker_and_the_command_give_the_same_answer(served, tmp_path, capsys):
    settings, vocabulary = served
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": TEXTS, **OPTIONS})
        assert r.status_code == 200, r.text
        route = r.json()
        notes = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS))
        given = upload_notes(c, "notes.jsonl", notes.encode())
        job = c.post(
            "/v1/annotation-jobs",
            headers=auth(ANNOTATE),
            json={"source": {"kind": "file", "input": given["id"]}, **OPTIONS},
        ).json()
        published: list[tuple[str, int]] = []
        assert runner.run_plan(job["id"], settings, lambda j, s: published.append((j, s)))
        for _, seq in published:
            assert runner.run_chunk(job["id"], seq, settings) == "done"
        out = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
        assert out.status_code == 200, out.text
    by_note = {int(line["id"]): line["entities"] for line in map(json.loads, out.text.splitlines())}
    worker = [by_note.get(i, []) for i in range(len(TEXTS))]
    factory = session_factory(settings.sqlalchemy_url)
    with factory() as session:
        path = settings.artifacts / find_model(session, active_model_id(session)).path
    flags = ["--min-confidence", "0.05", "--min-confidence-per-type", "Chemical=0.1"]
    argv = ["annotate", "--model", str(path), "--vocabulary", str(vocabulary), *flags]
    assert cli.main([*argv, *TEXTS]) == 0
    command = json.loads(capsys.readouterr().out)
    results = [[e for e in r["entities"]] for r in route["results"]]
    assert sum(map(len, results)) >= 4  # entities of several types, some with a concept
    assert any("concept" in e and e["concept"] for r in results for e in r)
    assert any(e["assertion"]["negated"] for r in results for e in r if "assertion" in e)
    _same(worker, results)
    _same([r["entities"] for r in command["results"]], results)
    assert command["model"] == route["model"]  # one description of the model
    linked = {"name": "vocabulary", "concepts": 3, "calibrated": True}
    assert command["linking"] == route["linking"] == linked  # and of what it linked to
    # and the thresholds were applied by all three: nothing below them came back
    assert all(e["confidence"] >= 0.05 for r in results for e in r)
    assert all(e["confidence"] >= 0.1 for r in results for e in r if e["type"] == "Chemical")


def test_the_command_and_the_service_link_and_annotate_by_the_same_defaults():
    """What the command does unasked is what the service does: the same options (one
    declaration), context on, linking on with the packaged MeSH vocabulary, the linker's
    threshold and candidates."""
    from mslm_core.linking import builtin
    from mslm_settings import Settings

    args = cli.build_parser().parse_args(["annotate", "--model", "m", "text"])
    assert cli._annotate_options(args) == AnnotateOptions()
    assert args.vocabulary == "mesh" and args.context_rules is None
    fields = Settings.model_fields
    assert fields["vocabulary"].default == "mesh" and fields["context"].default is True
    assert fields["link_threshold"].default == builtin.LINK_THRESHOLD
    assert fields["link_candidates"].default == builtin.LINK_CANDIDATES


def test_every_option_is_a_flag_of_the_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["annotate", "--help"])
    shown = capsys.readouterr().out
    for name in ANNOTATE_OPTIONS:
        default = AnnotateOptions.__dataclass_fields__[name].default
        flag = ("--no-" if default is True else "--") + name.replace("_", "-")
        assert flag in shown, flag
    args = cli.build_parser().parse_args(
        ["annotate", "--model", "m", "--no-linking", "--min-confidence-per-type", "Drug=0.7"]
    )
    assert cli._annotate_options(args) == AnnotateOptions(
        linking=False, min_confidence_per_type={"Drug": 0.7}
    )
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(
            ["annotate", "--model", "m", "--min-confidence-per-type", "0.7"]
        )
    assert "give TYPE=VALUE" in capsys.readouterr().err


def test_the_deployment_setting_offers_exactly_the_context_profiles():
    """MSLM_CONTEXT_PROFILE's choices are the engine's profiles (mslm_core.context.PROFILES):
    a profile added to one and not the other fails here, not in a deployment."""
    import typing

    from mslm_core.context import PROFILES
    from mslm_settings import Settings

    annotation = Settings.model_fields["context_profile"].annotation
    assert set(typing.get_args(annotation)) == set(PROFILES)
    assert Settings.model_fields["context_profile"].default in PROFILES
