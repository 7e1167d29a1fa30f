"""The service in-process: FastAPI's TestClient over SQLite and the embedded broker; the
worker's tasks are run by calling the runner directly (the end-to-end tests run real worker
processes against Redis and PostgreSQL)."""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from service_helpers import (
    ADMIN,
    ANNOTATE,
    JOB,
    TRAIN,
    auth,
    make_settings,
    service_env,
    serving,
    upload_toy,
    wait_for,
)

from api.main import create_app
from mslm_core.errors import ConfigError, CorpusError
from mslm_settings import Settings
from store.tables import Job
from worker.celery_app import TRAIN_QUEUE, queue_depth
from worker.reaper import sweep
from worker.runner import run_evaluation, run_training_job


@pytest.fixture()
def settings(tmp_path, tiny_encoder) -> Settings:
    return make_settings(tmp_path, tiny_encoder)


@pytest.fixture()
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture(scope="module")
def trained_service(tmp_path_factory, tiny_encoder):
    """An install with one trained, exported, active model (built once for the module)."""
    tmp = tmp_path_factory.mktemp("svc")
    settings = make_settings(tmp, tiny_encoder)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp / "corpus")
        job = c.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={"dataset_id": dataset["id"], **JOB, "export": {"onnx": True, "quantize": "int8"}},
        ).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        model_id = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
        # a train key's model is not served, even when nothing is (issue 58): an admin's act
        assert not c.get(f"/v1/models/{model_id}", headers=auth(ANNOTATE)).json()["active"]
        assert c.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN)).status_code == 200
    return settings, dataset, job["id"]


def test_only_an_admin_key_s_first_model_is_served_when_nothing_is(tmp_path, tiny_encoder):
    """Issue 58's goal, a non-admin key cannot change what another key is served: with nothing
    served, a train key's model used to become the served one for every key. Now only a job
    of an admin key (or the first start's own, which has no key) is served unasked."""
    settings = make_settings(tmp_path, tiny_encoder)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus", key=ADMIN)
        body = {"dataset_id": dataset["id"], **JOB, "epochs": 1}
        train = c.post("/v1/jobs", headers=auth(TRAIN), json=body | {"idempotency_key": "t"})
        assert train.status_code == 404  # an admin's dataset: not the train key's to use
        mine = upload_toy(c, tmp_path / "mine")
        train = c.post("/v1/jobs", headers=auth(TRAIN), json=body | {"dataset_id": mine["id"]})
        assert run_training_job(train.json()["id"], settings) == "succeeded"
        assert c.get("/readyz").status_code == 503  # still nothing served
        admin = c.post("/v1/jobs", headers=auth(ADMIN), json=body)
        assert run_training_job(admin.json()["id"], settings) == "succeeded"
        served = [m for m in c.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]]
        active = {m["id"]: m["active"] for m in served}
        assert active == {
            c.get(f"/v1/jobs/{train.json()['id']}", headers=auth(ADMIN)).json()["model_id"]: False,
            c.get(f"/v1/jobs/{admin.json()['id']}", headers=auth(ADMIN)).json()["model_id"]: True,
        }


def test_a_model_below_its_floor_is_served_only_by_force(tmp_path, tiny_encoder):
    """Issue 60's guardrail: a job whose model scores under its floor (here min_dev_f1 0.99
    after one epoch) succeeds with the reason in ``warnings`` — and is not served, not even
    on an install that serves nothing, from an admin's job; activating it is a 409 unless
    ``force=true``. With ``below_floor: fail`` the job fails with the reason and keeps no
    model."""
    settings = make_settings(tmp_path, tiny_encoder)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus", key=ADMIN)
        body = {"dataset_id": dataset["id"], **JOB, "epochs": 1, "min_dev_f1": 0.99}
        warned = c.post("/v1/jobs", headers=auth(ADMIN), json=body).json()
        assert warned["params"]["min_dev_f1"] == 0.99
        assert run_training_job(warned["id"], settings) == "succeeded"
        job = c.get(f"/v1/jobs/{warned['id']}", headers=auth(ADMIN)).json()
        (warning,) = job["warnings"]
        assert "below the job's floor (min_dev_f1 0.99)" in warning
        assert job["progress"]["done"] and job["progress"]["eta_s"] == 0
        assert job["progress"]["steps_per_s"] > 0 and job["progress"]["phase"] == "done"
        model = c.get(f"/v1/models/{job['model_id']}", headers=auth(ADMIN)).json()
        assert model["warnings"] == [warning] and not model["active"]
        assert c.get("/readyz").status_code == 503  # nothing served
        refused = c.post(f"/v1/models/{job['model_id']}/activate", headers=auth(ADMIN))
        assert refused.status_code == 409, refused.text
        assert refused.json()["type"].endswith("model-below-floor")
        assert "force=true" in refused.json()["detail"]
        forced = c.post(f"/v1/models/{job['model_id']}/activate?force=true", headers=auth(ADMIN))
        assert forced.status_code == 200 and forced.json()["active"]
        failing = c.post("/v1/jobs", headers=auth(ADMIN), json=body | {"below_floor": "fail"})
        assert run_training_job(failing.json()["id"], settings) == "failed"
        failed = c.get(f"/v1/jobs/{failing.json()['id']}", headers=auth(ADMIN)).json()
        assert "below the job's floor" in failed["error"] and failed["model_id"] is None
        assert c.get("/v1/models", headers=auth(ADMIN)).json()["count"] == 1
        bad = c.post("/v1/jobs", headers=auth(ADMIN), json=body | {"below_floor": "ignore"})
        assert bad.status_code == 422 and "below_floor" in bad.text


def test_a_stopping_worker_gives_its_training_job_back_to_be_resumed(tmp_path, tiny_encoder):
    """A worker asked to stop (Celery's warm shutdown: ``mslm up`` stopped or killed) stops
    its training job at the next step, keeps a checkpoint and puts the job back in the queue,
    the attempt not counted; the next worker resumes it from that step to success."""
    from store.db import session_factory
    from store.tables import Job
    from worker.celery_app import STOPPING

    settings = make_settings(tmp_path, tiny_encoder)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus", key=ADMIN)
        body = {"dataset_id": dataset["id"], **JOB, "epochs": 2}
        job_id = c.post("/v1/jobs", headers=auth(ADMIN), json=body).json()["id"]
        STOPPING.set()
        try:
            assert run_training_job(job_id, settings) == "released"
        finally:
            STOPPING.clear()
        with session_factory(settings.sqlalchemy_url)() as session:
            row = session.get(Job, job_id)
            assert (row.state, row.worker, row.attempts) == ("queued", None, 0)
            assert row.progress["step"] == 1 and row.progress["steps"] > 1
        kept = list((settings.artifacts / "work" / job_id / "checkpoint").glob("ckpt-00000001"))
        assert kept, "no checkpoint at the step the worker stopped"
        assert run_training_job(job_id, settings) == "succeeded"
        done = c.get(f"/v1/jobs/{job_id}", headers=auth(ADMIN)).json()
        assert done["progress"]["step"] == done["progress"]["steps"]
        assert len(done["history"]) == 2


def test_a_model_coming_to_replace_the_served_one_is_said_and_replaces_it(tmp_path, tiny_encoder):
    """Issue 60: while a job that ``replaces`` the served model's job runs (the first start's
    full model after its early one), /readyz names it with its time left and every annotate
    answer says which model made it and what is coming; when it succeeds its model is served.
    A job replacing a model that is no longer served replaces nothing."""
    from store.db import session_factory
    from store.jobs import create_job
    from worker.celery_app import CeleryQueue, celery_for

    settings = make_settings(tmp_path, tiny_encoder, model_poll_seconds=0.2)
    factory = session_factory(settings.sqlalchemy_url)

    def replacing(job_id: str) -> str:
        with factory() as session:
            queue = CeleryQueue(celery_for(settings))
            job, _ = create_job(settings, session, queue, dataset["id"], body, {}, replaces=job_id)
            return job.id

    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus", key=ADMIN)
        body = {**JOB, "epochs": 1}
        early = c.post("/v1/jobs", headers=auth(ADMIN), json={"dataset_id": dataset["id"], **body})
        assert run_training_job(early.json()["id"], settings) == "succeeded"
        early_model = c.get(f"/v1/jobs/{early.json()['id']}", headers=auth(ADMIN)).json()[
            "model_id"
        ]
        ready = wait_for(
            lambda: c.get("/readyz", headers=auth(ADMIN)), lambda r: r.status_code == 200
        )
        assert ready.json()["coming"] is None
        full = replacing(early.json()["id"])
        ready = wait_for(
            lambda: c.get("/readyz", headers=auth(ADMIN)).json(), lambda r: r["coming"] is not None
        )
        assert ready["coming"] == {
            "job_id": full,
            "state": "queued",
            "phase": "queued",
            "eta_s": None,
            "replaces": early_model,
        }
        assert c.get("/readyz").json() == {"status": "ready"}  # no key: no more
        answer = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["Aspirin ."]})
        assert answer.headers["MSLM-Model"] == early_model
        assert answer.headers["MSLM-Model-Coming"] == f"job={full}"
        assert run_training_job(full, settings) == "succeeded"
        full_model = c.get(f"/v1/jobs/{full}", headers=auth(ADMIN)).json()["model_id"]
        ready = wait_for(
            lambda: c.get("/readyz", headers=auth(ADMIN)).json(),
            lambda r: r["model"]["id"] == full_model,
        )
        assert ready["coming"] is None
        answer = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["Aspirin ."]})
        assert (
            answer.headers["MSLM-Model"] == full_model and "MSLM-Model-Coming" not in answer.headers
        )
        late = replacing(early.json()["id"])  # the early model is no longer served
        assert run_training_job(late, settings) == "succeeded"
        models = {
            m["id"]: m["active"] for m in c.get("/v1/models", headers=auth(ADMIN)).json()["data"]
        }
        assert models[full_model] and sum(models.values()) == 1


def test_fine_tune_activate_annotate_evaluate(trained_service):
    settings, dataset, job_id = trained_service
    with TestClient(create_app(settings)) as c:
        job = c.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()
        assert job["state"] == "succeeded" and job["attempts"] == 1
        assert job["progress"]["done"] and job["progress"]["epochs"] == JOB["epochs"]
        assert 1 <= len(job["history"]) <= JOB["epochs"]  # early stopping may end it sooner
        assert all(h["dev_f1"] is not None for h in job["history"])
        assert job["metrics"]["test"]["strict"]["f1"] > 0.5  # evaluated on the test split
        model_id = job["model_id"]
        models = c.get("/v1/models", headers=auth(ANNOTATE)).json()
        assert models["count"] == 1 and models["data"][0]["active"]  # activated by the admin
        assert set(models["data"][0]["precisions"]) == {"fp32", "int8"}
        assert (models["data"][0]["styles"], models["data"][0]["style"]) == ([""], "")
        detail = c.get(f"/v1/models/{model_id}", headers=auth(ANNOTATE)).json()
        assert detail["manifest"]["onnx"]["precisions"]["int8"] == "model.int8.onnx"
        assert detail["manifest"]["calibration"]["detection_temperature"] > 0
        png = c.get(f"/v1/models/{model_id}/calibration.png", headers=auth(ANNOTATE))
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG")
        assert c.get(f"/v1/models/{model_id}/calibration.png").status_code == 401
        missing = c.get("/v1/models/nope/calibration.png", headers=auth(ANNOTATE))
        assert missing.status_code == 404
        assert c.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN)).status_code == 200
        ready = c.get("/readyz", headers=auth(ANNOTATE))
        assert ready.status_code == 200 and ready.json()["model"]["id"] == model_id
        text = "Cisplatin caused renal failure in the patient ."
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text, ""]}).json()
        assert body["model"]["id"] == model_id and body["model"]["backend"] == "onnx"
        ents = body["results"][0]["entities"]
        assert {(e["text"], e["type"]) for e in ents} >= {("renal failure", "Disease")}
        assert all(text[e["start"] : e["end"]] == e["text"] for e in ents)
        assert body["results"][1]["entities"] == []
        # a model without source styles reads text with none, and is asked for no other
        as_none = {"texts": [text, ""], "style": ""}
        same = c.post("/v1/annotate", headers=auth(ANNOTATE), json=as_none).json()
        assert same["results"] == body["results"]
        other = c.post("/v1/annotate", headers=auth(ANNOTATE), json={**as_none, "style": "X"})
        assert other.status_code == 404 and other.json()["errors"][0]["field"] == "body.style"
        # thresholds: global and per type
        strict = c.post(
            "/v1/annotate",
            headers=auth(ANNOTATE),
            json={"texts": [text], "min_confidence_per_type": {"Disease": 1.01}},
        )
        assert all(e["type"] != "Disease" for e in strict.json()["results"][0]["entities"])
        ev = c.post(
            "/v1/evaluations",
            headers=auth(TRAIN),
            json={"model_id": model_id, "dataset_id": dataset["id"], "split": "test"},
        )
        assert ev.status_code == 202 and ev.json()["state"] == "queued"
        assert run_evaluation(ev.json()["id"], settings) == "succeeded"
        done = c.get(f"/v1/evaluations/{ev.json()['id']}", headers=auth(TRAIN)).json()
        assert done["state"] == "succeeded" and done["metrics"]["n_gold"] == 7
        assert set(done["metrics"]["strict"]) == {"precision", "recall", "f1"}
        cal = done["metrics"]["calibration"]
        assert (
            cal["detection_temperature"]
            == detail["manifest"]["calibration"]["detection_temperature"]
        )
        assert 0.0 <= cal["after"]["ece"] <= 1.0 and cal["after"]["n"] > 0
        png = c.get(f"/v1/evaluations/{ev.json()['id']}/calibration.png", headers=auth(TRAIN))
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
        metrics = c.get("/metrics").text
        assert 'mslm_jobs{state="succeeded"} 1.0' in metrics
        assert "mslm_http_request_duration_seconds_bucket" in metrics
        assert f'mslm_annotated_texts_total{{model="{model_id}"}}' in metrics


def test_a_request_names_its_context_profile_and_the_answer_says_which(trained_service):
    """``context_profile``: the deployment's (MSLM_CONTEXT_PROFILE) by default, or the one a
    request names; the answer says which its context followed (null with the context off), and
    an unknown profile is a 422 naming the field."""
    settings, _, _ = trained_service
    text = "Chest CT to rule out cancer ."

    def said(app_settings, **options) -> object:
        with TestClient(create_app(app_settings)) as c:
            r = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text], **options})
        return r.json()["context"] if r.status_code == 200 else (r.status_code, r.json())

    assert said(settings) == {"profile": "omop"}
    assert said(settings, context_profile="context") == {"profile": "context"}
    assert said(settings, context=False) is None
    deployment = settings.model_copy(update={"context_profile": "context"})
    assert said(deployment) == {"profile": "context"}
    assert said(deployment, context_profile="omop") == {"profile": "omop"}
    status, problem = said(settings, context_profile="negex")
    assert status == 422 and any("context_profile" in e["field"] for e in problem["errors"])


def test_annotate_links_concepts_in_every_format(trained_service, tmp_path):
    """Issue 21: with MSLM_VOCABULARY each entity carries its concept and candidates; the
    offsets and the rest of the entity are unchanged; no vocabulary, no keys."""
    settings, _, _ = trained_service
    text = "No sign of diabetes or cancer today ."
    vocab = tmp_path / "mesh.tsv"
    vocab.write_text(
        "D003920\tDiabetes Mellitus\tdiabetes\nD009369\tNeoplasms\tcancer|tumour\n",
        encoding="utf-8",
    )
    with TestClient(create_app(settings)) as c:
        plain = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
    assert all("concept" not in e for e in plain["results"][0]["entities"])
    linked = settings.model_copy(update={"vocabulary": vocab, "vocabulary_name": "MeSH"})
    with TestClient(create_app(linked)) as c:
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
        ents = body["results"][0]["entities"]
        for e, before in zip(ents, plain["results"][0]["entities"], strict=True):
            assert {k: v for k, v in e.items() if k not in ("concept", "candidates")} == before
        concepts = {e["text"]: e["concept"] for e in ents}
        diabetes = dict(concepts["diabetes"])
        assert 0.5 < diabetes.pop("confidence") <= 1.0  # the packaged MeSH calibration's
        assert diabetes == {
            "id": "D003920",
            "name": "Diabetes Mellitus",
            "score": 1.0,
            "vocabulary": "MeSH",
            "url": None,  # no MSLM_VOCABULARY_URL
            "code": "D003920",  # a TSV's id is its code; no OMOP concept_id, no mapping
            "concept_id": None,
            "source_id": None,
        }
        assert concepts["cancer"]["id"] == "D009369"
        assert all(e["candidates"][0] == e["concept"] for e in ents)
        bioc = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text], "format": "bioc"}
        ).json()
        infons = [a["infons"] for a in bioc["documents"][0]["passages"][0]["annotations"]]
        assert {(i["identifier"], i["concept_name"]) for i in infons} == {
            ("D003920", "Diabetes Mellitus"),
            ("D009369", "Neoplasms"),
        }
        pubtator = c.post(
            "/v1/annotate/pubtator", headers=auth(ANNOTATE), json={"texts": [text]}
        ).text
        assert {line.split("\t")[5] for line in pubtator.splitlines()[2:] if line} == {
            "D003920",
            "D009369",
        }
        tasks = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text], "format": "labelstudio"}
        ).json()
        metas = [r["meta"]["text"] for r in tasks[0]["predictions"][0]["result"]]
        assert all(any(m.startswith("concept: MeSH D") for m in meta) for meta in metas)
    # below the threshold: candidates, no concept
    strict = linked.model_copy(update={"link_threshold": 1.0})
    vocab.write_text("D003920\tDiabetes Mellitus\tdiabetic\n", encoding="utf-8")
    with TestClient(create_app(strict)) as c:
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
        diabetes = next(e for e in body["results"][0]["entities"] if e["text"] == "diabetes")
        assert diabetes["concept"] is None and diabetes["candidates"][0]["id"] == "D003920"
    # a URL pattern that is not an http(s) URL with {id} stops the start
    bad_url = linked.model_copy(update={"vocabulary_url": "javascript:alert({id})"})
    with pytest.raises(ConfigError, match="MSLM_VOCABULARY_URL"), TestClient(create_app(bad_url)):
        pass
    # a bad vocabulary stops the start, naming file and line
    vocab.write_text("D1\tok\nD 2\tbad id\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"mesh.tsv:2 \(id\)"), TestClient(create_app(linked)):
        pass


def test_annotate_reports_clinical_context_in_every_format(trained_service, tmp_path):
    settings, _, _ = trained_service
    text = "No sign of diabetes or cancer today ."
    with TestClient(create_app(settings)) as c:
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
        ents = body["results"][0]["entities"]
        assert {e["text"] for e in ents} == {"diabetes", "cancer"}
        for e in ents:
            a = e["assertion"]
            assert a["negated"] and not (a["possible"] or a["hypothetical"] or a["family"])
            assert [(q["attribute"], q["text"], q["start"]) for q in a["cues"]] == [
                ("negated", "No sign of", 0)
            ]
        bioc = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text], "format": "bioc"}
        ).json()
        annotations = bioc["documents"][0]["passages"][0]["annotations"]
        assert {(a["infons"]["negated"], a["infons"]["cues"]) for a in annotations} == {
            ("true", "negated@0-10")
        }
        tasks = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text], "format": "labelstudio"}
        ).json()
        regions = tasks[0]["predictions"][0]["result"]
        assert {tuple(r["meta"]["text"]) for r in regions} == {('negated: "No sign of"',)}
        schema = c.get("/openapi.json").json()["components"]["schemas"]
        assert set(schema["AssertionOut"]["required"]) == {
            "negated",
            "possible",
            "hypothetical",
            "historical",
            "family",
            "allergy",
            "cues",
        }
        assert schema["CueOut"]["properties"]["attribute"]["enum"] == [
            *schema["AssertionOut"]["required"][:-1]
        ]
        assert "section" in schema["EntityOut"]["properties"]
    # MSLM_CONTEXT=false: no assertion
    with TestClient(create_app(settings.model_copy(update={"context": False}))) as c:
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
        ents = body["results"][0]["entities"]
        assert ents and all("assertion" not in e for e in ents)
    # a site's rules file: checked at start, and used
    rules = tmp_path / "site-rules.json"
    pseudo = {"literal": "no sign of", "category": "NEGATED_EXISTENCE", "direction": "PSEUDO"}
    rules.write_text(json.dumps({"rules": [pseudo]}))
    with TestClient(create_app(settings.model_copy(update={"context_rules": rules}))) as c:
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]}).json()
        ents = body["results"][0]["entities"]
        assert {e["text"] for e in ents} == {"diabetes", "cancer"}
        assert all(not e["assertion"]["negated"] for e in ents)
    rules.write_text(json.dumps({"rules": [{**pseudo, "category": "NEGATION"}]}))
    bad = settings.model_copy(update={"context_rules": rules})
    with (
        pytest.raises(ConfigError, match=r"rules\[0\] \('no sign of'\): field 'category'"),
        TestClient(create_app(bad)),
    ):
        pass


def test_a_client_that_leaves_takes_its_work_with_it(trained_service):
    """Issue 18, item 5: long texts went on using the engine after their client had closed
    the connection, and held up everyone else. Now the work is dropped at the disconnect
    (counted in mslm_annotate_abandoned_total) and a short request is answered meanwhile."""
    import socket
    from urllib.parse import urlparse

    settings, _, _ = trained_service
    body = json.dumps({"texts": [". " * 50_000] * 16}).encode()  # 16 × 100,000 characters
    with serving(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as c:
        assert c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["x"]}).is_success
        port = urlparse(url).port
        with socket.create_connection(("127.0.0.1", port)) as sock:
            head = (
                "POST /v1/annotate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {ANNOTATE}\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body)
            time.sleep(0.5)  # the long request is running
            started = time.perf_counter()
            short = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["aspirin"]})
            assert short.status_code == 200 and time.perf_counter() - started < 5
        # the connection is closed: its work is dropped
        wait_for(
            lambda: c.get("/metrics").text,
            lambda text: "mslm_annotate_abandoned_total 1.0" in text,
            timeout=30,
        )
        started = time.perf_counter()
        assert c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["x"]}).is_success
        assert time.perf_counter() - started < 2  # the engine is free again


def test_an_evaluation_of_a_masked_lm_bundle_reports_its_perplexity(settings):
    """POST /v1/evaluations scores with the same evaluate_bundle as `mslm evaluate`: a model
    trained with masking gets its masked-token perplexity, a vanilla one none."""
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, settings.home / "corpus")
        job = c.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={
                "dataset_id": dataset["id"],
                **JOB,
                "strategy": "mslm_tapt",
                "epochs": 2,
                "export": {"onnx": False},
            },
        ).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        model_id = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
        ev = c.post(
            "/v1/evaluations",
            headers=auth(TRAIN),
            json={"model_id": model_id, "dataset_id": dataset["id"], "split": "dev"},
        ).json()
        assert run_evaluation(ev["id"], settings) == "succeeded"
        metrics = c.get(f"/v1/evaluations/{ev['id']}", headers=auth(TRAIN)).json()["metrics"]
        assert metrics["perplexity"] is not None and metrics["perplexity"] > 1.0
        assert metrics["engine"]["backend"] == "torch" and len(metrics["predictions_sha256"]) == 64


@pytest.mark.reliability
def test_every_protected_route_refuses_missing_bad_and_wrong_scope_keys(client, record):
    spec = client.app.openapi()
    checked = 0
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            if not op.get("security"):
                assert path in ("/healthz", "/readyz", "/metrics"), path
                continue
            url = path.replace("{", "").replace("}", "")
            call = getattr(client, method)
            assert call(url).status_code == 401, (method, path)
            assert call(url, headers=auth("not-a-key-at-all-xxxxxx")).status_code == 401
            client.app.state.mslm.throttle.reset()  # this test is not a brute force
            admin = "activate" in path or (
                method in ("delete", "post") and path.startswith(("/v1/models", "/v1/vocabularies"))
            )
            scope = (
                "admin"
                if admin
                else "annotate"
                # /v1/annotate and /v1/annotation-jobs
                if path.startswith(("/v1/annotat", "/v1/models", "/v1/vocabularies"))
                else "train"
            )
            wrong = {"admin": TRAIN, "annotate": TRAIN, "train": ANNOTATE}[scope]
            response = call(url, headers=auth(wrong))
            assert response.status_code == 403, (method, path, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            checked += 1
    assert checked >= 14
    record(
        "security: keys and scopes",
        "every operation in the OpenAPI schema called with no "
        "key, a wrong key and a key of the wrong scope",
        {"protected_operations": checked},
        "401, 401 and 403 as problem details, every one",
    )


def test_a_route_policy_found_by_lookup_is_the_one_the_scan_finds(client):
    """Issue 54: a path without parameters is looked up, not matched against every route; for
    every operation of the API document the lookup gives what the scan of the routes gives,
    and a path that a parametric route before it would take is left to the scan."""
    from starlette.routing import Match

    from api.admission import RoutePolicies
    from api.main import ROUTERS

    policies = RoutePolicies(ROUTERS, client.app.state.settings)
    assert len(policies.static) >= 20
    for path, methods in client.app.openapi()["paths"].items():
        for method in methods:
            asked = {"type": "http", "path": path, "method": method.upper(), "root_path": ""}
            scanned = next(
                (p for r, p in policies.table if r.matches(asked)[0] == Match.FULL), None
            )
            assert policies(dict(asked)) == scanned, (method, path)
    # a static route shadowed by a parametric one before it stays with the scan
    from fastapi import APIRouter

    router = APIRouter()
    router.add_api_route("/v1/things/{thing}", lambda thing: None, methods=["POST"])
    router.add_api_route("/v1/things/all", lambda: None, methods=["POST"])
    shadowed = RoutePolicies([router], client.app.state.settings)
    assert ("POST", "/v1/things/all") not in shadowed.static


def test_a_request_that_asks_no_option_gets_the_pipelines_defaults():
    """Issue 54: a request that sets no option is answered with the pipeline's DEFAULTS
    without building them again; one that sets any gets them built, and both agree."""
    from api.schemas import AnnotateRequest
    from mslm_core.pipeline import ANNOTATE_OPTIONS, DEFAULTS, AnnotateOptions

    plain = AnnotateRequest(texts=["x"])
    assert plain.options() is DEFAULTS
    built = AnnotateOptions(
        **plain.model_dump(include=set(ANNOTATE_OPTIONS)), **plain.labelstudio.model_dump()
    )
    assert built == DEFAULTS
    assert AnnotateRequest(texts=["x"], context=False).options() == AnnotateOptions(context=False)
    assert AnnotateRequest(texts=["x"]).options(format="pubtator").format == "pubtator"
    named = AnnotateRequest(texts=["x"], labelstudio={"from_name": "ner"}).options()
    assert named.from_name == "ner" and named is not DEFAULTS


def test_every_operation_with_a_body_has_its_scope_checked_before_it(client):
    """Issue 29 item 7: the middleware knows each route's scope (read off its dependencies),
    so a wrong-scope key is refused before its body is read; and each route's body limit,
    from the route itself (issue 57: no table of path prefixes beside the routers)."""
    from api.admission import RoutePolicies
    from api.main import ROUTERS

    policies = RoutePolicies(ROUTERS, client.app.state.settings)
    spec = client.app.openapi()
    checked, kinds = 0, {}
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            if method in ("post", "put", "patch") and op.get("security"):
                url = path.replace("{", "").replace("}", "")
                asked = {"type": "http", "path": url, "method": method.upper(), "headers": []}
                policy = policies(asked)
                assert policy is not None and policy.scope in ("annotate", "train", "admin"), (
                    method,
                    path,
                )
                kinds[f"{method.upper()} {path}"] = (policy.body, policy.upload_quota)
                checked += 1
    assert checked >= 9
    uploads = {k for k, (body, quota) in kinds.items() if quota}
    assert uploads == {
        "POST /v1/datasets",
        "POST /v1/vocabularies",
        "POST /v1/annotation-jobs/inputs",
    }
    assert all(kinds[k][0] == "upload" for k in uploads)
    texts = {k for k, (body, _) in kinds.items() if body == "texts"}
    assert texts == {
        "POST /v1/annotate",
        "POST /v1/annotate/pubtator",
        "POST /v1/annotate/fhir",
        "POST /labelstudio/predict",
        "POST /labelstudio/webhook",
    }
    assert kinds["POST /v1/datasets/{dataset_id}/documents"] == ("upload", False)
    assert kinds["POST /v1/jobs"] == ("settings", False)
    # the API document says which limit a JSON body has
    assert spec["paths"]["/v1/annotate"]["post"]["x-mslm-body"] == "texts"
    s = client.app.state.settings
    limits = {"texts": s.max_texts * s.max_text_chars * 12 + (1 << 20), "settings": 4 << 20}
    for kind, limit in limits.items():
        path = "/v1/annotate" if kind == "texts" else "/v1/jobs"
        asked = {"type": "http", "path": path, "method": "POST", "headers": []}
        assert policies.body_limit(asked) == limit
    asked = {"type": "http", "path": "/v1/annotate", "method": "GET", "headers": []}
    assert policies.body_limit(asked) == 4 << 20


def test_bad_keys_are_slowed_down(client):
    started = time.perf_counter()
    for _ in range(5):
        client.get("/v1/jobs", headers=auth("wrong-key-0000000000000000"))
    fast = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(3):
        client.get("/v1/jobs", headers=auth("wrong-key-0000000000000000"))
    slow = time.perf_counter() - started
    assert slow >= 0.25 + 0.5 + 1.0 - 0.05 and fast < 1.0
    assert client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200  # slowed, not locked


def test_a_valid_key_is_never_slowed_by_bad_ones(client):
    """Issue 18 item 6: after 8 bad keys from an address, its valid requests took 2 s each."""
    for _ in range(8):
        client.get("/v1/jobs", headers=auth("wrong-key-0000000000000000"))
    started = time.perf_counter()
    for _ in range(3):
        assert client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200
    assert time.perf_counter() - started < 1.0  # the 9th bad key alone would wait 2 s
    started = time.perf_counter()
    client.get("/v1/jobs", headers=auth("wrong-key-0000000000000000"))
    assert time.perf_counter() - started >= 2.0 - 0.05  # bad keys still wait


@pytest.mark.parametrize("trusted", ["", "127.0.0.1"])
def test_x_forwarded_for_is_believed_only_from_named_proxies(settings, trusted):
    """Issue 18 item 6: rotating X-Forwarded-For from loopback escaped the bad-key throttle."""
    import httpx

    from api.cli import uvicorn_options

    settings = settings.model_copy(update={"forwarded_allow_ips": trusted})
    options = {k: v for k, v in uvicorn_options(settings).items() if k != "log_config"}
    app = create_app(settings)
    with serving(app, **options) as url, httpx.Client(base_url=url) as c:
        for i in range(8):
            forged = {"X-Forwarded-For": f"203.0.113.{i}"}
            c.get("/v1/jobs", headers={**auth("wrong-key-0000000000000000"), **forged})
        throttle = app.state.mslm.throttle
        if trusted:  # a named proxy: each forwarded address is its own client
            assert throttle.delay("127.0.0.1") == 0 and throttle.delay("203.0.113.7") == 0
        else:  # nobody is believed: it is all one client, throttled
            assert throttle.delay("127.0.0.1") >= 1.0


def test_limits_answer_413_and_422_with_clear_messages(tmp_path, tiny_encoder):
    settings = make_settings(
        tmp_path, tiny_encoder, max_texts=2, max_text_chars=10, max_upload_mb=0.001
    )
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["a", "b", "c"]})
        assert r.status_code == 422 and "limit is 2" in r.json()["detail"]
        r = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["x" * 11]})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "body.texts.0"
        big = b"x\tO\n" * 1000  # 4 KB > 0.001 MB
        r = c.post("/v1/datasets", headers=auth(TRAIN), files={"train": ("t.tsv", big)})
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"
        r = c.post(
            "/v1/annotate",
            headers={**auth(ANNOTATE), "content-type": "application/json"},
            content=b'{"texts": ["' + b"y" * 1_200_000 + b'"]}',
        )
        assert r.status_code == 413
        # chunked (no Content-Length): counted as it streams, still 413 (it was a 400, the
        # form parser's answer to the cut)
        boundary = "b0undary"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="train"; '
            f'filename="t.tsv"\r\nContent-Type: text/plain\r\n\r\n'
        ).encode()

        def chunks():
            yield head
            for _ in range(10):
                yield b"x\tO\n" * 100
            yield f"\r\n--{boundary}--\r\n".encode()

        r = c.post(
            "/v1/datasets",
            headers={
                **auth(TRAIN),
                "content-type": f"multipart/form-data; boundary={boundary}",
            },
            content=chunks(),
        )
        assert r.status_code == 413, r.text
        assert r.headers["content-type"] == "application/problem+json"


def test_orphaned_uploads_and_stagings_are_swept_at_start(tmp_path, tiny_encoder, caplog):
    """Issue 18 item 7: an API killed mid-upload left its spooled copy and its staging
    directory in the artifact store for good."""
    import os

    settings = make_settings(tmp_path, tiny_encoder)
    old = time.time() - 2 * 3600
    made = {}
    for where in ("uploads/tmpab12", "datasets/.staging-1f", "models/.staging-2e"):
        for age, suffix in ((old, "-old"), (None, "-new")):
            path = settings.artifacts / f"{where}{suffix}"
            path.mkdir(parents=True)
            (path / "train").write_text("Aspirin\tB-Chemical\n", encoding="utf-8")
            if age:
                os.utime(path, (age, age))
            made[path] = age is None
    kept = settings.artifacts / "datasets" / "ds-real"
    kept.mkdir(parents=True)
    os.utime(kept, (old, old))
    with caplog.at_level(logging.INFO), TestClient(create_app(settings)):
        pass
    assert {p: p.exists() for p in made} == made  # the old ones went, the fresh ones stayed
    assert kept.exists()
    assert "swept 3 orphaned" in caplog.text and "Aspirin" not in caplog.text


def test_the_reaper_sweeps_orphans_as_it_runs(tmp_path, tiny_encoder, monkeypatch):
    """A deployment that runs for months has what killed uploads left swept as it goes, not
    only when an API replica starts: the reaper's pass does it."""
    import os
    import threading

    from worker import reaper

    monkeypatch.setattr(reaper, "ORPHAN_SWEEP_EVERY_S", 0.0)
    settings = make_settings(
        tmp_path, tiny_encoder, heartbeat_seconds=1, heartbeat_timeout_seconds=4
    )
    with TestClient(create_app(settings)) as client:
        state = client.app.state.mslm
        stop = threading.Event()
        loop = threading.Thread(
            target=reaper.run, args=(settings, state.factory, state.celery, stop), daemon=True
        )
        loop.start()
        orphan = settings.artifacts / "uploads" / "tmp-killed"
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_bytes(b"Aspirin\tB-Chemical\n")
        old = time.time() - 2 * 3600
        os.utime(orphan, (old, old))
        try:
            wait_for(orphan.exists, lambda exists: not exists, timeout=10)
        finally:
            stop.set()
            loop.join(10)
        assert not loop.is_alive()


@pytest.mark.parametrize(
    "content, where",
    [
        (b"The\tO\npatient\tX-Disease\n", ":2"),  # unknown tag scheme, line 2
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", ":1"),  # binary
        (b"ok\tO\n\xff\xfe\tO\n", ":2"),  # invalid UTF-8 on line 2
        (b"", "empty"),
        (b"a\tb\tc\n", ":1"),  # wrong column count
    ],
)
def test_bad_uploads_are_refused_with_file_and_line_and_store_nothing(
    client, settings, content, where
):
    r = client.post(
        "/v1/datasets",
        headers=auth(TRAIN),
        files={"train": ("../../etc/evil.tsv", content), "dev": ("dev.tsv", b"ok\tO\n")},
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["type"] == "urn:mslm:problem:invalid-corpus"
    assert body["errors"][0]["file"].startswith("train (evil.tsv)")
    assert where in body["detail"] or where in json.dumps(body["errors"])
    assert client.get("/v1/datasets", headers=auth(TRAIN)).json()["count"] == 0
    stored = settings.artifacts / "datasets"
    assert not stored.exists() or not any(stored.iterdir())
    assert not (settings.artifacts.parent / "etc").exists()


def test_dataset_stats_and_delete(client, tmp_path):
    ds = upload_toy(client, tmp_path / "c")
    assert ds["stats"]["train"]["mentions"] == 7 and ds["types"] == ["Chemical", "Disease"]
    assert ds["files"]["dev"]["filename"] == "dev.tsv" and len(ds["files"]["dev"]["sha256"]) == 64
    got = client.get(f"/v1/datasets/{ds['id']}", headers=auth(TRAIN)).json()
    assert got == ds
    job = client.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": ds["id"]}).json()
    r = client.delete(f"/v1/datasets/{ds['id']}", headers=auth(TRAIN))
    assert r.status_code == 409 and job["id"] in r.json()["detail"]  # a queued job uses it
    client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(TRAIN))
    assert client.delete(f"/v1/datasets/{ds['id']}", headers=auth(TRAIN)).status_code == 204
    assert client.get(f"/v1/datasets/{ds['id']}", headers=auth(TRAIN)).status_code == 404
    assert client.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["dataset_id"] is None


def test_job_validation_and_idempotency(client, settings, tmp_path):
    ds = upload_toy(client, tmp_path / "c")
    bad = client.post(
        "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": ds["id"], "strategy": "magic"}
    )
    assert bad.status_code == 422
    assert [e["field"] for e in bad.json()["errors"]] == ["body.strategy"]
    bad = client.post(
        "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": ds["id"], "base_model": "/etc"}
    )
    assert bad.status_code == 422 and "not allowed" in bad.json()["detail"]
    assert (
        client.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": "ds-nope"}).status_code
        == 404
    )
    body = {"dataset_id": ds["id"], "epochs": 2, "idempotency_key": "run-42"}
    first = client.post("/v1/jobs", headers=auth(TRAIN), json=body)
    again = client.post("/v1/jobs", headers=auth(TRAIN), json=body)
    assert first.status_code == 202 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    assert first.headers["location"] == f"/v1/jobs/{first.json()['id']}"
    other = client.post("/v1/jobs", headers=auth(TRAIN), json={**body, "epochs": 3})
    assert other.status_code == 409
    header = client.post(
        "/v1/jobs",
        headers={**auth(TRAIN), "Idempotency-Key": "run-42"},
        json={"dataset_id": ds["id"], "epochs": 2},
    )
    assert header.json()["id"] == first.json()["id"]
    assert client.get("/v1/jobs", headers=auth(TRAIN)).json()["count"] == 1
    assert queue_depth(client.app.state.mslm.celery, TRAIN_QUEUE) == 1  # one message


def test_cancel_queued_and_running_jobs(client, settings, tmp_path):
    ds = upload_toy(client, tmp_path / "c")
    queued = client.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": ds["id"]}).json()
    r = client.post(f"/v1/jobs/{queued['id']}/cancel", headers=auth(TRAIN))
    assert r.json()["state"] == "cancelled"
    assert run_training_job(queued["id"], settings) == "skipped"  # its message is a no-op

    long = client.post(
        "/v1/jobs",
        headers=auth(TRAIN),
        json={"dataset_id": ds["id"], **JOB, "epochs": 200, "patience": 0},
    ).json()
    outcome = {}
    thread = threading.Thread(
        target=lambda: outcome.setdefault("state", run_training_job(long["id"], settings))
    )
    thread.start()
    wait_for(
        lambda: client.get(f"/v1/jobs/{long['id']}", headers=auth(TRAIN)).json(),
        lambda j: j["state"] == "running" and j["progress"].get("step", 0) > 0,
    )
    r = client.post(f"/v1/jobs/{long['id']}/cancel", headers=auth(TRAIN))
    assert r.json()["cancel_requested"] is True
    asked = time.monotonic()
    thread.join(timeout=120)
    assert time.monotonic() - asked < 5  # the next step, not the next heartbeat (10 s)
    assert outcome["state"] == "cancelled"
    final = client.get(f"/v1/jobs/{long['id']}", headers=auth(TRAIN)).json()
    assert final["state"] == "cancelled" and final["model_id"] is None
    assert not (settings.artifacts / "work" / long["id"]).exists()  # cleaned up
    done = client.post(f"/v1/jobs/{long['id']}/cancel", headers=auth(TRAIN))
    assert done.status_code == 200  # cancelling a cancelled job is a no-op


def test_a_cancel_during_the_export_is_honoured(client, settings, tmp_path, monkeypatch):
    """Issue 18 item 9: a cancel asked for while the bundle was being exported ended as
    'succeeded' with cancel_requested true, and its model was listed."""
    import mslm_core.export

    ds = upload_toy(client, tmp_path / "c")
    job = client.post(
        "/v1/jobs",
        headers=auth(TRAIN),
        json={"dataset_id": ds["id"], **JOB, "export": {"onnx": True}},
    ).json()
    real_export = mslm_core.export.export_bundle

    def export_then_cancel(*args, **kwargs):
        out = real_export(*args, **kwargs)
        asked = client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(TRAIN)).json()
        assert asked["state"] == "running" and asked["cancel_requested"] is True
        return out

    monkeypatch.setattr(mslm_core.export, "export_bundle", export_then_cancel)
    assert run_training_job(job["id"], settings) == "cancelled"
    final = client.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
    assert final["state"] == "cancelled" and final["model_id"] is None
    assert client.get("/v1/models", headers=auth(ANNOTATE)).json()["count"] == 0
    assert not list((settings.artifacts / "models").glob("*"))


def test_lost_worker_is_requeued_then_failed_never_left_running(client, settings, tmp_path):
    """The reaper: a running job whose heartbeat stopped is re-queued (and re-published)
    while attempts remain, then failed with the reason."""
    import datetime as dt

    from store.tables import utcnow

    ds = upload_toy(client, tmp_path / "c")
    job = client.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": ds["id"]}).json()
    state = client.app.state.mslm
    stale = utcnow() - dt.timedelta(seconds=settings.heartbeat_timeout_seconds + 5)
    for attempt in range(1, settings.max_attempts + 1):
        with state.factory() as s:
            row = s.get(Job, job["id"])
            row.state, row.heartbeat_at, row.attempts, row.worker = "running", stale, attempt, "w"
            s.commit()
        before = queue_depth(state.celery, TRAIN_QUEUE)
        with state.factory() as session:
            out = sweep(settings, session, state.celery)
        if attempt < settings.max_attempts:
            assert out["requeued"] == [job["id"]]
            assert queue_depth(state.celery, TRAIN_QUEUE) == before + 1
            assert (
                client.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["state"] == "queued"
            )
        else:
            assert out["failed"] == [job["id"]]
    final = client.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
    assert final["state"] == "failed" and "worker lost" in final["error"]


def test_every_lease_is_reaped_and_republished(client, settings):
    """The reaper's one pass covers every kind of leased work (worker.reaper.SWEPT): a
    training job, an evaluation, an annotation job being planned and an annotation chunk, each
    running with a stale heartbeat, are queued again and published to their task's queue;
    queued again with their messages lost (the queues purged), each is published again."""
    import datetime as dt

    from store.tables import AnnotationChunk, AnnotationJob, Evaluation, utcnow
    from worker.celery_app import ROUTES
    from worker.reaper import SWEPT

    state = client.app.state.mslm
    stale = utcnow() - dt.timedelta(hours=1)
    lease = {"state": "running", "heartbeat_at": stale, "attempts": 1, "worker": "dead"}
    with state.factory() as s:
        s.add(Job(id="job-1", **lease))
        s.add(Evaluation(id="eval-1", model_id="m", split="test", **lease))
        s.add(AnnotationJob(id="plan-1", model_id="m", chunk_size=10, **lease))
        s.add(
            AnnotationJob(
                id="bulk-1", model_id="m", chunk_size=10, state="running", planned_at=stale
            )
        )
        s.flush()  # the job before its chunk
        s.add(
            AnnotationChunk(
                job_id="bulk-1", seq=0, first=0, last=9, notes=10, published_at=stale, **lease
            )
        )
        s.commit()
    names = {"job-1", "eval-1", "plan-1", "bulk-1#0"}
    queues = sorted(set(ROUTES.values()))

    def depths() -> dict[str, int]:
        return {q: queue_depth(state.celery, q) or 0 for q in queues}

    def expected() -> dict[str, int]:
        routed = [ROUTES[task] for _, task in SWEPT]
        return {q: before[q] + routed.count(q) for q in queues}

    before = depths()
    with state.factory() as session:
        out = sweep(settings, session, state.celery)
    assert set(out["requeued"]) == names and out["failed"] == []
    assert depths() == expected()
    with state.factory() as session:  # not yet waited long: nothing published again
        assert sweep(settings, session, state.celery)["republished"] == []
    with state.celery.connection_for_write() as conn:
        for q in queues:
            conn.default_channel.queue_purge(q)
    with state.factory() as s:
        for cls in (Job, Evaluation, AnnotationJob, AnnotationChunk):
            s.query(cls).filter(cls.state == "queued").update({"published_at": stale})
        s.commit()
    before = depths()
    with state.factory() as session:
        out = sweep(settings, session, state.celery)
    assert set(out["republished"]) == names and out["requeued"] == []
    assert depths() == expected()


def test_hot_swap_drops_no_request_and_a_corrupt_bundle_is_refused(trained_service, tmp_path):
    settings, dataset, job_id = trained_service
    with TestClient(create_app(settings)) as c:
        first = c.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()["model_id"]
        job2 = c.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={"dataset_id": dataset["id"], **JOB, "epochs": 3, "seed": 9},
        ).json()
        assert run_training_job(job2["id"], settings) == "succeeded"
        second = c.get(f"/v1/jobs/{job2['id']}", headers=auth(TRAIN)).json()["model_id"]
        failures, seen = [], set()
        stop = threading.Event()

        def hammer() -> None:
            while not stop.is_set():
                r = c.post(
                    "/v1/annotate",
                    headers=auth(ANNOTATE),
                    json={"texts": ["The patient has breast cancer ."]},
                )
                if r.status_code != 200:
                    failures.append(r.status_code)
                else:
                    seen.add(r.json()["model"]["id"])

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        assert c.post(f"/v1/models/{second}/activate", headers=auth(ADMIN)).status_code == 200
        time.sleep(0.5)
        assert c.post(f"/v1/models/{first}/activate", headers=auth(ADMIN)).status_code == 200
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        assert failures == [] and seen == {first, second}

        # corrupt the second bundle: activation is refused, the first keeps serving
        bundle = settings.artifacts / "models" / second / "model.onnx"
        data = bytearray(bundle.read_bytes())
        data[len(data) // 2] ^= 0xFF
        bundle.write_bytes(bytes(data))
        c.app.state.mslm.models._models.pop(second, None)  # not cached: load from disk
        r = c.post(f"/v1/models/{second}/activate", headers=auth(ADMIN))
        assert r.status_code == 409 and "checksum mismatch" in r.json()["detail"]
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["cancer"]}).json()
        assert body["model"]["id"] == first
        assert c.delete(f"/v1/models/{first}", headers=auth(ADMIN)).status_code == 409  # served
        assert c.delete(f"/v1/models/{second}", headers=auth(ADMIN)).status_code == 204
        assert not (settings.artifacts / "models" / second).exists()


def test_readiness_says_what_is_missing(client):
    r = client.get("/readyz", headers=auth(ANNOTATE))
    assert r.status_code == 503
    assert r.json()["reasons"] == ["no model is loaded (none is active yet)"]
    # without a valid key: ready or not, and nothing more (issue 29 item 9)
    for headers in ({}, auth("not-a-key-but-long-enough")):
        r = client.get("/readyz", headers=headers)
        assert r.status_code == 503 and r.json() == {"status": "not ready"}
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["x"]})
    assert r.status_code == 503 and "no model is active" in r.json()["detail"]


def test_request_id_security_headers_and_docs(client):
    r = client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    generated = client.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
    assert generated.headers["x-request-id"] != "bad id with spaces"
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/docs/assets/swagger-ui-bundle.js" in docs.text
    assert "cdn" not in docs.text.lower() and "cdn" not in docs.headers["content-security-policy"]
    asset = client.get("/docs/assets/swagger-ui-bundle.js")
    assert asset.status_code == 200 and len(asset.content) > 100_000  # shipped, not fetched
    spec = client.get("/openapi.json").json()
    assert "/v1/annotate" in spec["paths"] and "HTTPBearer" in json.dumps(spec)
    missing = client.get("/v1/jobs/job-nope", headers=auth(TRAIN))
    assert missing.status_code == 404 and missing.json()["request_id"]


def test_first_start_without_keys_creates_and_prints_one_admin_key(tmp_path, tiny_encoder, capsys):
    settings = make_settings(tmp_path, tiny_encoder, api_keys="")
    with TestClient(create_app(settings)) as c:
        err = capsys.readouterr().err
        key = next(w for w in err.split() if w.startswith("mslm_"))
        assert c.get("/v1/jobs", headers=auth(key)).status_code == 200
    with TestClient(create_app(settings)):
        assert "mslm_" not in capsys.readouterr().err  # printed once, never again


def test_submitted_text_never_reaches_the_logs(trained_service, caplog):
    settings, _, _ = trained_service
    secret = "Zyxqvorin overdose in Mrs Examplename"
    with caplog.at_level(logging.DEBUG), TestClient(create_app(settings)) as c:
        c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [secret]})
        c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [secret] * 100})
        c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [secret], "oops": 1})
    assert "Zyxqvorin" not in caplog.text and "Examplename" not in caplog.text
    assert ANNOTATE not in caplog.text  # nor keys
    assert "/v1/annotate" in caplog.text  # the requests were logged
    # with who made them: the key's id (issue 18 item 10), never the key
    access = [r.getMessage() for r in caplog.records if r.name == "mslm.access"]
    assert access and all(re.search(r" key=key-[0-9a-f]{10} client=", m) for m in access), access
    on = Settings(**{**settings.model_dump(), "log_text": True})
    caplog.clear()
    with caplog.at_level(logging.INFO), TestClient(create_app(on)) as c:
        c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [secret]})
    assert "Zyxqvorin" in caplog.text  # only when MSLM_LOG_TEXT is on


def test_a_failed_job_records_the_reason(client, settings, tmp_path):
    ds = upload_toy(client, tmp_path / "c")
    job = client.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": ds["id"]}).json()
    shutil.rmtree(settings.artifacts / "datasets" / ds["id"])  # its files vanished
    assert run_training_job(job["id"], settings) == "failed"
    final = client.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
    assert final["state"] == "failed" and "train.tsv" in final["error"]


def test_import_model_command(trained_service, tmp_path, tiny_encoder, monkeypatch, capsys):
    """A bundle trained elsewhere joins a fresh store, verified, and can be served."""
    from mslm_core import cli
    from mslm_settings import get_settings

    settings, _, job_id = trained_service
    with TestClient(create_app(settings)) as c:
        model_id = c.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()["model_id"]
    bundle = settings.artifacts / "models" / model_id
    fresh = make_settings(tmp_path / "fresh", tiny_encoder)
    for key, value in service_env(fresh.home, tiny_encoder).items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    try:
        assert cli.main(["import-model", str(bundle), "--activate"]) == 0
        assert capsys.readouterr().out.strip() == model_id
        assert cli.main(["import-model", str(bundle)]) == 2  # already there: refused
    finally:
        get_settings.cache_clear()
    with TestClient(create_app(fresh)) as c:
        listed = c.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]
        assert [(m["id"], m["active"]) for m in listed] == [(model_id, True)]
        body = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["cancer"]}).json()
        assert body["model"]["id"] == model_id


def test_every_setting_is_documented():
    """Each setting has its row in the settings table (docs/settings.md)."""
    page = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
    rows = page.read_text(encoding="utf-8")
    missing = [
        f"MSLM_{name.upper()}"
        for name in Settings.model_fields
        if f"\n| `MSLM_{name.upper()}` |" not in rows
    ]
    assert missing == []


def test_the_docs_give_the_batch_bound_that_int8_on_cpu_uses():
    """docs/settings.md and docs/api.md name the micro-batch bound of int8 on CPU: the
    engine's, one step's windows."""
    from mslm_core.predict import AnnotationPlan

    docs = Path(__file__).resolve().parents[1] / "docs"
    settings = re.search(
        r"int8 on CPU: at most (\d+), one step's windows",
        (docs / "settings.md").read_text(encoding="utf-8"),
    )
    api = re.search(
        r"on CPU: (\d+) texts a batch at most", (docs / "api.md").read_text(encoding="utf-8")
    )
    assert settings and api
    assert int(settings[1]) == int(api[1]) == AnnotationPlan.STEP_WINDOWS


def test_unsafe_settings_are_refused_at_start_with_the_variable_name(tmp_path, tiny_encoder):
    from pydantic import ValidationError

    from mslm_core.errors import ConfigError

    # keys are the API's: it refuses them when it is built (a worker never reads them)
    short = make_settings(tmp_path, tiny_encoder, api_keys="short:admin")
    with pytest.raises(ConfigError, match="MSLM_API_KEYS: entry 1: the key is shorter than 16"):
        create_app(short)
    root = make_settings(tmp_path, tiny_encoder, api_keys="x:admin,0123456789abcdefgh:root")
    with pytest.raises(ConfigError, match=r"MSLM_API_KEYS: entry 1: .*|unknown scope"):
        create_app(root)
    with pytest.raises(ValidationError, match="MSLM_BASE_MODEL"):
        make_settings(tmp_path, tiny_encoder, base_model="biobert")
    with pytest.raises(ValidationError, match="HEARTBEAT_TIMEOUT"):
        make_settings(tmp_path, tiny_encoder, heartbeat_seconds=100)
    ok = make_settings(
        tmp_path,
        tiny_encoder,
        database_url="postgresql+psycopg://u:old@db/x",
        database_password="p@ss/word",
    )
    assert ok.sqlalchemy_url == "postgresql+psycopg://u:p%40ss%2Fword@db/x"


def test_a_cache_of_one_serves_a_model_that_is_not_active(trained_service):
    """Issue 18 item 1: the model loaded for a request was evicted before the request could
    use it (the active one is never evicted), and that request never answered."""
    settings, dataset, _ = trained_service
    settings = settings.model_copy(update={"model_cache_size": 1})
    with TestClient(create_app(settings)) as c:
        active = c.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"]
        job = c.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={"dataset_id": dataset["id"], **JOB, "epochs": 1, "seed": 12},
        ).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        other = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
        answers: list = []
        for model in (other, active, other):
            body = {"texts": ["cancer"], "model": model}
            thread = threading.Thread(
                target=lambda body=body: answers.append(
                    c.post("/v1/annotate", headers=auth(ANNOTATE), json=body)
                ),
                daemon=True,
            )
            thread.start()
            thread.join(timeout=30)
            assert not thread.is_alive(), f"annotate with model {model} never answered"
        assert [r.status_code for r in answers] == [200, 200, 200]
        assert [r.json()["model"]["id"] for r in answers] == [other, active, other]


def test_activation_reaches_every_replica(trained_service):
    """Two API replicas on one store: a model activated through one is served by the other
    within MSLM_MODEL_POLL_SECONDS, with no restart."""
    settings, dataset, job_id = trained_service
    with TestClient(create_app(settings)) as a, TestClient(create_app(settings)) as b:
        first = a.get(f"/v1/jobs/{job_id}", headers=auth(TRAIN)).json()["model_id"]
        assert a.post(f"/v1/models/{first}/activate", headers=auth(ADMIN)).status_code == 200
        job2 = a.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={"dataset_id": dataset["id"], **JOB, "epochs": 2, "seed": 11},
        ).json()
        assert run_training_job(job2["id"], settings) == "succeeded"
        second = a.get(f"/v1/jobs/{job2['id']}", headers=auth(TRAIN)).json()["model_id"]

        def served_by_b() -> str:
            r = b.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["cancer"]})
            return r.json()["model"]["id"]

        wait_for(served_by_b, lambda m: m == first, timeout=10)
        assert a.post(f"/v1/models/{second}/activate", headers=auth(ADMIN)).status_code == 200
        started = time.monotonic()
        wait_for(served_by_b, lambda m: m == second, timeout=10, every=0.1)
        assert time.monotonic() - started < settings.model_poll_seconds + 3
        assert b.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"] == second

        # issue 18 item 2: a deleted model that a replica still held answered with 200
        def annotate_with(client, model_id):
            body = {"texts": ["cancer"], "model": model_id}
            return client.post("/v1/annotate", headers=auth(ANNOTATE), json=body).status_code

        assert annotate_with(b, first) == 200  # b holds it (not served, still cached)
        assert a.delete(f"/v1/models/{first}", headers=auth(ADMIN)).status_code == 204
        assert annotate_with(a, first) == 404  # at once where it was deleted
        wait_for(lambda: annotate_with(b, first), lambda code: code == 404, timeout=10)


def test_openapi_declares_metrics_as_text(client):
    """Issue 19: /metrics was declared application/json; it is Prometheus text."""
    declared = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]
    assert list(declared["200"]["content"]) == ["text/plain; version=0.0.4"]
    served = client.get("/metrics")
    assert served.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_openapi_declares_every_error_as_problem_details(client):
    """Issue 19: the document declared FastAPI's validation error, and no 401/403/404/409/413."""
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ProblemDetails" in schemas
    for path, operations in doc["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, op in operations.items():
            for status in ("401", "403", "422"):
                content = op["responses"][status]["content"]
                assert list(content) == ["application/problem+json"], (method, path, status)
    annotate = doc["paths"]["/v1/annotate"]["post"]["responses"]
    assert {"404", "413", "503"} <= set(annotate)
    assert {"404", "409"} <= set(doc["paths"]["/v1/models/{model_id}"]["delete"]["responses"])


SPANISH = (
    "Paciente de 67 años con dolor torácico opresivo de dos horas de evolución, disnea y "
    "diaforesis. Antecedentes de hipertensión arterial y diabetes mellitus tipo 2."
)
SHORTHAND = "Pt c/o SOB and CP x2d, denies N/V. Hx HTN, HLD. NKDA. VS: BP 168/94, HR 102."


def test_a_text_in_another_language_is_annotated_with_a_warning_or_refused(trained_service):
    settings, _, _ = trained_service
    with TestClient(create_app(settings)) as c:
        body = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [SPANISH, SHORTHAND, "fever"]}
        ).json()
        assert body["model"]["language"] == "en"
        spanish, shorthand, short = body["results"]
        assert spanish["language"]["code"] == "es" and spanish["language"]["probability"] > 0.9
        assert "written in es" in spanish["warnings"][0] and "reads en" in spanish["warnings"][0]
        # clinical shorthand is English; too few letters: no verdict
        assert shorthand["warnings"] == [] and shorthand["language"] is None
        assert short["warnings"] == [] and short["language"] is None
    refusing = settings.model_copy(update={"refuse_other_languages": True})
    with TestClient(create_app(refusing)) as c:
        refused = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [SHORTHAND, SPANISH]}
        )
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["type"] == "urn:mslm:problem:other-language"
        assert [e["field"] for e in problem["errors"]] == ["body.texts.1"]
        assert SPANISH[:20] not in refused.text  # the text itself is not echoed
        fine = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [SHORTHAND]})
        assert fine.status_code == 200


def test_max_train_sentences_is_a_job_option(client, settings, tmp_path):
    """Set over HTTP like every other job option: the job trains on the first K
    sentences — fewer steps than the whole dataset takes, the rest alike."""
    dataset = upload_toy(client, tmp_path / "corpus")
    steps = {}
    for cut in (None, 2):
        body = {"dataset_id": dataset["id"], **JOB, "epochs": 1, "patience": 0}
        if cut:
            body["max_train_sentences"] = cut
        job = client.post("/v1/jobs", headers=auth(TRAIN), json=body).json()
        assert job["params"].get("max_train_sentences") == cut
        assert run_training_job(job["id"], settings) == "succeeded"
        done = client.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
        steps[cut] = done["progress"]["steps"]
    assert steps[2] == 1 < steps[None]  # 2 sentences, 2 a batch: one step
    bad = {"dataset_id": dataset["id"], "max_train_sentences": 0}
    refused = client.post("/v1/jobs", headers=auth(TRAIN), json=bad)
    assert refused.status_code == 422 and "max_train_sentences" in refused.text
