"""The Label Studio ML backend (issue 33 part 1): the labelling config, annotations and the
task order (``mslm_core.labelstudio_ml``), and ``/labelstudio`` in-process with a tiny
trained model — setup, predict, the webhook's events growing the project's dataset and
starting a job every N annotations, whose model is then served. The same against a real
Label Studio server: ``test_labelstudio_live.py``."""

from __future__ import annotations

import base64

import pytest
from fastapi.testclient import TestClient
from service_helpers import (
    ADMIN,
    ANNOTATE,
    JOB,
    KEYS,
    TRAIN,
    auth,
    make_settings,
    serve_model_of,
    upload_toy,
)

from api.main import create_app
from mslm_core.active import Suggestion, rank
from mslm_core.errors import ConfigError
from mslm_core.labelstudio_ml import (
    LabelConfig,
    annotation_entities,
    order_scores,
    parse_label_config,
    type_map,
)
from store.datasets import current_documents
from store.db import session_factory
from store.tables import Dataset, Job
from worker.runner import run_training_job

CONFIG = """<View>
  <Labels name="label" toName="text">
    <Label value="disease" background="red"/><Label value="Symptom"/>
  </Labels>
  <Text name="text" value="$note"/>
</View>"""
LS_KEY = "labelstudio-key-0123456789abcdef"  # annotate + train, as the docs ask
LS_ADMIN = "labelstudio-admin-key-0123456789ab"  # a project whose models are served
TRAINING = {k: v for k, v in JOB.items() if k != "epochs"} | {"epochs": 2}


def basic(key: str, user: str = "labelstudio") -> dict[str, str]:
    token = base64.b64encode(f"{user}:{key}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


# -- the library's part -------------------------------------------------------------------------
def test_the_label_config_names_the_labels_control_and_the_text_field():
    config = parse_label_config(CONFIG)
    assert config == LabelConfig("label", "text", "note", ("disease", "Symptom"))


@pytest.mark.parametrize(
    ("xml", "says"),
    [
        ("", "empty"),
        ("<View><Text name='t' value='$x'/>", "not XML"),
        ("<View><Choices name='c' toName='t'/><Text name='t' value='$x'/></View>", "no <Labels"),
        ("<View><Labels name='l' toName='t'/><Text name='t' value='$x'/></View>", "no <Label>"),
        (
            "<View><Labels name='l' toName='t'><Label value='A'/></Labels>"
            "<Text name='t' value='x'/></View>",
            "value='$field'",
        ),
    ],
)
def test_a_config_this_backend_cannot_fill_is_refused_saying_why(xml, says):
    with pytest.raises(ConfigError, match=says.replace("$", r"\$")):
        parse_label_config(xml)


def test_an_annotation_keeps_the_projects_labelled_spans_only():
    config = parse_label_config(CONFIG)
    text = "Fever and breast cancer."

    def region(start, end, label, **kw):
        value = {"start": start, "end": end, "text": text[start:end], "labels": [label]}
        return {"from_name": "label", "to_name": "text", "type": "labels", "value": value} | kw

    result = [
        region(10, 23, "disease"),
        region(0, 5, "Symptom"),
        region(0, 5, "Symptom"),  # twice: once
        region(0, 5, "Unknown"),
        region(0, 5, "Symptom", from_name="other"),
        region(20, 99, "disease"),  # outside the text
        {"type": "choices", "value": {"choices": ["x"]}, "from_name": "label"},
    ]
    assert annotation_entities(text, result, config) == [(0, 5, "Symptom"), (10, 23, "disease")]


def test_the_models_types_map_onto_the_projects_spelling():
    assert type_map(["Disease", "Chemical"], ["disease", "Symptom"]) == {"Disease": "disease"}


def test_the_scores_sort_lowest_first_in_the_ranked_order():
    ranking = [Suggestion(2, 0.4, 0.8), Suggestion(0, 0.1, 0.3), Suggestion(1, 0.1, 0.2)]
    scores = order_scores(ranking, 3, 0.5)
    assert sorted(range(3), key=lambda i: scores[i]) == [2, 0, 1]  # ties still ordered
    assert all(0.0 <= s <= 1.0 for s in scores)
    lone = order_scores([Suggestion(0, 0.5 * 0.8, 0.8)], 1, 0.5)[0]
    assert lone == pytest.approx(0.5 * (1 - 0.8))  # (1 − diversity) × (1 − uncertainty)


# -- the routes ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def service(tmp_path_factory, tiny_encoder):
    """An install with one trained, active model and a key for Label Studio."""
    tmp = tmp_path_factory.mktemp("ls")
    settings = make_settings(
        tmp, tiny_encoder, api_keys=f"{KEYS},{LS_KEY}:annotate+train,{LS_ADMIN}:admin"
    )
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp / "corpus")
        job = c.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB})
        assert run_training_job(job.json()["id"], settings) == "succeeded"
        serve_model_of(c, job.json()["id"])
    return settings


@pytest.fixture()
def client(service):
    with TestClient(create_app(service)) as c:
        yield c


def _setup(client, project="7.1764000000", key=LS_KEY, **extra):
    body = {"project": project, "schema": CONFIG, "hostname": "http://ls", "access_token": "x"}
    if extra:
        body["extra_params"] = extra
    return client.post("/labelstudio/setup", headers=basic(key), json=body)


def test_keys_come_the_way_label_studio_sends_them(client):
    assert client.get("/labelstudio/health").status_code == 401
    assert (
        client.get("/labelstudio/health", headers=basic("not-a-key-at-all-xx")).status_code == 401
    )
    client.app.state.mslm.throttle.reset()
    for headers in (basic(LS_KEY), auth(LS_KEY), {"Authorization": f"Token {LS_KEY}"}):
        health = client.get("/labelstudio/health", headers=headers)
        assert health.status_code == 200 and health.json()["status"] == "UP"
    # both scopes: an annotate key and a train key alone are refused, before any body is read
    for key in (ANNOTATE, TRAIN):
        refused = client.post("/labelstudio/setup", headers=basic(key), content=b"{")
        assert refused.status_code == 403
        assert refused.headers["content-type"] == "application/problem+json"
    assert client.get("/labelstudio/health", headers=basic(ADMIN)).status_code == 200
    # Token is Label Studio's scheme: only here
    assert client.get("/v1/jobs", headers={"Authorization": f"Token {LS_KEY}"}).status_code == 401


def test_setup_reads_the_config_and_refuses_a_bad_one(client):
    response = _setup(client)
    assert response.status_code == 200, response.text
    active = client.get("/v1/models", headers=auth(ANNOTATE)).json()["data"][0]["id"]
    assert response.json()["model_version"] == active
    bad = client.post(
        "/labelstudio/setup",
        headers=basic(LS_KEY),
        json={"project": "8.1", "schema": "<View><Text name='t' value='$x'/></View>"},
    )
    assert bad.status_code == 422 and "no <Labels" in bad.json()["detail"]
    assert bad.headers["content-type"] == "application/problem+json"
    wrong = _setup(client, train_every=0)
    assert wrong.status_code == 422 and "train_every" in wrong.json()["detail"]
    wrong = _setup(client, params={"epochs": -1})
    assert wrong.status_code == 422 and "extra_params.params" in wrong.json()["detail"]
    wrong = _setup(client, strategy="confusion")
    assert wrong.status_code == 422 and "extra_params.strategy" in wrong.json()["detail"]
    wrong = _setup(client, diversity=2)
    assert wrong.status_code == 422 and "extra_params.diversity" in wrong.json()["detail"]


def test_predict_fills_the_projects_labels_in_our_order(client):
    assert _setup(client).status_code == 200
    texts = [
        "Aspirin reduces fever .",
        "The patient has breast cancer .",
        "No sign of diabetes or cancer today .",
        "Cisplatin caused renal failure .",
    ]
    tasks = [{"id": i + 1, "data": {"note": t}} for i, t in enumerate(texts)]
    body = {"tasks": tasks, "project": "7.1764000000", "label_config": CONFIG, "params": {}}
    response = client.post("/labelstudio/predict", headers=basic(LS_KEY), json=body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(texts)
    regions = [r for p in results for r in p["result"]]
    assert regions, "the toy model finds diseases in these sentences"
    for p, text in zip(results, texts, strict=True):
        assert 0.0 <= p["score"] <= 1.0 and p["model_version"]
        for r in p["result"]:
            assert (r["from_name"], r["to_name"], r["type"]) == ("label", "text", "labels")
            assert r["value"]["labels"] == ["disease"]  # Disease mapped; Chemical left out
            assert text[r["value"]["start"] : r["value"]["end"]] == r["value"]["text"]
            assert 0.0 <= r["score"] <= 1.0
    # pre-annotations are annotations: counted like /annotate's (texts, characters, and the
    # entities returned, under the model's own type names)
    state = client.app.state.mslm
    model = state.models.active.id
    scrape = client.get("/metrics", headers=auth(ADMIN)).text
    assert f'mslm_annotated_texts_total{{model="{model}"}} 4.0' in scrape
    chars = sum(map(len, texts))
    assert f'mslm_annotated_characters_total{{model="{model}"}} {chars}.0' in scrape
    assert f'mslm_entities_total{{model="{model}",type="Disease"}} {len(regions)}.0' in scrape
    assert 'type="Chemical"' not in scrape  # not in the project's labels: not returned
    # lowest score first is our active-learning order
    extractor = state.models.active.pipeline.extractor
    from mslm_core.active import uncertainties

    expected = rank(texts, uncertainties(extractor.predictor, texts, "least_confidence"))
    by_score = sorted(range(len(texts)), key=lambda i: results[i]["score"])
    assert by_score == [s.index for s in expected]
    # a project that asks for another order gets it
    assert _setup(client, strategy="margin", diversity=0.0).status_code == 200
    results = client.post("/labelstudio/predict", headers=basic(LS_KEY), json=body).json()
    margin = uncertainties(extractor.predictor, texts, "margin")
    by_score = sorted(range(len(texts)), key=lambda i: results["results"][i]["score"])
    assert by_score == [s.index for s in rank(texts, margin, diversity=0.0)]


def test_annotations_grow_the_dataset_and_every_n_start_a_job_that_is_served(client, service):
    """A project an admin key connected: its models are served (serving is an admin act)."""
    assert _setup(client, "9.1", LS_ADMIN, train_every=2, params=TRAINING).status_code == 200
    project = {"id": 9, "label_config": CONFIG}
    text = "The patient has breast cancer ."

    def event(action, annotation_id, task_id, result, **kw):
        return {
            "action": action,
            "project": project,
            "annotation": {"id": annotation_id, "task": task_id, "result": result, **kw},
            "task": {"id": task_id, "data": {"note": text}},
        }

    cancer = [
        {
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": 16, "end": 29, "text": "breast cancer", "labels": ["disease"]},
        }
    ]
    post = lambda body: client.post("/labelstudio/webhook", headers=basic(LS_ADMIN), json=body)  # noqa: E731
    first = post(event("ANNOTATION_CREATED", 1, 11, cancer))
    assert first.status_code == 200, first.text
    assert "job" not in first.json()
    dataset_id = first.json()["dataset_id"]
    factory = session_factory(service.sqlalchemy_url)

    def documents():
        with factory() as s:
            return {
                d.id: d.entities for d in current_documents(service, s.get(Dataset, dataset_id))
            }

    assert documents() == {"task-11": [(16, 29, "disease")]}
    assert post(event("ANNOTATION_UPDATED", 1, 11, [])).json().get("job") is None
    assert documents() == {"task-11": []}  # updated: no span now, not counted as new
    skipped = post(event("ANNOTATION_CREATED", 2, 12, [], was_cancelled=True)).json()
    assert "job" not in skipped and documents()["task-12"] is None  # skipped: unlabelled
    second = post(event("ANNOTATION_CREATED", 3, 13, cancer)).json()
    assert "job" in second  # the second new annotation since the last job (train_every=2)
    with factory() as s:
        job = s.get(Job, second["job"])
        assert job.activate and job.dataset_id == dataset_id and job.params["epochs"] == 2
    deleted = post(
        {"action": "ANNOTATIONS_DELETED", "project": project, "annotations": [{"id": 3}]}
    )
    assert deleted.status_code == 200 and documents()["task-13"] is None  # back to the pool
    # the model the job makes is served, though another one already was
    before = client.get("/v1/models", headers=auth(ANNOTATE)).json()
    assert run_training_job(second["job"], service) == "succeeded"
    with factory() as s:
        model_id = s.get(Job, second["job"]).model_id
    assert model_id not in [m["id"] for m in before["data"]]
    models = client.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]
    assert [m["id"] for m in models if m["active"]] == [model_id]
    # on demand: Label Studio's START_TRAINING, and POST /labelstudio/train
    started = post({"action": "START_TRAINING", "project": project})
    assert started.status_code == 200 and started.json()["job"] != second["job"]
    again = client.post("/labelstudio/train", headers=basic(LS_ADMIN), json={"project": "9"})
    assert again.status_code == 202 and again.json()["job"]
    # other events are acknowledged; a project never set up is 404
    assert post({"action": "PROJECT_UPDATED", "project": project}).json()["status"] == "ignored"
    unknown = post({"action": "START_TRAINING", "project": {"id": 404}})
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"


def test_a_key_without_admin_cannot_serve_what_its_project_trains(client, service):
    """Issue 58, item 1: an annotate+train key connected a project with serve true, and one
    webhook later its model was served to every key. Serving is an admin act: asking is a
    403 naming why; connected without it, the key's jobs train, and nothing changes for the
    other keys — also when the admin key that connected a project loses its scope."""
    refused = _setup(client, "21.1", train_every=1, serve=True, params=TRAINING)
    assert refused.status_code == 403, refused.text
    assert "admin" in refused.json()["detail"] and refused.json()["type"].endswith("forbidden")
    assert _setup(client, "21.1", train_every=1, params=TRAINING).status_code == 200
    served = client.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]
    active = [m["id"] for m in served if m["active"]]
    project = {"id": 21, "label_config": CONFIG}
    region = {"from_name": "label", "to_name": "text", "type": "labels"}
    region["value"] = {"start": 0, "end": 6, "text": "Cancer", "labels": ["disease"]}
    body = {
        "action": "ANNOTATION_CREATED",
        "project": project,
        "annotation": {"id": 1, "task": 1, "result": [region]},
        "task": {"id": 1, "data": {"note": "Cancer ."}},
    }
    answer = client.post("/labelstudio/webhook", headers=basic(LS_KEY), json=body).json()
    factory = session_factory(service.sqlalchemy_url)
    with factory() as s:
        assert s.get(Job, answer["job"]).activate is False
    assert run_training_job(answer["job"], service) == "succeeded"
    served = client.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]
    assert [m["id"] for m in served if m["active"]] == active  # what others get: unchanged
    # a project connected by an admin key whose scope is then taken away: not served either
    from sqlalchemy import select

    from store.labelstudio import start_training
    from store.tables import ApiKey, LabelStudioProject

    class Queue:
        def train(self, job_id: str) -> None:
            pass

    assert _setup(client, "22.1", LS_ADMIN, train_every=5, params=TRAINING).status_code == 200
    body["project"] = {"id": 22, "label_config": CONFIG}
    assert (
        "job" not in client.post("/labelstudio/webhook", headers=basic(LS_ADMIN), json=body).json()
    )
    with factory() as s:
        row = s.scalar(select(LabelStudioProject).where(LabelStudioProject.project == "22"))
        assert row.serve and row.dataset_id  # an admin key's project serves, by default
        key = s.get(ApiKey, row.key_id)
        key.scopes = "annotate+train"
        s.commit()
        job = start_training(service, s, Queue(), row)
        assert job.activate is False
        key.scopes = "admin"
        s.commit()


def test_a_project_with_nothing_annotated_has_nothing_to_train(client):
    assert _setup(client, "10.1").status_code == 200
    refused = client.post("/labelstudio/train", headers=basic(LS_KEY), json={"project": "10"})
    assert refused.status_code == 422 and "no annotation yet" in refused.json()["detail"]


def test_predict_for_a_project_never_set_up_needs_its_config(client):
    tasks = [{"id": 1, "data": {"note": "Aspirin reduces fever ."}}]
    unknown = client.post(
        "/labelstudio/predict", headers=basic(LS_KEY), json={"tasks": tasks, "project": "99.1"}
    )
    assert unknown.status_code == 404 and "99" in unknown.json()["detail"]
    body = {"tasks": tasks, "project": "99.1", "label_config": CONFIG}
    given = client.post("/labelstudio/predict", headers=basic(LS_KEY), json=body)
    assert given.status_code == 200 and len(given.json()["results"]) == 1


def test_predict_refuses_a_task_over_the_text_limit(client, service):
    assert _setup(client).status_code == 200
    limit = service.max_text_chars
    tasks = [{"id": 1, "data": {"note": "Fine ."}}, {"id": 2, "data": {"note": "x" * (limit + 1)}}]
    body = {"tasks": tasks, "project": "7.1764000000"}
    response = client.post("/labelstudio/predict", headers=basic(LS_KEY), json=body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body.tasks.1.data.note"
