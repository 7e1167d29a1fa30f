"""Issue 21: vocabularies are data a site loads — ``POST /v1/vocabularies`` and ``mslm vocab
import`` check, index and store them; activating one links every replica's answers to it; the
deployment's own (MSLM_VOCABULARY, the packaged MeSH vocabulary by default) is ``default``.
Served on PostgreSQL, two replicas on one store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from service_helpers import ADMIN, ANNOTATE, JOB, TRAIN, auth, make_settings, upload_toy, wait_for
from test_service_e2e import postgres_database

from api.main import create_app
from worker.runner import run_training_job

TEXT = "The patient has breast cancer . Aspirin reduces fever ."
SITE_TSV = (
    "# Site terms: made for this test\n"
    "D001943\tBreast Neoplasms\tbreast cancer\n"
    "D001241\tAspirin\tacetylsalicylic acid\n"
    "D005334\tFever\tpyrexia\n"
)
URL = "https://terms.example.org/concept/{id}"


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_encoder):
    """Settings of an install on PostgreSQL with a trained, active toy model."""
    tmp = tmp_path_factory.mktemp("vocab")
    with postgres_database() as url:
        settings = make_settings(tmp, tiny_encoder, database_url=url, vocabulary="none")
        with TestClient(create_app(settings)) as c:
            dataset = upload_toy(c, tmp / "corpus")
            job = c.post(
                "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB}
            ).json()
            assert run_training_job(job["id"], settings) == "succeeded"
            model_id = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
            assert c.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN)).status_code == 200
        yield settings


def _concepts(client: TestClient) -> dict[str, dict | None]:
    response = client.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [TEXT]})
    assert response.status_code == 200, response.text
    return {e["text"]: e.get("concept") for e in response.json()["results"][0]["entities"]}


def _upload(client: TestClient, name: str, content: str, key: str = ADMIN, **form):
    return client.post(
        "/v1/vocabularies",
        headers=auth(key),
        files={"file": (name, content.encode(), "text/tab-separated-values")},
        data=form,
    )


def test_import_activate_follow_and_delete_on_two_replicas(served):
    with TestClient(create_app(served)) as a, TestClient(create_app(served)) as b:
        assert all(c is None for c in _concepts(a).values())  # MSLM_VOCABULARY=none
        assert _upload(a, "site.tsv", SITE_TSV, key=ANNOTATE).status_code == 403
        response = _upload(a, "site.tsv", SITE_TSV, url_pattern=URL)
        assert response.status_code == 201, response.text
        row = response.json()
        assert (row["name"], row["format"], row["concepts"], row["names"]) == (
            "Site terms",
            "tsv",
            3,
            6,
        )
        assert row["source"] == "made for this test" and row["active"] is False
        assert row["filename"] == "site.tsv" and row["url_pattern"] == URL
        listed = a.get("/v1/vocabularies", headers=auth(ANNOTATE)).json()
        assert listed["count"] == 1 and listed["data"][0]["id"] == row["id"]
        assert listed["linking"] == {
            "id": "default",
            "origin": "none",
            "name": None,
            "concepts": 0,
            "rerank": None,
        }

        linking = a.post(f"/v1/vocabularies/{row['id']}/activate", headers=auth(ADMIN))
        assert linking.status_code == 200, linking.text
        assert linking.json() == {
            "id": row["id"],
            "origin": "store",
            "name": "Site terms",
            "concepts": 3,
            "rerank": None,
        }
        concepts = _concepts(a)
        confidence = concepts["breast cancer"].pop("confidence")
        assert 0.5 < confidence <= 1.0  # no calibration beside it: the packaged one's model
        assert concepts["breast cancer"] == {
            "id": "D001943",
            "name": "Breast Neoplasms",
            "score": 1.0,
            "vocabulary": "Site terms",
            "url": "https://terms.example.org/concept/D001943",
            "code": "D001943",
            "concept_id": None,  # not an OMOP vocabulary
            "source_id": None,
        }
        assert concepts["Aspirin"]["id"] == "D001241"
        # the other replica follows the store within its poll interval
        wait_for(lambda: _concepts(b), lambda c: c["breast cancer"] is not None, timeout=30)
        assert a.get(f"/v1/vocabularies/{row['id']}", headers=auth(ANNOTATE)).json()["active"]

        # the one in use cannot be deleted; 'default' goes back to the deployment's own
        assert a.delete(f"/v1/vocabularies/{row['id']}", headers=auth(ADMIN)).status_code == 409
        back = b.post("/v1/vocabularies/default/activate", headers=auth(ADMIN))
        assert back.json() == {
            "id": "default",
            "origin": "none",
            "name": None,
            "concepts": 0,
            "rerank": None,
        }
        wait_for(lambda: _concepts(a), lambda c: c["breast cancer"] is None, timeout=30)
        folder = served.artifacts / "vocabularies" / row["id"]
        assert (folder / "vocabulary.tsv").is_file() and any((folder / "index").iterdir())
        assert a.delete(f"/v1/vocabularies/{row['id']}", headers=auth(ADMIN)).status_code == 204
        assert not folder.exists()
        assert a.get(f"/v1/vocabularies/{row['id']}", headers=auth(ANNOTATE)).status_code == 404
        gone = a.post(f"/v1/vocabularies/{row['id']}/activate", headers=auth(ADMIN))
        assert gone.status_code == 404


def test_a_bad_vocabulary_is_refused_with_file_line_and_field_and_stores_nothing(served):
    with TestClient(create_app(served)) as c:
        before = c.get("/v1/vocabularies", headers=auth(ANNOTATE)).json()["count"]
        bad = _upload(c, "site.tsv", "D1\tok\nD 2\tbad id\nD3\t\n")
        assert bad.status_code == 422, bad.text
        issues = [(i["file"], i["line"], i["field"]) for i in bad.json()["errors"]]
        assert issues == [("site.tsv", 2, "id"), ("site.tsv", 3, "name")]
        obo = _upload(c, "terms.obo", "[Term]\nid: X:1\nname: one\nsynonym: unquoted\n")
        assert obo.status_code == 422
        assert [(i["file"], i["line"], i["field"]) for i in obo.json()["errors"]] == [
            ("terms.obo", 4, "synonym")
        ]
        url = _upload(c, "site.tsv", SITE_TSV, url_pattern="javascript:alert({id})")
        assert url.status_code == 422
        assert c.get("/v1/vocabularies", headers=auth(ANNOTATE)).json()["count"] == before
        leftovers = [p.name for p in (served.artifacts / "vocabularies").iterdir()]
        assert all(not name.startswith(".staging") for name in leftovers)
        good = _upload(c, "terms.obo", '[Term]\nid: X:1\nname: one\nsynonym: "uno" EXACT []\n')
        assert good.status_code == 201 and good.json()["format"] == "obo"
        assert good.json()["name"] == "terms"  # the file's own name when it gives none


def test_mslm_vocab_import_stores_and_activates(tmp_path, tiny_encoder):
    settings = make_settings(tmp_path, tiny_encoder, vocabulary="none")
    env = {
        **os.environ,
        "MSLM_HOME": str(settings.home),
        "MSLM_API_KEYS": "",
        "MSLM_BASE_MODELS": f"tiny={tiny_encoder}",
        "MSLM_BASE_MODEL": "tiny",
    }
    site = tmp_path / "site.tsv"
    site.write_text(SITE_TSV, encoding="utf-8")
    cmd = [sys.executable, "-m", "mslm_core.cli", "vocab", "import", str(site), "--activate"]
    done = subprocess.run([*cmd, "--url", URL], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["name"] == "Site terms" and printed["concepts"] == 3 and printed["active"]
    with TestClient(create_app(settings)) as c:
        listed = c.get("/v1/vocabularies", headers=auth(ADMIN)).json()
    assert listed["linking"]["id"] == printed["id"] and listed["linking"]["origin"] == "store"
    site.write_text("D1\tok\nD 2\tbad id\n", encoding="utf-8")
    bad = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "site.tsv:2 (id)" in bad.stderr
    # 'mesh': the packaged vocabulary, stored like any other (for a re-rank of it, say)
    mesh = subprocess.run([*cmd[:5], "mesh"], env=env, capture_output=True, text=True)
    assert mesh.returncode == 0, mesh.stderr
    printed = json.loads(mesh.stdout.strip().splitlines()[-1])
    assert printed["name"] == "MeSH" and printed["concepts"] > 30_000 and not printed["active"]


def test_a_vocabulary_that_cannot_be_read_any_more_leaves_the_default_in_place(served):
    """The files of the active vocabulary are gone (a bad restore): the replica starts with
    the deployment's own, says why, and follows again once one can be built."""
    with TestClient(create_app(served)) as c:
        row = _upload(c, "site.tsv", SITE_TSV, activate="true").json()
        assert row["active"] and _concepts(c)["breast cancer"]["id"] == "D001943"
    (served.artifacts / "vocabularies" / row["id"] / "vocabulary.tsv").unlink()
    with TestClient(create_app(served)) as c:
        listed = c.get("/v1/vocabularies", headers=auth(ANNOTATE)).json()
        assert listed["linking"]["origin"] == "none"
        assert _concepts(c)["breast cancer"] is None
        assert c.post("/v1/vocabularies/default/activate", headers=auth(ADMIN)).status_code == 200
        assert c.delete(f"/v1/vocabularies/{row['id']}", headers=auth(ADMIN)).status_code == 204


@pytest.mark.integration
def test_mslm_vocab_import_rerank_is_served_without_torch(tmp_path, tiny_encoder):
    """``--rerank`` exports MiniLM beside the vocabulary; the service reads it with ONNX
    Runtime (the API image has no torch) and says so."""
    settings = make_settings(tmp_path, tiny_encoder, vocabulary="none")
    env = {**os.environ, "MSLM_HOME": str(settings.home), "MSLM_API_KEYS": ""}
    site = tmp_path / "site.tsv"
    site.write_text(SITE_TSV, encoding="utf-8")
    cmd = [sys.executable, "-m", "mslm_core.cli", "vocab", "import", str(site), "--rerank"]
    done = subprocess.run([*cmd, "--activate"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["rerank"] == "minilm"
    folder = settings.artifacts / "vocabularies" / printed["id"] / "rerank"
    assert {p.name for p in folder.iterdir()} == {
        "encoder.onnx",
        "tokenizer.json",
        "names.npy",
        "rerank.json",
    }
    with TestClient(create_app(settings)) as c:
        linking = c.get("/v1/vocabularies", headers=auth(ADMIN)).json()["linking"]
        assert linking["rerank"] == "minilm" and linking["id"] == printed["id"]
        linker = c.app.state.mslm.models.vocabularies.linker
        assert linker.candidates(["pyrexia"])[0][0].score == 1.0  # exact stays exact
        assert linker.candidates(["high temperature"])[0][0].id == "D005334"
