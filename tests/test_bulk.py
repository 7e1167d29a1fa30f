"""Annotation jobs (issue 34): note files read with what cannot be read reported, the OMOP
NOTE_NLP mapping, and the job path — plan, chunks, progress, cancel, error report, output —
in-process over SQLite and, on this machine's PostgreSQL, into the official OMOP CDM v5.4
tables with a chunk run twice and a worker's claim lost mid-way."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_helpers import (
    ADMIN,
    ANNOTATE,
    JOB,
    TRAIN,
    auth,
    cdm_warehouse,
    make_settings,
    serve_model_of,
    upload_notes,
    upload_toy,
)

from api.main import create_app
from mslm_core import omop
from mslm_core.notes import Note, NoteProblem, detect_note_format, read_notes
from mslm_core.types import Assertion, Cue, Entity, LinkedConcept
from store import bulk, leases
from store.db import session_factory
from store.leases import CHUNK, PLANNING
from store.tables import AnnotationChunk
from worker import bulk as runner
from worker.celery_app import celery_for
from worker.reaper import sweep
from worker.runner import run_training_job


# -- reading notes ---------------------------------------------------------------------------
def test_jsonl_notes_keep_going_past_bad_lines(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(
        b'{"id": 7, "text": "no fever"}\n'
        b"not json\n"
        b'{"note_id": "a", "note_text": "cough"}\n'
        b'{"id": 9, "text": null}\n'
        b"\xff\xfe\n"
        b"\n"
        b'{"text": "id from the line"}\n'
    )
    got = list(read_notes(path, detect_note_format(path)))
    assert [g for g in got if isinstance(g, Note)] == [
        Note("7", "no fever"),
        Note("a", "cough"),
        Note("7", "id from the line"),  # the line number (7) as id
    ]
    problems = [g for g in got if isinstance(g, NoteProblem)]
    where = [(p.where, p.id) for p in problems]
    assert where == [("line 2", None), ("line 4", "9"), ("line 5", None)]
    assert "not JSON" in problems[0].reason and "'text'" in problems[1].reason


def test_text_pubtator_and_bioc_notes(tmp_path):
    text = tmp_path / "n.txt"
    text.write_text("first note\n\nthird line\n")
    assert list(read_notes(text, "text")) == [Note("1", "first note"), Note("3", "third line")]
    pub = tmp_path / "n.pubtator"
    pub.write_text("11|t|Title here\n11|a|Abstract .\n11\t0\t5\tTitle\tX\n\n12|t|Only title\n")
    assert list(read_notes(pub, detect_note_format(pub))) == [
        Note("11", "Title here Abstract ."),
        Note("12", "Only title"),
    ]
    bioc = tmp_path / "n.json"
    bioc.write_text(
        json.dumps(
            {
                "source": "s",
                "date": "",
                "key": "",
                "infons": {},
                "documents": [
                    {
                        "id": "d1",
                        "infons": {},
                        "relations": [],
                        "passages": [
                            {
                                "offset": 0,
                                "text": "Title",
                                "infons": {},
                                "sentences": [],
                                "annotations": [],
                                "relations": [],
                            },
                            {
                                "offset": 8,
                                "text": "Body",
                                "infons": {},
                                "sentences": [],
                                "annotations": [],
                                "relations": [],
                            },
                        ],
                    }
                ],
            }
        )
    )
    assert detect_note_format(bioc) == "bioc"
    assert list(read_notes(bioc, "bioc")) == [Note("d1", "Title   Body")]  # offsets kept


# -- the OMOP mapping ------------------------------------------------------------------------
def _entity(**assertion) -> Entity:
    cues = (Cue("negated", "Denies", 0, 6),) if assertion.get("negated") else ()
    return Entity(
        7,
        12,
        "fever",
        "Problem",
        0.91234,
        0.95,
        0.96,
        assertion=Assertion(**assertion, cues=cues),
        section="history_of_present_illness",
        concept=LinkedConcept("D005334", "Fever", 1.0, "MeSH"),
        candidates=(),
    )


@pytest.mark.parametrize(
    ("assertion", "exists", "temporal"),
    [
        ({}, "Y", "present"),
        ({"negated": True}, "N", "present"),
        ({"hypothetical": True}, "N", "present"),
        ({"family": True}, "N", "present"),
        ({"possible": True}, "Y", "present"),  # moderate uncertainty: a modifier (the CDM)
        ({"historical": True}, "Y", "past"),
    ],
)
def test_term_exists_and_temporal(assertion, exists, temporal):
    e = _entity(**assertion)
    assert omop.term_exists(e) == exists and omop.term_temporal(e) == temporal
    modifiers = omop.parse_modifiers(omop.term_modifiers(e))
    assert modifiers["type"] == "Problem" and modifiers["concept"] == "MeSH:D005334"
    for name in ("negated", "possible", "hypothetical", "historical", "family", "allergy"):
        assert modifiers[name] == str(assertion.get(name, False)).lower()
    assert ("cues" in modifiers) == bool(assertion.get("negated"))


def test_note_nlp_row_follows_the_cdm():
    text = "Denies fever. " + "x" * 400
    when = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
    row = omop.note_nlp_row(
        42,
        text,
        _entity(negated=True),
        system="mslm 0.1.0 model=m job=j",
        when=when,
        concepts=lambda v, c: (2000001, 437663) if (v, c) == ("MeSH", "D005334") else (0, 0),
        section_ids={"history_of_present_illness": 3000001},
    )
    assert row["offset"] == "7" and row["lexical_variant"] == "fever"
    assert row["note_nlp_source_concept_id"] == 2000001 and row["note_nlp_concept_id"] == 437663
    assert row["section_concept_id"] == 3000001 and row["term_exists"] == "N"
    assert len(row["snippet"]) == 250 and "Denies fever." in row["snippet"]
    assert row["nlp_date"] == dt.date(2026, 11, 25)
    assert omop.parse_modifiers(row["term_modifiers"])["cues"] == "negated@0-6"
    no_context = Entity(0, 3, "abc", "Drug", 0.5, 0.5, 0.5)
    bare = omop.note_nlp_row(
        1, "abc", no_context, system="s", when=when, concepts=lambda v, c: (9, 9), section_ids={}
    )
    assert bare["term_exists"] is None and bare["term_temporal"] is None
    assert bare["note_nlp_concept_id"] == 0 and bare["section_concept_id"] == 0  # not linked


# -- the job path, in-process ----------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_encoder):
    """An install with one trained, exported, active model."""
    tmp = tmp_path_factory.mktemp("bulk")
    settings = make_settings(tmp, tiny_encoder, max_text_chars=300, bulk_chunk_notes=3)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp / "corpus")
        job = c.post(
            "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB}
        ).json()
        assert run_training_job(job["id"], settings) == "succeeded"
        serve_model_of(c, job["id"])
    return settings


class Published(list):
    def __call__(self, job_id: str, seq: int) -> None:
        self.append((job_id, seq))


NOTES = [
    "Cisplatin caused renal failure in the patient .",
    "No renal failure after cisplatin .",
    "",
    "x" * 301,  # over MSLM_MAX_TEXT_CHARS (300 here)
    "Aspirin was given .",
    "Renal failure , history of cisplatin .",
    "The patient is well .",
]


def _upload(c, tmp_path: Path) -> dict:
    path = tmp_path / "notes.jsonl"
    lines = [json.dumps({"id": 100 + i, "text": t}) for i, t in enumerate(NOTES)]
    lines.insert(2, "{broken")
    path.write_text("\n".join(lines) + "\n")
    return upload_notes(c, "notes.jsonl", path.read_bytes())


def _file_job(c, notes: dict, settings, **body) -> tuple[dict, Published]:
    """A job on an uploaded file, submitted and planned (its chunks published)."""
    r = c.post(
        "/v1/annotation-jobs",
        headers=auth(ANNOTATE),
        json={"source": {"kind": "file", "input": notes["id"]}, **body},
    )
    assert r.status_code == 202, r.text
    published = Published()
    assert runner.run_plan(r.json()["id"], settings, published) == "planned"
    return r.json(), published


def test_file_job_plans_runs_reports_and_serves_its_output(served, tmp_path):
    settings = served
    with TestClient(create_app(settings)) as c:
        notes = _upload(c, tmp_path)
        assert notes["notes"] == len(NOTES) and notes["format"] == "jsonl"
        assert notes["problems"][0]["where"] == "line 3"
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ANNOTATE),
            json={"source": {"kind": "file", "input": notes["id"]}, "output": {"kind": "file"}},
        )
        assert r.status_code == 202, r.text
        job = r.json()
        assert job["state"] == "queued" and job["chunk_size"] == 3
        assert r.headers["location"] == f"/v1/annotation-jobs/{job['id']}"
        early = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
        assert early.status_code == 409
        published = Published()
        assert runner.run_plan(job["id"], settings, published) == "planned"
        assert runner.run_plan(job["id"], settings, published) == "skipped"  # claimed once
        assert published == [(job["id"], 0), (job["id"], 1), (job["id"], 2)]
        mid = c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).json()
        assert mid["state"] == "running" and mid["progress"]["total"] == len(NOTES)
        assert mid["progress"]["chunks"]["queued"] == 3
        for _, seq in published:
            assert runner.run_chunk(job["id"], seq, settings) == "done"
        assert runner.run_chunk(job["id"], 0, settings) == "skipped"  # done already
        done = c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).json()
        assert done["state"] == "succeeded", done
        p = done["progress"]
        assert p["committed"] == len(NOTES) and p["failed_notes"] == 2 and p["eta_seconds"] is None
        assert p["entities"] > 0 and p["chunks"]["succeeded"] == 3
        errors = c.get(f"/v1/annotation-jobs/{job['id']}/errors", headers=auth(ANNOTATE)).json()
        reasons = {e["note_id"]: e["reason"] for e in errors["data"]}
        assert errors["count"] == 2 and "103" in reasons and "the limit is 300" in reasons["103"]
        assert any(e["where"] == "line 3" for e in errors["data"])
        out = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
        assert out.status_code == 200 and "attachment" in out.headers["content-disposition"]
        rows = [json.loads(line) for line in out.text.splitlines()]
        kept = [i for i in range(len(NOTES)) if i != 3]
        assert [r["id"] for r in rows] == [str(100 + i) for i in kept]  # input order
        direct = c.post(
            "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [NOTES[i] for i in kept]}
        ).json()["results"]
        assert [r["entities"] for r in rows] == [d["entities"] for d in direct]
        # a chunk run again (a redelivered message after a crash) leaves one part, unchanged
        factory = session_factory(settings.sqlalchemy_url)
        with factory() as session:
            session.query(AnnotationChunk).filter_by(job_id=job["id"], seq=1).update(
                {"state": "queued"}
            )
            session.commit()
        assert runner.run_chunk(job["id"], 1, settings) == "skipped"  # the job has ended
        again = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
        assert again.text == out.text
        listed = c.get("/v1/annotation-jobs", headers=auth(ANNOTATE)).json()
        assert job["id"] in [j["id"] for j in listed["data"]]
        assert c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(TRAIN)).status_code == 403


def test_bioc_and_pubtator_outputs_name_the_notes(served, tmp_path):
    settings = served
    with TestClient(create_app(settings)) as c:
        notes = _upload(c, tmp_path)
        for fmt in ("bioc", "pubtator"):
            output = {"kind": "file", "format": fmt}
            job, published = _file_job(c, notes, settings, output=output, chunk_size=4)
            for _, seq in published:
                runner.run_chunk(job["id"], seq, settings)
            out = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
            if fmt == "bioc":
                ids = [d["id"] for d in out.json()["documents"]]
            else:
                ids = [line.split("|")[0] for line in out.text.splitlines() if "|t|" in line]
            assert ids == [str(100 + i) for i in range(len(NOTES)) if i != 3]


def test_cancel_drops_queued_chunks_and_keeps_what_was_committed(served, tmp_path):
    settings = served
    with TestClient(create_app(settings)) as c:
        job, _ = _file_job(c, _upload(c, tmp_path), settings, chunk_size=2)
        assert runner.run_chunk(job["id"], 0, settings) == "done"
        r = c.post(f"/v1/annotation-jobs/{job['id']}/cancel", headers=auth(ANNOTATE))
        assert r.status_code == 200 and r.json()["state"] == "cancelled"
        assert r.json()["progress"]["chunks"] == {
            "queued": 0,
            "running": 0,
            "succeeded": 1,
            "failed": 0,
            "cancelled": 3,
        }
        assert runner.run_chunk(job["id"], 1, settings) == "skipped"
        out = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
        assert [json.loads(x)["id"] for x in out.text.splitlines()] == ["100", "101"]
        again = c.post(f"/v1/annotation-jobs/{job['id']}/cancel", headers=auth(ANNOTATE))
        assert again.status_code == 200  # cancelling a cancelled job: no change


def test_a_dead_workers_chunk_is_queued_again_and_fails_after_max_attempts(served, tmp_path):
    settings = served
    with TestClient(create_app(settings)) as c:
        job, _ = _file_job(c, _upload(c, tmp_path), settings, chunk_size=100)
        factory = session_factory(settings.sqlalchemy_url)
        old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
        for attempt in range(1, settings.max_attempts + 1):
            with factory() as session:  # a worker claims the chunk and dies
                assert bulk.claim_chunk(session, job["id"], 0, f"dead:{attempt}")
                session.query(AnnotationChunk).filter_by(job_id=job["id"]).update(
                    {"heartbeat_at": old}
                )
                session.commit()
                reaped = sweep(settings, session, celery_for(settings))
            if attempt < settings.max_attempts:
                assert reaped["requeued"] == [f"{job['id']}#0"]
            else:
                assert reaped["failed"] == [f"{job['id']}#0"]
        final = c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).json()
        assert final["state"] == "failed" and "a chunk failed" in final["error"]
        errors = c.get(f"/v1/annotation-jobs/{job['id']}/errors", headers=auth(ANNOTATE)).json()
        assert any("worker lost" in e["reason"] for e in errors["data"])


def test_bad_requests_say_what_and_where(served, tmp_path):
    settings = served
    with TestClient(create_app(settings)) as c:
        bad = tmp_path / "bad.jsonl"
        bad.write_text("nothing here\n")
        r = c.post(
            "/v1/annotation-jobs/inputs",
            headers=auth(ANNOTATE),
            files={"file": ("bad.jsonl", bad.read_bytes())},
        )
        assert r.status_code == 422 and "line 1" in r.json()["detail"]
        sql = {"kind": "sql", "warehouse": "omop", "query": "SELECT note_id, note_text FROM note"}
        r = c.post("/v1/annotation-jobs", headers=auth(ANNOTATE), json={"source": sql})
        assert r.status_code == 403  # the deployment's credentials: admin only
        r = c.post("/v1/annotation-jobs", headers=auth(ADMIN), json={"source": sql})
        assert r.status_code == 404 and "MSLM_WAREHOUSES" in r.json()["detail"]
        drop = {**sql, "query": "DROP TABLE note"}
        r = c.post("/v1/annotation-jobs", headers=auth(ADMIN), json={"source": drop})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "body.source.sql.query"
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ANNOTATE),
            json={"source": {"kind": "file", "input": "notes-nope"}},
        )
        assert r.status_code == 404
        notes = _upload(c, tmp_path)
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ANNOTATE),
            json={"source": {"kind": "file", "input": notes["id"]}, "model": "m-nope"},
        )
        assert r.status_code == 404 and "m-nope" in r.json()["detail"]


# -- into the OMOP CDM v5.4 tables on PostgreSQL ------------------------------------------------
OMOP_NOTES = [
    "Cisplatin caused renal failure in the patient .",
    "No renal failure after cisplatin .",
    "History of renal failure .",
    "Aspirin was given .",
    "The patient is well .",
    "Renal failure , cisplatin and aspirin .",
    "Mother had renal failure .",
]


@pytest.fixture()
def warehouse():
    import psycopg

    with cdm_warehouse() as url:
        with psycopg.connect(url) as conn:
            for k, text in enumerate(OMOP_NOTES * 3):  # 21 notes, ids 10, 20, …
                conn.execute(
                    "INSERT INTO cdm.note (note_id, person_id, note_date, note_type_concept_id, "
                    "note_class_concept_id, note_text, encoding_concept_id, language_concept_id) "
                    "VALUES (%s, 1, '2026-01-01', 0, 0, %s, 0, 0)",
                    (10 * (k + 1), text),
                )
        yield url.replace("postgresql://", "postgresql+psycopg://")


def test_the_ddl_is_the_pinned_official_one():
    import omop_warehouse as w

    w.verify_ddl()  # raises on any change to the vendored files


def test_concepts_and_sections_come_from_the_warehouse(warehouse):
    from sqlalchemy import create_engine

    sink = runner.OmopSink(create_engine(warehouse), "cdm.note_nlp", "s")
    assert sink.section_ids["history_of_present_illness"] == 3000001
    with sink.engine.connect() as conn:
        sink._lookup(conn, {("MeSH", "D005334"), ("MeSH", "D000000")})
    assert sink._concepts[("MeSH", "D005334")] == (2000001, 437663)  # source, standard
    assert sink._concepts[("MeSH", "D000000")] == (0, 0)  # not in the vocabulary: 0


def test_sql_source_into_note_nlp_exactly_once(served, warehouse):
    import sqlalchemy as sa
    from pydantic import SecretStr

    settings = served.model_copy(update={"warehouses": SecretStr(f"omop={warehouse}")})
    query = (
        "SELECT note_id, note_text FROM cdm.note "
        "UNION ALL SELECT 999, NULL UNION ALL SELECT NULL, 'no id'"
    )
    with TestClient(create_app(settings)) as c:
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ADMIN),
            json={
                "source": {"kind": "sql", "warehouse": "omop", "query": query},
                "output": {"kind": "omop", "warehouse": "omop", "table": "cdm.note_nlp"},
                "chunk_size": 5,
            },
        )
        assert r.status_code == 202, r.text
        job = r.json()
        published = Published()
        assert runner.run_plan(job["id"], settings, published) == "planned"
        assert len(published) == 5  # 22 ids with a note_id, 5 per chunk
        assert runner.run_chunk(job["id"], 0, settings) == "done"
        engine = sa.create_engine(warehouse)

        def rows() -> list[tuple]:
            with engine.connect() as conn:
                return conn.execute(
                    sa.text(
                        'SELECT note_nlp_id, note_id, "offset", lexical_variant, term_exists, '
                        "term_temporal, term_modifiers, nlp_system FROM cdm.note_nlp "
                        "ORDER BY note_id, note_nlp_id"
                    )
                ).all()

        first = rows()
        assert first and {r[1] for r in first} <= {10, 20, 30, 40, 50}
        # the worker wrote chunk 0 and died before recording it: the reaper queues it again
        factory = session_factory(settings.sqlalchemy_url)
        with factory() as session:
            session.query(AnnotationChunk).filter_by(job_id=job["id"], seq=0).update(
                {
                    "state": "running",
                    "worker": "dead:1",
                    "heartbeat_at": dt.datetime.now(dt.UTC) - dt.timedelta(hours=1),
                }
            )
            session.commit()
            assert leases.reap(session, CHUNK, 60, 3).requeued == [(job["id"], 0)]
        for _, seq in published:
            assert runner.run_chunk(job["id"], seq, settings) == "done"
        done = c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ADMIN)).json()
        assert done["state"] == "succeeded" and done["progress"]["committed"] == 22
        written = rows()
        keys = [(r[1], r[2], r[3]) for r in written]
        assert len(keys) == len(set(keys))  # nothing twice
        assert len({r[0] for r in written}) == len(written)  # note_nlp_id unique (the PK)
        assert [r[1:4] for r in written if r[1] <= 50] == [r[1:4] for r in first]
        direct = c.post("/v1/annotate", headers=auth(ADMIN), json={"texts": OMOP_NOTES * 3}).json()[
            "results"
        ]
        expected = sorted(
            (10 * (k + 1), str(e["start"]), e["text"])
            for k, result in enumerate(direct)
            for e in result["entities"]
        )
        assert sorted(keys) == expected  # every entity of every note, once
        assert {r[7] for r in written} == {omop.nlp_system("0.1.0", done["model_id"], job["id"])}
        by_note = {(r[1], r[3]): r for r in written}
        negated = by_note[(20, "failure")]  # "No renal failure after cisplatin ."
        assert negated[4] == "N" and "negated=true" in negated[6] and "cues=negated@" in negated[6]
        assert by_note[(30, "renal failure")][4:6] == ("Y", "past")  # "History of …"
        assert by_note[(70, "renal failure")][4] == "N"  # "Mother had …": not the patient
        assert by_note[(10, "renal failure")][4:6] == ("Y", "present")
        errors = c.get(f"/v1/annotation-jobs/{job['id']}/errors", headers=auth(ADMIN)).json()
        reasons = {e["note_id"]: e["reason"] for e in errors["data"]}
        assert reasons == {"999": "note_text is NULL", None: "a row with no note_id"}


# -- the client and `mslm bulk` ----------------------------------------------------------------
def test_client_and_cli_run_an_annotation_job(served, tmp_path, capsys, monkeypatch):
    import threading

    from service_helpers import serving

    from mslm_client import Client, JobError
    from mslm_core.cli import main

    settings = served
    notes = tmp_path / "notes.txt"
    notes.write_text("Cisplatin caused renal failure .\nNo renal failure .\n")
    with serving(create_app(settings)) as base:
        monkeypatch.setenv("MSLM_URL", base)
        monkeypatch.setenv("MSLM_API_KEY", ANNOTATE)
        assert main(["bulk", "submit", "--file", str(notes), "--output-format", "pubtator"]) == 0
        job_id = capsys.readouterr().out.strip()
        published = Published()
        runner.run_plan(job_id, settings, published)
        with Client(base, ANNOTATE) as client:
            waiting = threading.Thread(
                target=lambda: client.wait_for_annotation_job(job_id, poll_interval=0.1)
            )
            waiting.start()  # the client follows the job while the worker runs it
            for _, seq in published:
                runner.run_chunk(job_id, seq, settings)
            waiting.join(30)
            job = client.get_annotation_job(job_id)
            assert job.state == "succeeded" and job.progress.committed == 2
            assert job.output == {"kind": "file", "format": "pubtator"}
            assert client.annotation_job_errors(job_id) == []
        out = tmp_path / "out.pubtator"
        assert main(["bulk", "download", job_id, "-o", str(out)]) == 0
        assert out.read_text().startswith("1|t|Cisplatin caused renal failure .")
        assert main(["bulk", "status", job_id]) == 0
        assert json.loads(capsys.readouterr().out)["progress"]["committed"] == 2
        # refusals are one line, not a traceback
        assert main(["bulk", "cancel", job_id]) == 2
        assert "already succeeded" in capsys.readouterr().err
        assert main(["bulk", "submit", "--warehouse", "omop", "--query", "SELECT 1"]) == 2
        assert "admin key" in capsys.readouterr().err
        with pytest.raises(SystemExit, match="--staging needs --omop-table"):
            main(["bulk", "submit", "--file", str(notes), "--staging", "cdm"])
        with Client(base, ANNOTATE) as client:
            job = client.create_annotation_job(client.upload_notes(notes).id)
            client.cancel_annotation_job(job.id)
            with pytest.raises(JobError, match="cancelled"):
                client.wait_for_annotation_job(job.id, progress=False, poll_interval=0.1)


def test_notes_and_finished_jobs_can_be_deleted_and_open_ones_cannot(served, tmp_path):
    settings = served
    with TestClient(create_app(settings)) as c:
        notes = _upload(c, tmp_path)
        listed = c.get("/v1/annotation-jobs/inputs", headers=auth(ANNOTATE)).json()
        assert notes["id"] in [n["id"] for n in listed["data"]]
        job = c.post(
            "/v1/annotation-jobs",
            headers=auth(ANNOTATE),
            json={"source": {"kind": "file", "input": notes["id"]}},
        ).json()
        path = f"/v1/annotation-jobs/inputs/{notes['id']}"
        busy = c.delete(path, headers=auth(ANNOTATE))
        assert busy.status_code == 409 and job["id"] in busy.json()["detail"]
        assert (
            c.delete(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).status_code == 409
        )
        published = Published()
        runner.run_plan(job["id"], settings, published)
        for _, seq in published:
            runner.run_chunk(job["id"], seq, settings)
        folder = settings.artifacts / "bulk" / "inputs" / notes["id"]
        assert folder.is_dir()
        assert c.delete(path, headers=auth(TRAIN)).status_code == 403
        assert c.delete(path, headers=auth(ANNOTATE)).status_code == 204
        assert not folder.exists() and c.delete(path, headers=auth(ANNOTATE)).status_code == 404
        # the job's report keeps what the file could not give
        errors = c.get(f"/v1/annotation-jobs/{job['id']}/errors", headers=auth(ANNOTATE)).json()
        assert any(e["where"] == "line 3" for e in errors["data"])
        output = settings.artifacts / "bulk" / "jobs" / job["id"]
        assert output.is_dir()
        gone = c.delete(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE))
        assert gone.status_code == 204 and not output.exists()
        assert c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).status_code == 404
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ANNOTATE),
            json={"source": {"kind": "file", "input": notes["id"]}},
        )
        assert r.status_code == 404  # the file is gone


def test_the_format_lists_are_one_fact():
    """The output and notes formats are declared by the library and the store; the API's
    schema and the client (which imports neither) must say the same."""
    import typing

    from api.schemas import FileOutput
    from mslm_client import _formats as client
    from mslm_core.notes import NOTE_FORMATS

    assert typing.get_args(FileOutput.model_fields["format"].annotation) == bulk.OUTPUT_FORMATS
    assert bulk.OUTPUT_FORMATS == client.OUTPUT_FORMATS
    assert client.NOTE_FORMATS == NOTE_FORMATS


@pytest.mark.parametrize(
    ("query", "refusal"),
    [
        # wrapped as a subquery, a data-modifying WITH cannot run at all
        (
            "WITH gone AS (DELETE FROM cdm.note RETURNING note_id, note_text) "
            "SELECT note_id, note_text FROM gone",
            "data-modifying statement must be at the top level",
        ),
        # a SELECT that writes through a function meets the READ ONLY transaction
        (
            "SELECT note_id, note_text FROM cdm.note WHERE nextval('cdm.probe') > 0",
            "read-only transaction",
        ),
    ],
)
def test_a_warehouse_query_cannot_write(served, warehouse, query, refusal):
    """A warehouse query cannot change the warehouse: the job fails with the database's
    reason and the NOTE table is untouched."""
    import psycopg
    from pydantic import SecretStr

    plain = warehouse.replace("+psycopg", "")
    with psycopg.connect(plain) as conn:
        conn.execute("CREATE SEQUENCE cdm.probe")
    settings = served.model_copy(update={"warehouses": SecretStr(f"omop={warehouse}")})
    with TestClient(create_app(settings)) as c:
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ADMIN),
            json={"source": {"kind": "sql", "warehouse": "omop", "query": query}},
        )
        assert r.status_code == 202, r.text
        assert runner.run_plan(r.json()["id"], settings, Published()) == "failed"
        job = c.get(f"/v1/annotation-jobs/{r.json()['id']}", headers=auth(ADMIN)).json()
        assert job["state"] == "failed" and refusal in job["error"]
    with psycopg.connect(plain) as conn:
        assert conn.execute("SELECT count(*) FROM cdm.note").fetchone()[0] == 21
        assert conn.execute("SELECT is_called FROM cdm.probe").fetchone()[0] is False


def test_an_unreadable_notes_upload_is_refused_early_and_counts_toward_the_quota(
    tmp_path, tiny_encoder
):
    """Issue 58 item 4: ``b"x\\n" * 5_000_000`` (9.5 MB) got its 422 after 25 s with the API
    from 575 MB to 2,085 MB: every problem and id was kept, and a refused upload did not count
    toward the upload quota, so it could be sent again without end. Now the first 1,000
    unreadable notes refuse the file, problems are kept to the first 1,000, ids spill to disk,
    and a refusal is an upload like any other for the quota."""
    import time

    settings = make_settings(tmp_path, tiny_encoder, quota_uploads_per_hour=3)
    junk = b"x\n" * 5_000_000
    with TestClient(create_app(settings)) as c:
        started = time.perf_counter()
        r = c.post(
            "/v1/annotation-jobs/inputs",
            headers=auth(ANNOTATE),
            files={"file": ("notes.jsonl", junk)},
            data={"format": "jsonl"},
        )
        seconds = time.perf_counter() - started
        assert r.status_code == 422, r.text
        assert "the first 1,000 could not" in r.json()["detail"] and "line 1" in r.json()["detail"]
        assert seconds < 10, seconds  # refused after its first lines, not its 5 M
        for _ in range(2):  # two more refusals: the key's three uploads of the hour
            refused = c.post(
                "/v1/annotation-jobs/inputs",
                headers=auth(ANNOTATE),
                files={"file": ("n.jsonl", b"not json\n")},
                data={"format": "jsonl"},
            )
            assert refused.status_code == 422
        good = c.post(
            "/v1/annotation-jobs/inputs",
            headers=auth(ANNOTATE),
            files={"file": ("n.jsonl", b'{"id": 1, "text": "fever"}\n')},
        )
        assert good.status_code == 429 and "MSLM_QUOTA_UPLOADS_PER_HOUR" in good.json()["detail"]


def test_note_ids_past_what_memory_holds_are_still_told_apart(tmp_path, monkeypatch):
    from store.files import IdSet

    monkeypatch.setattr(IdSet, "IN_MEMORY", 10)
    ids = IdSet(tmp_path / "ids.sqlite")
    fresh = [ids.add(str(i)) for i in range(25)]
    again = [ids.add(str(i)) for i in (3, 17, 24)]  # before and after the spill
    assert fresh == [True] * 25 and again == [False] * 3
    assert ids.add("25") and (tmp_path / "ids.sqlite").is_file()
    ids.close()


def test_bioc_passage_offsets_cannot_blow_a_note_up(tmp_path, tiny_encoder):
    """Issue 58 item 5: a 919-byte BioC file whose five passages sit at offsets of 2×10⁸
    became 954 MB on disk (the gaps filled with spaces). A document reaching past
    MSLM_MAX_TEXT_CHARS is a problem, never built; the others are read."""
    import resource

    def doc(i, offset):
        passage = {"offset": offset, "text": "fever", "infons": {}, "sentences": []}
        passage |= {"annotations": [], "relations": []}
        return {"id": f"d{i}", "infons": {}, "relations": [], "passages": [passage]}

    collection = {"source": "", "date": "", "key": "", "infons": {}}
    collection["documents"] = [doc(i, 200_000_000 * (i + 1)) for i in range(5)] + [doc(9, 4)]
    settings = make_settings(tmp_path, tiny_encoder, max_text_chars=1000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with TestClient(create_app(settings)) as c:
        r = c.post(
            "/v1/annotation-jobs/inputs",
            headers=auth(ANNOTATE),
            files={"file": ("notes.json", json.dumps(collection).encode())},
            data={"format": "bioc"},
        )
    assert r.status_code == 201, r.text
    assert r.json()["notes"] == 1
    assert [p["where"] for p in r.json()["problems"]] == [f"document {k}" for k in range(1, 6)]
    assert "past 1,000 characters" in r.json()["problems"][0]["reason"]
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, grown_mb  # never 954 MB
    stored = sum(p.stat().st_size for p in settings.artifacts.rglob("notes.jsonl"))
    assert stored < 1000  # the one note: "    fever"


def test_queued_annotation_work_is_bounded_per_key_and_per_job(served, tmp_path):
    """Issue 58 item 7: annotation jobs and evaluations had no quota (25 of 25 and 40 of 40
    accepted); chunk_size 1 made 20,000 chunks of 20,000 notes; after a cancel, 18,520
    messages stayed in Redis ahead of other keys' chunks. Each kind of queued work has its
    per-key quota; a job is at most bulk.MAX_CHUNKS chunks; at most bulk.WINDOW of them are
    published at a time, the next released as they end."""
    from store import bulk as store_bulk

    settings = served.model_copy(update={"quota_queued_jobs": 2})
    lines = "".join(json.dumps({"id": i, "text": "renal failure ."}) + "\n" for i in range(20))
    with TestClient(create_app(settings)) as c:
        notes = upload_notes(c, "n.jsonl", lines.encode())
        body = {"source": {"kind": "file", "input": notes["id"]}, "chunk_size": 1}
        answers = [
            c.post("/v1/annotation-jobs", headers=auth(ANNOTATE), json=body) for _ in range(3)
        ]
        assert [a.status_code for a in answers] == [202, 202, 429]
        assert "annotation jobs queued or running" in answers[2].json()["detail"]
        first, second = answers[0].json(), answers[1].json()
        published = Published()
        assert runner.run_plan(first["id"], settings, published) == "planned"
        assert len(published) == store_bulk.WINDOW  # of 20 chunks
        factory = session_factory(settings.sqlalchemy_url)

        def in_flight(job_id: str) -> int:
            with factory() as s:
                rows = s.query(AnnotationChunk).filter_by(job_id=job_id).all()
                return sum(
                    r.published_at is not None and r.state in ("queued", "running") for r in rows
                )

        ran = 0
        while published:
            job_id, seq = published.pop(0)
            assert runner.run_chunk(job_id, seq, settings, published) == "done"
            ran += 1
            assert in_flight(first["id"]) <= store_bulk.WINDOW
        assert ran == 20
        done = c.get(f"/v1/annotation-jobs/{first['id']}", headers=auth(ANNOTATE)).json()
        assert done["state"] == "succeeded" and done["progress"]["committed"] == 20
        # cancelled mid-way: what it left in the broker is its window, not its 20 chunks
        later = Published()
        assert runner.run_plan(second["id"], settings, later) == "planned"
        c.post(f"/v1/annotation-jobs/{second['id']}/cancel", headers=auth(ANNOTATE))
        assert len(later) == store_bulk.WINDOW
        assert [runner.run_chunk(j, s, settings, later) for j, s in list(later)] == (
            ["skipped"] * store_bulk.WINDOW
        )
    many = [(i, i, 1) for i in range(20_000)]
    merged = store_bulk.bounded(many)
    assert len(merged) <= store_bulk.MAX_CHUNKS and sum(n for *_, n in merged) == 20_000
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(merged))


def test_evaluations_have_a_per_key_quota_too(served, tmp_path):
    settings = served.model_copy(update={"quota_queued_jobs": 1})
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp_path / "corpus")
        model = c.get("/v1/models", headers=auth(ANNOTATE)).json()["data"][0]["id"]
        body = {"model_id": model, "dataset_id": dataset["id"], "split": "test"}
        codes = [c.post("/v1/evaluations", headers=auth(TRAIN), json=body) for _ in range(2)]
        assert [r.status_code for r in codes] == [202, 429], codes[-1].text
        assert "evaluations queued or running" in codes[1].json()["detail"]


@pytest.mark.reliability
def test_planning_heartbeats_can_be_cancelled_and_has_a_statement_timeout(
    served, warehouse, record
):
    """Issue 58 item 9: a warehouse query taking 40 s to plan was re-queued at 34 s (no
    heartbeat while planning), ran three times, then failed; there was no statement timeout,
    and a cancel was not seen while planning. Now the planner heartbeats (the reaper leaves
    it), a cancel cancels its query, and the server cancels a query past
    MSLM_WAREHOUSE_STATEMENT_TIMEOUT_SECONDS."""
    import threading
    import time

    from pydantic import SecretStr

    beats = {"heartbeat_seconds": 0.3, "heartbeat_timeout_seconds": 1.5}
    settings = served.model_copy(update={"warehouses": SecretStr(f"omop={warehouse}"), **beats})
    slow = "SELECT note_id, note_text FROM cdm.note, pg_sleep({})"
    factory = session_factory(settings.sqlalchemy_url)

    def submit(c, query: str) -> str:
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ADMIN),
            json={"source": {"kind": "sql", "warehouse": "omop", "query": query}},
        )
        assert r.status_code == 202, r.text
        return r.json()["id"]

    with TestClient(create_app(settings)) as c:
        # 3 s of planning, past the heartbeat timeout: not reaped, and planned once
        job_id = submit(c, slow.format(3))
        answer: list[str] = []
        planner = threading.Thread(
            target=lambda: answer.append(runner.run_plan(job_id, settings, Published()))
        )
        planner.start()
        time.sleep(2.5)
        with factory() as s:
            reaped = leases.reap(s, PLANNING, settings.heartbeat_timeout_seconds, 3)
        planner.join(30)
        assert answer == ["planned"] and job_id not in reaped.requeued
        figures = {"planned_past_the_heartbeat_timeout": answer[0], "reaped": len(reaped.requeued)}
        # cancelled while planning: its query is cancelled, the job ends at once
        job_id = submit(c, slow.format(30))
        answer.clear()
        started = time.perf_counter()
        planner = threading.Thread(
            target=lambda: answer.append(runner.run_plan(job_id, settings, Published()))
        )
        planner.start()
        time.sleep(0.5)
        assert (
            c.post(f"/v1/annotation-jobs/{job_id}/cancel", headers=auth(ADMIN)).status_code == 200
        )
        planner.join(30)
        figures["cancel_while_planning_s"] = round(time.perf_counter() - started, 2)
        assert answer == ["cancelled"] and time.perf_counter() - started < 10
        state = c.get(f"/v1/annotation-jobs/{job_id}", headers=auth(ADMIN)).json()["state"]
        assert state == "cancelled"
        # past the statement timeout, the server cancels the query: the job fails saying so
        timed = settings.model_copy(update={"warehouse_statement_timeout_seconds": 1})
        job_id = submit(c, slow.format(5))
        assert runner.run_plan(job_id, timed, Published()) == "failed"
        error = c.get(f"/v1/annotation-jobs/{job_id}", headers=auth(ADMIN)).json()["error"]
        assert "statement timeout" in error or "QueryCanceled" in error, error
    record(
        "round 4, item 9: planning heartbeats",
        "a warehouse query that plans for 3 s with a heartbeat timeout of 1.5 s, the reaper run "
        "mid-way (before: requeued, run three times, failed); a 30 s plan cancelled after "
        "0.5 s; a 5 s plan under MSLM_WAREHOUSE_STATEMENT_TIMEOUT_SECONDS 1",
        figures | {"past_the_statement_timeout": error[:80]},
        "planned once, never reaped; the cancel ends the query; the server cancels a query "
        "past its timeout and the job says so",
    )


@pytest.mark.reliability
def test_a_database_error_quoting_a_note_never_reaches_the_log_or_the_job(
    served, warehouse, caplog, record
):
    """Issue 58 item 10: ``… WHERE note_text::int > 0`` put a note's text into the annotate
    worker's log and into the job's error, through psycopg's DataError message."""
    from pydantic import SecretStr

    settings = served.model_copy(update={"warehouses": SecretStr(f"omop={warehouse}")})
    query = "SELECT note_id, note_text FROM cdm.note WHERE note_text::int > 0"
    with TestClient(create_app(settings)) as c:
        r = c.post(
            "/v1/annotation-jobs",
            headers=auth(ADMIN),
            json={"source": {"kind": "sql", "warehouse": "omop", "query": query}},
        )
        assert runner.run_plan(r.json()["id"], settings, Published()) == "failed"
        job = c.get(f"/v1/annotation-jobs/{r.json()['id']}", headers=auth(ADMIN)).json()
    assert "SQLSTATE 22P02" in job["error"]  # what failed, by its code
    leaks = sum(note in job["error"] or note in caplog.text for note in OMOP_NOTES)
    record(
        "round 4, item 10: database errors",
        "an annotation job whose warehouse query is '… WHERE note_text::int > 0' (before: "
        "psycopg's DataError put a note's text in the worker's log and the job's error)",
        {"job_error": job["error"][:120], "notes_in_log_or_job": leaks},
        "the job fails with the SQLSTATE class and code; no note text anywhere",
    )
    assert leaks == 0


@pytest.mark.reliability
def test_an_over_long_warehouse_note_is_not_fetched(warehouse, record):
    """Issue 58 item 13: the rows of a chunk were fetched whole before the length check (40
    rows of 5 MB: the annotate worker at 579 MB). A note over the limit is now measured by
    the server and not sent."""
    import psycopg
    import sqlalchemy as sa

    with psycopg.connect(warehouse.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute(
            "INSERT INTO cdm.note (note_id, person_id, note_date, note_type_concept_id, "
            "note_class_concept_id, note_text, encoding_concept_id, language_concept_id) "
            "VALUES (5000, 1, '2026-01-01', 0, 0, repeat('x', 2000000), 0, 0)"
        )
    source = runner.SqlSource(
        sa.create_engine(warehouse), "SELECT note_id, note_text FROM cdm.note", max_chars=1000
    )
    rows = {r.note_id: r for r in source.read(10, 5000)}
    big = rows["5000"]
    assert big.text is None and big.problem == "note_text has 2000000 characters; the limit is 1000"
    assert rows["10"].text == OMOP_NOTES[0] and rows["10"].problem is None
    record(
        "round 4, item 13: over-long warehouse notes",
        "a warehouse note of 2,000,000 characters read by a chunk with MSLM_MAX_TEXT_CHARS "
        "1,000 (before: every row fetched whole first; 40 rows of 5 MB took the annotate "
        "worker to 579 MB)",
        {"text_fetched": big.text is not None, "problem": big.problem},
        "its length measured by the server (CASE WHEN length(…)); the text never sent; a "
        "problem of the job, the other notes read",
    )


def test_a_note_in_another_language_is_annotated_with_a_warning_or_refused(served, tmp_path):
    spanish = (
        "Paciente de 67 años con dolor torácico y disnea. Antecedentes de hipertensión y "
        "diabetes mellitus tipo 2."
    )
    english = "Cisplatin caused renal failure in the patient ."
    path = tmp_path / "notes.jsonl"
    path.write_text(
        "\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate([english, spanish]))
    )
    for refuse in (False, True):
        settings = served.model_copy(update={"refuse_other_languages": refuse})
        with TestClient(create_app(settings)) as c:
            notes = upload_notes(c, "notes.jsonl", path.read_bytes())
            job, published = _file_job(c, notes, settings, output={"kind": "file"})
            for _, seq in published:
                assert runner.run_chunk(job["id"], seq, settings) == "done"
            done = c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).json()
            p = done["progress"]
            errors = c.get(f"/v1/annotation-jobs/{job['id']}/errors", headers=auth(ANNOTATE))
            (listed,) = errors.json()["data"]
            out = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
            ids = [json.loads(line)["id"] for line in out.text.splitlines()]
            assert ids == (["0"] if refuse else ["0", "1"])
            assert listed["note_id"] == "1" and "written in es" in listed["reason"]
            if refuse:  # not annotated: a failed note
                assert (p["failed_notes"], p["other_language_notes"]) == (1, 0)
                assert not listed["warning"]
            else:  # annotated, with a warning
                assert (p["failed_notes"], p["other_language_notes"]) == (0, 1)
                assert listed["warning"]


def test_note_nlp_as_csv_loads_into_the_official_ddl_and_as_parquet(served, warehouse, tmp_path):
    """Issue 61: NOTE_NLP rows without a warehouse — a CSV that PostgreSQL's COPY … CSV HEADER
    loads unchanged into the CDM v5.4 DDL's table, and the same rows as Parquet; a note whose
    id is not an integer is reported, not written."""
    import psycopg
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mslm_core.omop import NOTE_NLP_COLUMNS, parse_modifiers

    settings = served
    texts = [t for t in NOTES if t and len(t) <= 300]
    lines = [json.dumps({"id": 7 + i, "text": t}) for i, t in enumerate(texts)]
    lines.append(json.dumps({"id": "n-x", "text": "Cisplatin ."}))
    with TestClient(create_app(settings)) as c:
        notes = upload_notes(c, "notes.jsonl", ("\n".join(lines) + "\n").encode())
        outputs = {}
        for fmt in ("note_nlp_csv", "note_nlp_parquet"):
            job, published = _file_job(c, notes, settings, output={"kind": "file", "format": fmt})
            for _, seq in published:
                assert runner.run_chunk(job["id"], seq, settings) == "done"
            done = c.get(f"/v1/annotation-jobs/{job['id']}", headers=auth(ANNOTATE)).json()
            assert done["state"] == "succeeded" and done["progress"]["failed_notes"] == 1
            errors = c.get(f"/v1/annotation-jobs/{job['id']}/errors", headers=auth(ANNOTATE))
            (error,) = errors.json()["data"]
            assert error["note_id"] == "n-x" and "integer" in error["reason"]
            out = c.get(f"/v1/annotation-jobs/{job['id']}/output", headers=auth(ANNOTATE))
            assert out.status_code == 200
            suffix = "note_nlp.csv" if fmt == "note_nlp_csv" else "note_nlp.parquet"
            assert out.headers["content-disposition"].endswith(f'.{suffix}"')
            outputs[fmt] = (out.content, done["progress"]["entities"])
        direct = c.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": texts}).json()
    body, entities = outputs["note_nlp_csv"]
    assert entities == sum(len(r["entities"]) for r in direct["results"]) > 0
    assert body.decode().split("\r\n", 1)[0] == ",".join(NOTE_NLP_COLUMNS)
    with psycopg.connect(warehouse.replace("postgresql+psycopg://", "postgresql://")) as conn:
        with conn.cursor().copy("COPY cdm.note_nlp FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
            copy.write(body)
        rows = conn.execute(
            'SELECT note_nlp_id, note_id, lexical_variant, "offset", term_exists, term_temporal, '
            "term_modifiers, nlp_date, note_nlp_concept_id FROM cdm.note_nlp ORDER BY note_nlp_id"
        ).fetchall()
    assert [r[0] for r in rows] == list(range(1, entities + 1))
    expected = [
        (7 + k, e["text"], str(e["start"]), e["type"])
        for k, result in enumerate(direct["results"])
        for e in result["entities"]
    ]
    got = [(r[1], r[2], r[3], parse_modifiers(r[6])["type"]) for r in rows]
    assert got == expected
    assert {r[4] for r in rows} <= {"Y", "N"} and {r[5] for r in rows} <= {"past", "present"}
    # Parquet: the same rows, typed
    body, _ = outputs["note_nlp_parquet"]
    (tmp_path / "nlp.parquet").write_bytes(body)
    table = pq.read_table(tmp_path / "nlp.parquet")
    assert table.column_names == list(NOTE_NLP_COLUMNS) and table.num_rows == entities
    assert table.schema.field("note_id").type == pa.int64()
    assert table.schema.field("nlp_date").type == pa.date32()
    parquet_rows = table.to_pylist()
    assert [(r["note_id"], r["lexical_variant"], r["offset"]) for r in parquet_rows] == [
        g[:3] for g in got
    ]


# -- the facts staged as DRUG_EXPOSURE and MEASUREMENT rows ----------------------------------
FACTS_NOTE = (
    "Started metoprolol 25 mg PO for 3 days; no aspirin 81 mg. "
    "Troponin 0.4 ng/mL, culture positive. Mother on insulin 10 units."
)


def _fact_entities() -> list[Entity]:
    from mslm_core.types import Attachment

    text = FACTS_NOTE
    present, negated, family = Assertion(), Assertion(negated=True), Assertion(family=True)

    def at(word: str, kind: str, assertion: Assertion | None = None, head=None, role="") -> Entity:
        start = text.index(word)
        tie = Attachment(head.start, head.end, role, 0.9) if head is not None else None
        return Entity(start, start + len(word), word, kind, 0.9, 0.9, 1.0, assertion, head=tie)

    drug, aspirin = at("metoprolol", "Drug", present), at("aspirin", "Drug", negated)
    troponin, culture = at("Troponin", "Test", present), at("culture", "Test", present)
    insulin = at("insulin", "Drug", family)
    return [
        drug,
        at("25 mg", "Dosage", present, drug, "dose"),
        at("PO", "Route", present, drug, "route"),
        at("for 3 days", "Duration", present, drug, "duration"),
        aspirin,
        at("81 mg", "Dosage", negated, aspirin, "dose"),
        troponin,
        at("0.4 ng/mL", "Result", present, troponin, "value"),
        culture,
        at("positive", "Result", present, culture, "value"),
        insulin,
        at("10 units", "Dosage", family, insulin, "dose"),
    ]


def test_facts_are_staged_into_drug_exposure_and_measurement_exactly_once(warehouse):
    """The staging rows load into the CDM v5.4 tables with their foreign keys on (concepts,
    person): a regimen given now is an exposure with its route, days and sig, a negated or a
    family member's is not; a value is a measurement with its number, operator and unit, a
    qualitative one its value concept; each row's NOTE_NLP rows are in nlp_fact_source; a
    chunk written again replaces the job's rows, not another job's."""
    import sqlalchemy as sa

    from mslm_core.errors import MSLMError

    engine = sa.create_engine(warehouse)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO cdm.person (person_id, gender_concept_id, year_of_birth, "
                "race_concept_id, ethnicity_concept_id) VALUES (1, 0, 1960, 0, 0)"
            )
        )
        conn.execute(
            sa.text(
                "UPDATE cdm.note SET note_text = :t, note_date = '2026-03-01' WHERE note_id = 10"
            ),
            {"t": FACTS_NOTE},
        )
    staging = {"schema": "cdm", "drugs": "with_regimen"}
    sink = runner.OmopSink(engine, "cdm.note_nlp", "mslm test job=a", staging)
    other = runner.OmopSink(engine, "cdm.note_nlp", "mslm test job=b", staging)
    ents = _fact_entities()
    notes = [("10", FACTS_NOTE, ents), ("999", FACTS_NOTE, ents)]  # 999: no NOTE row

    def read(sql: str) -> list[tuple]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql)).all()]

    sink.write(0, notes)
    (drug,) = read(
        "SELECT drug_exposure_id, person_id, drug_concept_id, drug_exposure_start_date, "
        "drug_exposure_end_date, drug_type_concept_id, days_supply, sig, route_concept_id, "
        "drug_source_value, route_source_value, dose_unit_source_value FROM cdm.drug_exposure"
    )
    assert drug[1:] == (
        1,
        0,  # metoprolol is in no vocabulary here
        dt.date(2026, 3, 1),
        dt.date(2026, 3, 3),  # for 3 days
        omop.NLP_TYPE_CONCEPT_ID,
        3,
        "25 mg PO for 3 days",
        4132161,  # SNOMED 26643006 Oral route, from the warehouse's CONCEPT
        "metoprolol",
        "PO",
        "mg",
    )
    measured = read(
        "SELECT measurement_source_value, measurement_date, measurement_type_concept_id, "
        "operator_concept_id, value_as_number, value_as_concept_id, unit_concept_id, "
        "unit_source_value, value_source_value FROM cdm.measurement ORDER BY measurement_id"
    )
    assert measured == [
        (
            "Troponin",
            dt.date(2026, 3, 1),
            32858,
            4172703,
            Decimal("0.4"),
            None,
            8842,
            "ng/mL",
            "0.4 ng/mL",
        ),
        ("culture", dt.date(2026, 3, 1), 32858, None, None, 9191, None, None, "positive"),
    ]
    source = read(
        "SELECT s.fact_table, s.role, n.lexical_variant, n.note_id FROM cdm.nlp_fact_source s "
        "JOIN cdm.note_nlp n ON n.note_nlp_id = s.note_nlp_id ORDER BY s.fact_table, s.fact_id, "
        "n.note_nlp_id"
    )
    assert source == [
        ("drug_exposure", "drug", "metoprolol", 10),
        ("drug_exposure", "dose", "25 mg", 10),
        ("drug_exposure", "route", "PO", 10),
        ("drug_exposure", "duration", "for 3 days", 10),
        ("measurement", "test", "Troponin", 10),
        ("measurement", "value", "0.4 ng/mL", 10),
        ("measurement", "test", "culture", 10),
        ("measurement", "value", "positive", 10),
    ]
    # NOTE_NLP is written for both notes; the note with no NOTE row stages nothing
    assert read("SELECT DISTINCT note_id FROM cdm.note_nlp ORDER BY 1") == [(10,), (999,)]

    counts = "SELECT " + ", ".join(
        f"(SELECT count(*) FROM cdm.{t})"
        for t in ("drug_exposure", "measurement", "nlp_fact_source")
    )
    other.write(0, notes[:1])  # another job's rows of the same note
    sink.write(0, notes)  # this job's chunk again
    assert read(counts) == [(2, 4, 16)]
    joined = read(
        "SELECT count(*) FROM cdm.nlp_fact_source s JOIN cdm.note_nlp n "
        "ON n.note_nlp_id = s.note_nlp_id AND n.nlp_system = s.nlp_system"
    )
    assert joined == [(16,)]  # every provenance row names a NOTE_NLP row of its own job
    # every drug, with or without a regimen, when asked
    everything = runner.OmopSink(
        engine, "cdm.note_nlp", "mslm test job=c", {"schema": "cdm", "drugs": "all"}
    )
    bare = [e for e in ents if e.head is None]  # no modifiers: no regimen
    everything.write(0, [("10", FACTS_NOTE, bare)])
    assert read(
        "SELECT drug_source_value, sig, days_supply FROM cdm.drug_exposure d JOIN "
        "cdm.nlp_fact_source s ON s.fact_id = d.drug_exposure_id AND s.fact_table = "
        "'drug_exposure' WHERE s.nlp_system = 'mslm test job=c'"
    ) == [("metoprolol", None, None)]
    with pytest.raises(MSLMError, match=r"no table stage\.drug_exposure, stage\.measurement"):
        runner.OmopSink(engine, "cdm.note_nlp", "s", {"schema": "stage"})


def test_staging_is_refused_without_the_context_or_a_relation_scorer(
    served, warehouse, capsys, monkeypatch
):
    from pydantic import SecretStr
    from service_helpers import serving

    from mslm_core.cli import main

    settings = served.model_copy(update={"warehouses": SecretStr(f"omop={warehouse}")})
    body = {
        "source": {
            "kind": "sql",
            "warehouse": "omop",
            "query": "SELECT note_id, note_text FROM cdm.note",
        },
        "output": {
            "kind": "omop",
            "warehouse": "omop",
            "table": "cdm.note_nlp",
            "staging": {"schema": "cdm"},
        },
    }
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/annotation-jobs", headers=auth(ADMIN), json={**body, "context": False})
        assert r.status_code == 422 and "clinical context" in r.json()["detail"]
        r = c.post("/v1/annotation-jobs", headers=auth(ADMIN), json=body)
        assert r.status_code == 422 and "relation scorer" in r.json()["detail"]
        bad = {**body["output"], "staging": {"schema": "cdm; DROP TABLE x"}}
        r = c.post("/v1/annotation-jobs", headers=auth(ADMIN), json={**body, "output": bad})
        assert r.status_code == 422
    with serving(create_app(settings)) as base:  # the CLI asks for it, and says the refusal
        monkeypatch.setenv("MSLM_URL", base)
        monkeypatch.setenv("MSLM_API_KEY", ADMIN)
        command = ["bulk", "submit", "--warehouse", "omop", "--query", "SELECT 1"]
        command += ["--omop-table", "cdm.note_nlp", "--staging", "cdm", "--staging-drugs", "all"]
        assert main(command) == 2
        assert "needs a model with a relation scorer" in capsys.readouterr().err
    # what a job stores is what the worker's sink reads
    from types import SimpleNamespace

    from api.schemas import AnnotationJobCreate

    stored = AnnotationJobCreate.model_validate(body).output.model_dump(by_alias=True)
    assert stored["staging"] == {"schema": "cdm", "drugs": "with_regimen"}
    job = SimpleNamespace(id="j-staged", model_id="m-x", output=stored)
    sink = runner.sink_of(settings, job)  # type: ignore[arg-type]
    assert isinstance(sink, runner.OmopSink) and sink.stage == "cdm." and not sink.all_drugs
