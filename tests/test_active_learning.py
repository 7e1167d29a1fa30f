"""Datasets that grow (versions, the unlabelled pool, jobs on a version) and active learning
(uncertainty of notes, diversity, POST /v1/datasets/{id}/suggest, `mslm suggest`)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import JOB, TRAIN, TRAIN2, auth, make_settings, upload_toy

from api.main import create_app
from mslm_core import active
from mslm_core.predict.confidence import RawPredictions
from worker.runner import run_training_job

# -- uncertainty of notes -------------------------------------------------------------------
SURE = [0.0, 0.0, 1.0]  # B, I, O: certainly outside any mention
MAYBE = [0.45, 0.1, 0.45]  # a close call between B and O


class ScriptedPredictor:
    """A predictor whose tag probabilities are set by the word: ``maybe`` is a close call, any
    other word certainly O; ``span`` opens a mention whose type probabilities are ``types``."""

    pack = False

    def __init__(self, types=(0.5, 0.5), temperatures=(1.0, 1.0)):
        self.types = np.array([types], np.float32)
        self.temperatures = temperatures
        self.seen: list[list[str]] = []

    def raw_predictions(self, sentences, groups=None):
        self.seen += [list(s) for s in sentences]
        word_probs, spans = [], []
        for s, words in enumerate(sentences):
            rows = [MAYBE if w == "maybe" else SURE for w in words]
            for j, w in enumerate(words):
                if w == "span":
                    rows[j] = [0.9, 0.05, 0.05]
                    spans.append((s, j, j + 1))
            word_probs.append(np.array(rows, np.float32))
        type_probs = np.repeat(self.types, len(spans), axis=0)
        return RawPredictions(word_probs, spans, type_probs)


def test_a_note_with_a_close_call_is_more_uncertain_by_every_strategy():
    predictor = ScriptedPredictor()
    texts = ["all words are plain here .", "all words maybe plain here .", ""]
    for strategy in active.STRATEGIES:
        sure, unsure, empty = active.uncertainties(predictor, texts, strategy)
        assert 0.0 <= sure < unsure <= 1.0, strategy
        assert empty == 0.0
    # least confidence: 1 - the geometric mean of the chosen probabilities (6 words, one 0.45)
    _, unsure, _ = active.uncertainties(predictor, texts, "least_confidence")
    assert unsure == pytest.approx(1 - 0.45 ** (1 / 6), abs=1e-6)
    # margin: the closest call decides, whatever the note's length
    _, unsure, _ = active.uncertainties(predictor, texts, "margin")
    assert unsure == pytest.approx(1.0)  # 0.45 vs 0.45
    # entropy: the mean normalised entropy of the decisions
    _, unsure, _ = active.uncertainties(predictor, texts, "entropy")
    h = -(0.45 * math.log(0.45) * 2 + 0.1 * math.log(0.1)) / math.log(3)
    assert unsure == pytest.approx(h / 6, abs=1e-5)


def test_a_notes_sentences_are_read_together_and_its_type_decisions_count():
    # two sentences of one note: its uncertainty is over both; the span's type is a decision
    one_type = active.uncertainties(
        ScriptedPredictor(types=(0.99, 0.01)), ["A span here. Plain words."], "margin"
    )
    close_type = active.uncertainties(
        ScriptedPredictor(types=(0.5, 0.5)), ["A span here. Plain words."], "margin"
    )
    assert close_type[0] == pytest.approx(1.0) and one_type[0] < 0.9
    predictor = ScriptedPredictor()
    active.uncertainties(predictor, ["A span here. Plain words."], "entropy")
    assert len(predictor.seen) == 2  # cut into sentences, scored as one note


def test_temperatures_move_the_uncertainty():
    texts = ["all words maybe plain here ."]
    cold = active.uncertainties(ScriptedPredictor(temperatures=(0.5, 1.0)), texts, "entropy")
    warm = active.uncertainties(ScriptedPredictor(temperatures=(2.0, 1.0)), texts, "entropy")
    assert warm[0] > cold[0]


def test_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="least_confidence"):
        active.uncertainties(ScriptedPredictor(), ["x"], "confusion")


def test_ten_near_identical_notes_are_not_all_suggested_first():
    twin = "Patient denies chest pain and shortness of breath on exertion today"
    texts = [f"{twin} {k}" for k in range(10)] + [
        "Metformin 500 mg twice daily for type 2 diabetes",
        "CT of the abdomen shows a 2 cm hepatic lesion",
        "Family history of breast cancer in her mother",
    ]
    scores = [0.9] * 10 + [0.6, 0.55, 0.5]
    by_uncertainty = active.rank(texts, scores, limit=4, diversity=0.0)
    assert [s.index for s in by_uncertainty] == [0, 1, 2, 3]
    diverse = active.rank(texts, scores, limit=4, diversity=0.5)
    picked = [s.index for s in diverse]
    assert picked[0] == 0 and set(picked[1:]) == {10, 11, 12}
    assert all(s.similar_to is None or s.similar_to in picked for s in diverse)
    # everything ranked once, deterministically
    assert sorted(s.index for s in active.rank(texts, scores)) == list(range(13))
    assert active.rank(texts, scores) == active.rank(texts, scores)
    with pytest.raises(ValueError, match="diversity"):
        active.rank(texts, scores, diversity=1.5)


# -- datasets that grow ---------------------------------------------------------------------
@pytest.fixture()
def settings(tmp_path, tiny_encoder):
    return make_settings(tmp_path, tiny_encoder)


def _documents(client, dataset_id, body, key=TRAIN):
    return client.post(f"/v1/datasets/{dataset_id}/documents", headers=auth(key), json=body)


def test_a_dataset_grows_in_versions_and_a_job_records_the_one_it_trained_on(settings, tmp_path):
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus")
        assert dataset["version"] == 1 and dataset["unlabelled"] == 0
        first = dataset["stats"]["train"]["sentences"]
        text = "Aspirin caused a rash ."
        r = _documents(
            c,
            dataset["id"],
            {
                "documents": [
                    {
                        "id": "note-1",
                        "text": text,
                        "entities": [{"start": 0, "end": 7, "label": "Chemical"}],
                    },
                    {"id": "note-2", "text": "Cough resolved after two days ."},
                    {"id": "train-1", "text": "Nothing to see .", "entities": []},
                ],
                "remove": ["train-2"],
            },
        )
        assert r.status_code == 201, r.text
        v2 = r.json()
        assert v2["version"] == 2
        assert v2["change"] == {
            "source": "api",
            "added": 2,
            "replaced": 1,
            "removed": 1,
            "documents": first,  # +note-1, train-1 replaced, -train-2
            "unlabelled": 1,
        }
        assert v2["stats"]["train"]["sentences"] == first
        now = c.get(f"/v1/datasets/{dataset['id']}", headers=auth(TRAIN)).json()
        assert now["version"] == 2 and now["unlabelled"] == 1
        assert now["files"]["train"]["documents"] == first
        assert now["stats"]["test"] == dataset["stats"]["test"]  # held-out splits never change

        job = c.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB})
        assert job.status_code == 202, job.text
        job = job.json()
        assert job["datasets"][0]["version"] == 2

        # labelling the pool's note makes version 3; version 2 stays, a job trained on it
        r = _documents(
            c,
            dataset["id"],
            {
                "documents": [
                    {
                        "id": "note-2",
                        "text": "Cough resolved after two days .",
                        "entities": [{"start": 0, "end": 5, "label": "Disease"}],
                    }
                ]
            },
        )
        assert r.json()["change"]["replaced"] == 1 and r.json()["change"]["unlabelled"] == 0
        r = _documents(c, dataset["id"], {"remove": ["note-1"]})
        assert r.json()["version"] == 4
        versions = c.get(f"/v1/datasets/{dataset['id']}/versions", headers=auth(TRAIN)).json()
        assert [v["version"] for v in versions["data"]] == [4, 3, 2, 1]
        kept = {v["version"]: v["kept"] for v in versions["data"]}
        assert kept == {4: True, 3: False, 2: True, 1: True}  # 3: no job trained on it
        folder = settings.artifacts / "datasets" / dataset["id"]
        assert not (folder / "v3").exists() and (folder / "v2" / "train.jsonl").exists()

        # the job trains on version 2's documents, not the latest
        assert run_training_job(job["id"], settings) == "succeeded"
        done = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
        assert done["state"] == "succeeded"
        manifest = json.loads(
            (settings.artifacts / "models" / done["model_id"] / "manifest.json").read_text()
        )
        assert "v2/train.jsonl" in json.dumps(manifest)


def test_a_bad_change_names_its_field_and_stores_nothing(settings, tmp_path):
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus")
        bad = [
            (
                {
                    "documents": [
                        {"id": "a", "text": "Aspirin .", "entities": []},
                        {
                            "id": "b",
                            "text": "Aspirin and rash .",
                            "entities": [
                                {"start": 0, "end": 7, "label": "Chemical"},
                                {"start": 3, "end": 11, "label": "Chemical"},
                            ],
                        },
                    ]
                },
                "documents[1]",
            ),
            (
                {"documents": [{"id": "a", "text": "x", "entities": []}] * 2},
                "given twice",
            ),
            ({"remove": ["nope"]}, "remove[0]"),
            (
                {
                    "documents": [
                        {
                            "id": "a",
                            "text": "ab",
                            "entities": [{"start": 0, "end": 9, "label": "X"}],
                        }
                    ]
                },
                "documents[0]",
            ),
            ({"documents": [{"id": "a", "text": "   "}]}, "text has no words"),
        ]
        for body, where in bad:
            r = _documents(c, dataset["id"], body)
            assert r.status_code == 422, (body, r.text)
            assert where in r.text, r.text
        versions = c.get(f"/v1/datasets/{dataset['id']}/versions", headers=auth(TRAIN)).json()
        assert versions["count"] == 1
        # another team's key sees no such dataset
        r = _documents(c, dataset["id"], {"remove": ["train-1"]}, key=TRAIN2)
        assert r.status_code == 404


def test_a_dataset_with_no_labelled_document_cannot_train(settings, tmp_path):
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus")
        ids = [f"train-{k}" for k in range(1, dataset["stats"]["train"]["sentences"] + 1)]
        r = _documents(
            c, dataset["id"], {"documents": [{"id": "p", "text": "Pool note ."}], "remove": ids}
        )
        assert r.status_code == 201 and r.json()["change"]["documents"] == 0
        job = c.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB})
        assert job.status_code == 422 and "no labelled document" in job.text


def test_suggest_ranks_the_pool_with_the_served_model(settings, tmp_path):
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus")
        job = c.post(
            "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB}
        ).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        model_id = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
        pool = [
            {"id": f"p{k}", "text": text}
            for k, text in enumerate(
                [
                    "Cisplatin induced nephrotoxicity in rats .",
                    "Cisplatin induced nephrotoxicity in rats !",
                    "The weather was fine .",
                    "Lithium and haloperidol were given for mania .",
                ]
            )
        ]
        assert _documents(c, dataset["id"], {"documents": pool}).status_code == 201
        r = c.post(
            f"/v1/datasets/{dataset['id']}/suggest",
            headers=auth(TRAIN),
            json={"limit": 3, "strategy": "entropy", "diversity": 0.3, "model": model_id},
        )
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["model"] == model_id
        assert out["pool"] == 4 and out["scored"] == 4 and out["version"] == 2
        assert len(out["data"]) == 3 and len({s["id"] for s in out["data"]}) == 3
        assert all(0.0 <= s["uncertainty"] <= 1.0 for s in out["data"])
        scores = [s["score"] for s in out["data"]]
        assert scores == sorted(scores, reverse=True)
        by_id = {p["id"]: p["text"] for p in pool}
        assert all(by_id[s["id"]] == s["text"] for s in out["data"])
        # with diversity off, the order is by uncertainty alone
        r = c.post(
            f"/v1/datasets/{dataset['id']}/suggest",
            headers=auth(TRAIN),
            json={"limit": 4, "strategy": "margin", "diversity": 0.0, "model": model_id},
        ).json()
        u = [s["uncertainty"] for s in r["data"]]
        assert u == sorted(u, reverse=True)
        r = c.post(
            f"/v1/datasets/{dataset['id']}/suggest",
            headers=auth(TRAIN),
            json={"strategy": "confusion"},
        )
        assert r.status_code == 422


def test_a_version_folder_left_by_a_dead_process_does_not_block_the_next_change(settings, tmp_path):
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus")
        orphan = settings.artifacts / "datasets" / dataset["id"] / "v2"
        orphan.mkdir()
        (orphan / "train.jsonl").write_text("half written", encoding="utf-8")
        r = _documents(c, dataset["id"], {"documents": [{"id": "n", "text": "Pool note ."}]})
        assert r.status_code == 201 and r.json()["version"] == 2
        assert "half written" not in (orphan / "train.jsonl").read_text(encoding="utf-8")
        assert (orphan / "pool.jsonl").exists()


def test_ranking_ten_thousand_documents_keeps_one_row_at_a_time():
    """Issue 58 item 6: suggest on 10,000 documents built a dense 10,000 × 10,000 matrix
    (2.97 GB) on the event loop. The ranking reads the rows of the texts it picks only; the
    order is the one the whole matrix gave."""
    import random
    import resource

    from mslm_core.active import Similarities, rank

    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(10_000)]
    scores = [rng.random() for _ in texts]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ranked = rank(texts, scores, limit=10, diversity=0.5)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert len(ranked) == 10 and grown_mb < 300, grown_mb  # 10,000² float64: 800 MB
    small = texts[:300]
    sims = Similarities(small)
    dense = np.stack([sims.row(i) for i in range(len(small))])
    assert np.allclose(dense, dense.T) and np.all(np.diag(dense) == 0)
    top = rank(small, scores[:300], limit=20, diversity=0.7)
    assert top[0].index == int(np.argmax(np.asarray(scores[:300])))  # nothing picked yet
    # each next pick: the best of uncertainty against closeness to those picked before
    picked = [top[0].index]
    closest = sims.row(picked[0])
    for s in top[1:3]:
        left = [i for i in range(300) if i not in picked]
        best = max(left, key=lambda i: (0.3 * scores[i] - 0.7 * closest[i], -i))
        assert s.index == best
        picked.append(best)
        closest = np.maximum(closest, sims.row(best))
