"""Issue 28 through the service: jobs on several datasets with type maps and weights (REST,
store, worker), the first start that trains the clinical model (or falls back and says why),
and the corpus cache carried to a machine without internet."""

from __future__ import annotations

import json
import logging
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_helpers import ADMIN, ANNOTATE, JOB, TRAIN, auth, make_settings, upload_notes

from api import bootstrap as first_start
from api.main import create_app
from mslm_core.clinical_types import CLINICAL_TYPES
from mslm_core.corpora import clinical, pinned
from mslm_core.errors import ConfigError
from mslm_core.inference import EntityExtractor
from store.db import session_factory
from store.tables import Dataset, Job, Model
from worker import bulk as bulk_runner
from worker.runner import run_evaluation, run_training_job

# corpus A: chemicals and diseases; corpus B: findings, body sites and procedures that may be
# tests or treatments — the same words, two annotation schemes
A = [
    ("Aspirin reduces fever .", [(0, 7, "Chemical"), (16, 21, "Disease")]),
    ("Cisplatin caused renal failure .", [(0, 9, "Chemical"), (17, 30, "Disease")]),
    ("The liver was normal .", []),
]
B = [
    ("Pain in the liver after biopsy .", [(0, 4, "Sign"), (12, 17, "Body"), (24, 30, "Proc")]),
    ("Fever and liver biopsy .", [(0, 5, "Sign"), (10, 15, "Body"), (16, 22, "Proc")]),
    ("Aspirin was given for pain .", [(22, 26, "Sign")]),
]
MAP_A = {"Chemical": "Drug", "Disease": "Problem"}
MAP_B = {"Sign": "Problem", "Body": "Anatomy", "Proc": ["Procedure", "Test"]}


def jsonl(rows: list) -> bytes:
    return "".join(
        json.dumps(
            {"text": t, "entities": [{"start": a, "end": b, "label": lab} for a, b, lab in ents]}
        )
        + "\n"
        for t, ents in rows
    ).encode()


def upload(client: TestClient, rows: list, name: str) -> dict:
    files = {
        split: (f"{split}.jsonl", jsonl(rows), "application/jsonl")
        for split in ("train", "dev", "test")
    }
    r = client.post("/v1/datasets", headers=auth(TRAIN), files=files, data={"name": name})
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture()
def settings(tmp_path, tiny_encoder):
    return make_settings(tmp_path, tiny_encoder)


def test_a_job_on_several_datasets_trains_and_reports_each(settings):
    with TestClient(create_app(settings)) as c:
        a, b = upload(c, A, "a"), upload(c, B, "b")
        datasets = [
            {"id": a["id"], "type_map": MAP_A, "weight": 0.5},
            {"id": b["id"], "type_map": MAP_B},
        ]

        def post(body: dict):
            return c.post("/v1/jobs", headers=auth(TRAIN), json={**JOB, "epochs": 3, **body})

        # what is wrong is said with its field
        r = post({"datasets": [datasets[0], {"id": b["id"], "type_map": {"Signs": "Problem"}}]})
        assert r.status_code == 422
        assert (
            f"datasets[1].type_map.Signs: dataset {b['id']} has no type 'Signs'"
            in r.json()["detail"]
        )
        assert "Body, Proc, Sign" in r.json()["detail"]
        r = post({"datasets": [datasets[0], {"id": a["id"]}]})
        assert r.status_code == 422 and "datasets[1].id" in r.json()["detail"]
        r = post({"datasets": [{"id": a["id"], "type_map": {"Chemical": None, "Disease": None}}]})
        assert r.status_code == 422 and "drops every type" in r.json()["detail"]
        r = post({"datasets": [{"id": a["id"], "type_map": {"Chemical": "O"}}]})
        assert r.status_code == 422 and "datasets[0].type_map.Chemical" in r.json()["detail"]
        r = post({"datasets": [{"id": a["id"], "weight": 0}]})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "body.datasets.0.weight"
        r = post({"dataset_id": a["id"], "datasets": datasets})
        assert r.status_code == 422 and "either dataset_id or datasets" in r.text
        assert post({"datasets": [{"id": "ds-nope"}]}).status_code == 404
        # an unknown id is 404 whether or not it is listed twice (schemathesis: a schema-valid
        # body of unknown ids was refused as 422); each listed once, as the document says
        assert post({"datasets": [{"id": "ds-nope"}, {"id": "ds-nope"}]}).status_code == 404
        r = post({"datasets": [datasets[0], datasets[0]]})
        assert r.status_code == 422 and "datasets[1].id" in r.json()["detail"]
        assert post({"dataset_id": None, "datasets": datasets}).status_code == 422  # not null
        assert post({}).status_code == 422

        first = post({"datasets": datasets, "idempotency_key": "multi-1"})
        assert first.status_code == 202, first.text
        job = first.json()
        assert job["dataset_id"] == a["id"]
        assert job["datasets"] == [
            {"id": a["id"], "type_map": MAP_A, "weight": 0.5, "version": 1},
            {"id": b["id"], "type_map": MAP_B, "weight": 1.0, "version": 1},
        ]
        assert post({"datasets": datasets, "idempotency_key": "multi-1"}).json()["id"] == job["id"]
        changed = [datasets[0], {**datasets[1], "weight": 2.0}]
        assert post({"datasets": changed, "idempotency_key": "multi-1"}).status_code == 409
        # the second dataset is in use too
        busy = c.delete(f"/v1/datasets/{b['id']}", headers=auth(TRAIN))
        assert busy.status_code == 409 and job["id"] in busy.json()["detail"]

        assert run_training_job(job["id"], settings) == "succeeded"
        done = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
        metrics = done["metrics"]
        assert (
            set(metrics["dev"]["sources"]) == set(metrics["test"]["sources"]) == {a["id"], b["id"]}
        )
        assert "macro_f1" in metrics["dev"]
        model = c.get(f"/v1/models/{done['model_id']}", headers=auth(ADMIN)).json()
        assert model["types"] == ["Anatomy", "Drug", "Problem", "Procedure", "Test"]
        sources = model["manifest"]["sources"]
        assert [s["weight"] for s in sources] == [0.5, 1.0]
        assert sources[0]["annotated"] == ["Drug", "Problem"]
        assert model["manifest"]["partial_labels"] is True
        # an evaluation maps the dataset's types onto the model's and judges only those
        ev = c.post(
            "/v1/evaluations",
            headers=auth(TRAIN),
            json={"model_id": done["model_id"], "dataset_id": a["id"], "type_map": MAP_A},
        )
        assert ev.status_code == 202 and ev.json()["type_map"] == MAP_A
        assert run_evaluation(ev.json()["id"], settings) == "succeeded"
        scored = c.get(f"/v1/evaluations/{ev.json()['id']}", headers=auth(TRAIN)).json()
        assert set(scored["metrics"]["per_type"]) <= {"Drug", "Problem"}
        assert scored["metrics"]["n_gold"] == 4
        bad = c.post(
            "/v1/evaluations",
            headers=auth(TRAIN),
            json={"model_id": done["model_id"], "dataset_id": a["id"], "type_map": {"Drug": "X"}},
        )
        assert bad.status_code == 422 and "type_map.Drug: dataset" in bad.json()["detail"]
        # a finished job keeps its record when a dataset goes
        assert c.delete(f"/v1/datasets/{b['id']}", headers=auth(TRAIN)).status_code == 204
        kept = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
        assert [d["id"] for d in kept["datasets"]] == [a["id"], None]


def test_a_request_reads_its_texts_in_the_style_it_asks(settings):
    """A model trained with source styles and a blank style serves text with none; a request
    (and a bulk job) may ask for a corpus's, and one it was not trained with is refused with
    its field."""
    with TestClient(create_app(settings)) as c:
        a, b = upload(c, A, "a"), upload(c, B, "b")
        datasets = [{"id": a["id"], "type_map": MAP_A}, {"id": b["id"], "type_map": MAP_B}]
        body = {**JOB, "datasets": datasets, "source_styles": True, "blank_style": 0.5}
        job = c.post("/v1/jobs", headers=auth(TRAIN), json=body).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        model_id = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
        manifest = c.get(f"/v1/models/{model_id}", headers=auth(ADMIN)).json()["manifest"]
        assert (manifest["styles"], manifest["style"]) == ([a["id"], b["id"]], "")
        listed = c.get("/v1/models", headers=auth(ANNOTATE)).json()["data"][0]
        assert (listed["styles"], listed["style"]) == ([a["id"], b["id"], ""], "")
        assert c.post(f"/v1/models/{model_id}/activate", headers=auth(ADMIN)).status_code == 200
        texts = [t for t, _ in A + B]

        def annotate(**kw) -> list:
            r = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": texts, **kw})
            assert r.status_code == 200, r.text
            return r.json()["results"]

        served, as_b = annotate(), annotate(style=b["id"])
        assert annotate(style="") == served
        assert served != as_b  # read as B, the same texts score otherwise
        with session_factory(settings.sqlalchemy_url)() as session:
            path = settings.artifacts / session.get(Model, model_id).path
        bundle_as_b = EntityExtractor.from_bundle(path, style=b["id"]).annotate(texts)
        assert [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in as_b] == [
            [(e.start, e.end, e.type) for e in ents] for ents in bundle_as_b
        ]
        r = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": texts, "style": "C"})
        assert r.status_code == 404 and r.json()["type"] == "urn:mslm:problem:unknown-style"
        assert r.json()["errors"] == [
            {"field": "body.style", "message": r.json()["detail"]},
        ]
        assert f"style 'C': this model's styles are {a['id']}, {b['id']}, ''" in r.text

        # a bulk job reads its notes in the style it asks, checked when it is submitted
        notes = upload_notes(c, "notes.txt", ("\n".join(texts) + "\n").encode())
        source = {"kind": "file", "input": notes["id"]}

        def submit(style: str):
            return c.post(
                "/v1/annotation-jobs",
                headers=auth(ANNOTATE),
                json={"source": source, "style": style},
            )

        refused = submit("C")
        assert refused.status_code == 404 and refused.json()["errors"][0]["field"] == "body.style"
        bulk_job = submit(b["id"]).json()
        assert bulk_job["params"]["style"] == b["id"]
        published: list[tuple[str, int]] = []
        plan = bulk_runner.run_plan(bulk_job["id"], settings, lambda j, s: published.append((j, s)))
        assert plan == "planned"
        for _, seq in published:
            assert bulk_runner.run_chunk(bulk_job["id"], seq, settings) == "done"
        out = c.get(f"/v1/annotation-jobs/{bulk_job['id']}/output", headers=auth(ANNOTATE))
        assert [json.loads(line)["entities"] for line in out.text.splitlines()] == [
            r["entities"] for r in as_b
        ]


def test_a_job_on_one_dataset_as_uploaded_is_unchanged(settings):
    with TestClient(create_app(settings)) as c:
        a = upload(c, A, "a")
        job = c.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": a["id"], **JOB}).json()
        assert job["datasets"] == [{"id": a["id"], "type_map": {}, "weight": 1.0, "version": 1}]
        assert run_training_job(job["id"], settings) == "succeeded"
        done = c.get(f"/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()
        assert "sources" not in done["metrics"]["test"]
        model = c.get(f"/v1/models/{done['model_id']}", headers=auth(ADMIN)).json()
        assert model["types"] == ["Chemical", "Disease"] and "sources" not in model["manifest"]


# -- the first start ------------------------------------------------------------------------------
def write_split_folder(folder: Path, rows: list) -> Path:
    folder.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (folder / f"{split}.jsonl").write_bytes(jsonl(rows))
    return folder


def test_first_start_trains_the_clinical_model_from_the_cache(settings, tmp_path, monkeypatch):
    """The recipe's four corpora become four datasets and two jobs with their type maps and
    weights: the early model's, queued first, then the full recipe's, which replaces it; a
    second start does nothing."""
    rows = {
        "MACCROBAT2020": [
            ("Pain in the liver .", [(0, 4, "Sign_symptom"), (12, 17, "Biological_structure")])
        ],
        "CHIA": [("No prior surgery .", [(9, 16, "Procedure")])],
        "BC5CDR-IOB": [("Aspirin reduces fever .", [(0, 7, "Chemical"), (16, 21, "Disease")])],
        "NCBI-disease-IOB": [("Breast cancer .", [(0, 13, "Disease")])],
    }
    folders = {c: write_split_folder(tmp_path / c, r) for c, r in rows.items()}
    monkeypatch.setattr(first_start, "_clinical_folders", lambda s, t: folders)
    with TestClient(create_app(settings)):
        pass  # the schema
    job_ids = first_start.bootstrap(settings, "auto", None, epochs=1)
    assert job_ids is not None and len(job_ids) == 2
    early_id, job_id = job_ids
    with session_factory(settings.sqlalchemy_url)() as session:
        job, early = session.get(Job, job_id), session.get(Job, early_id)
        assert early.created_at <= job.created_at and job.replaces == early.id
        same = [[(d.dataset_id, d.type_map, d.weight) for d in j.datasets] for j in (early, job)]
        assert early.replaces is None and same[0] == same[1]
        # the early model: one short epoch of plain fine-tuning, whatever the start's epochs
        assert early.params == {
            **clinical.SETTINGS,
            **clinical.EARLY_SETTINGS,
            "base_model": "tiny",
        }
        names = [session.get(Dataset, d.dataset_id).name for d in job.datasets]
        assert names == [f"clinical: {c}" for c in clinical.CORPORA]
        assert [d.type_map for d in job.datasets] == [
            {k: v for k, v in registry_free(s.type_map).items() if k in types}
            for s, types in zip(
                clinical.RECIPE,
                [
                    {"Sign_symptom", "Biological_structure"},
                    {"Procedure"},
                    {"Chemical", "Disease"},
                    {"Disease"},
                ],
                strict=True,
            )
        ]
        assert [d.weight for d in job.datasets] == [s.weight for s in clinical.RECIPE]
        # the recipe's own settings (the strategy its figures were measured with), the
        # start's options over them
        assert job.export == {"onnx": True, "quantize": "int8"} and job.params == {
            **clinical.SETTINGS,
            "epochs": 1,
            "base_model": "tiny",
        }
    assert first_start.bootstrap(settings, "auto", None) is None  # not a fresh install


def test_the_clinical_recipe_trains_its_own_strategy_unless_told(tmp_path, monkeypatch):
    """``mslm train --recipe clinical``: the recipe's settings over the defaults (its figures
    were measured with them), a --config file's and the command line's over the recipe's."""
    from mslm_core import cli, train

    source = {"name": "CHIA", "train": "t", "dev": "d", "test": None, "type_map": {}}
    monkeypatch.setattr(clinical, "sources", lambda cache: [source])
    seen = []

    class Capture:
        def __init__(self, config, *args, **kwargs):
            seen.append(config)

        def fit(self, resume=False):
            return {"output": "b", "metrics": {}}

    monkeypatch.setattr(train, "Trainer", Capture)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"strategy": "vanilla", "epochs": 2}))
    for extra in ([], ["--strategy", "auto"], ["--config", str(config)]):
        assert cli.main(["train", "--output", "b", "--recipe", "clinical", *extra]) == 0
    assert [c.strategy for c in seen] == [clinical.SETTINGS["strategy"], "auto", "vanilla"]
    assert {c.note_style for c in seen} == {clinical.SETTINGS["note_style"]} == {0.3}
    assert all([s["name"] for s in c.sources] == ["CHIA"] for c in seen)


def registry_free(type_map: dict) -> dict:
    """A recipe type map as the store keeps it (lists sorted)."""
    return {k: sorted(v) if isinstance(v, list) else v for k, v in type_map.items()}


def test_first_start_falls_back_and_says_why(settings, tmp_path, monkeypatch, caplog):
    def unreachable(corpus, path, timeout):
        raise ConfigError(f"cannot fetch {corpus.name}: network unreachable")

    monkeypatch.setattr(pinned, "_download", unreachable)
    settings.corpus_cache = tmp_path / "empty-cache"
    with TestClient(create_app(settings)):
        pass
    with pytest.raises(ConfigError, match=r"mslm corpora unpack clinical-corpora\.tar"):
        first_start.bootstrap(settings, "clinical", None)
    assert first_start.bootstrap(settings, "none", None) is None
    fallback = write_split_folder(tmp_path / "BC5CDR-IOB", A)
    with caplog.at_level(logging.WARNING, logger="mslm.bootstrap"):
        job_ids = first_start.bootstrap(settings, "auto", fallback)
    assert job_ids is not None and len(job_ids) == 1  # no early model of a user's corpus
    (job_id,) = job_ids
    said = caplog.text
    assert "falling back to BC5CDR-IOB" in said and "network unreachable" in said
    assert "mslm corpora fetch clinical --archive clinical-corpora.tar" in said
    with session_factory(settings.sqlalchemy_url)() as session:
        job = session.get(Job, job_id)
        assert [d.type_map for d in job.datasets] == [{}]
        assert "strategy" not in job.params  # a dataset of the user's: the default, auto


# -- the corpus cache carried over --------------------------------------------------------------
@pytest.fixture()
def fake_corpus(tmp_path, monkeypatch):
    """One pinned corpus whose file lies in a local folder."""
    import hashlib

    src = tmp_path / "src"
    src.mkdir()
    payload = b"T1\tSign_symptom 0 5\tfever\n"
    (src / "a.ann").write_bytes(payload)
    corpus = pinned.PinnedCorpus(
        "T", "o/r", "c" * 40, {"a.ann": hashlib.sha256(payload).hexdigest()}, "CC0"
    )
    monkeypatch.setattr(pinned, "corpora", lambda: {"T": corpus})
    return src, payload


def test_pack_and_unpack_carry_the_cache_and_check_every_file(fake_corpus, tmp_path):
    src, payload = fake_corpus
    pinned.fetch_corpus("T", tmp_path / "online", from_dir=src)
    archive = pinned.pack(tmp_path / "carry.tar.gz", ["T"], tmp_path / "online")
    assert pinned.unpack(archive, tmp_path / "offline") == ["T"]
    assert (tmp_path / "offline" / "T" / "a.ann").read_bytes() == payload
    assert pinned.cached_names(tmp_path / "offline") == ["T"]
    # a tampered archive is refused, and nothing of it is kept
    bad = tmp_path / "bad.tar"
    (tmp_path / "evil.ann").write_bytes(b"T1\tSign_symptom 0 5\tFEVER\n")
    with tarfile.open(bad, "w") as tar:
        tar.add(tmp_path / "evil.ann", arcname="T/a.ann")
    with pytest.raises(ConfigError, match=r"T: a.ann has sha256 .* pinned"):
        pinned.unpack(bad, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere" / "T").exists()
    with tarfile.open(bad, "w") as tar:
        tar.add(tmp_path / "evil.ann", arcname="T/../../escape.ann")
    with pytest.raises(ConfigError, match="is not a pinned file of T"):
        pinned.unpack(bad, tmp_path / "elsewhere")


@pytest.mark.reliability
def test_unpack_refuses_a_huge_member_before_reading_it(fake_corpus, tmp_path, monkeypatch, record):
    """Issue 58 item 12: a 14 MB .tar.gz with a 3 GiB member took 3.2 GB of RSS before its
    sha256 check. A member larger than any pinned file is refused by its header, unread."""
    import io
    import time

    monkeypatch.setattr(pinned, "MAX_FILE_BYTES", 1 << 20)
    bad = tmp_path / "big.tar.gz"
    size = 64 << 20
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("T/a.ann")
        info.size = size
        tar.addfile(info, io.BytesIO(b"\0" * size))
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="more than any pinned file") as refused:
        pinned.unpack(bad, tmp_path / "elsewhere")  # refused by its header, not its sha256
    seconds = round(time.perf_counter() - started, 3)
    assert not (tmp_path / "elsewhere" / "T").exists()
    record(
        "round 4, item 12: tar members",
        "mslm corpora unpack of a .tar.gz whose member is 64 MiB, the largest pinned file "
        "set to 1 MiB (before: a 3 GiB member read whole, 3.2 GB of RSS, before its sha256 "
        "check; the real bound is 256 MiB)",
        {"seconds": seconds, "refusal": str(refused.value)[:100]},
        "refused by the member's header, before a byte of it is read; nothing unpacked",
    )


def test_the_recipe_maps_only_types_its_corpora_have():
    """Every source type the recipe maps is a type its corpus annotates (checked against the
    pinned corpora's type lists, which docs/clinical-schema.md documents)."""
    known = {
        "MACCROBAT2020": {
            "Sign_symptom",
            "Disease_disorder",
            "Medication",
            "Dosage",
            "Diagnostic_procedure",
            "Lab_value",
            "Therapeutic_procedure",
            "Biological_structure",
            "Administration",  # the modifiers the relation step ties to their heads
            "Frequency",
            "Duration",
            "Severity",
        },
        "CHIA": {"Condition", "Drug", "Measurement", "Procedure", "Device"},
        "BC5CDR-IOB": {"Chemical", "Disease"},
        "NCBI-disease-IOB": {"Disease"},
    }
    for source in clinical.RECIPE:
        assert set(source.type_map) == known[source.corpus]
        targets = {
            t for v in source.type_map.values() for t in ([v] if isinstance(v, str) else v or [])
        }
        assert targets <= set(CLINICAL_TYPES)
    schema = Path(__file__).resolve().parents[1] / "docs" / "clinical-schema.md"
    text = schema.read_text()
    for source in clinical.RECIPE:
        for name in source.type_map:
            assert f"`{name}`" in text, f"{source.corpus}'s {name} is not in clinical-schema.md"
