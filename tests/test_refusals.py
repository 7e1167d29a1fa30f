"""What the API must refuse, and the races it must win, on PostgreSQL (where SQLite's answer
can hide a failure: it answered 404 to what PostgreSQL turned into a 500): NUL bytes and lone
surrogates in ids, names and texts, out-of-range options, bodies before keys, slow and huge
requests, other keys' rows, deletions racing jobs and activations."""

from __future__ import annotations

import collections
import json
import logging
import threading

import pytest
from fastapi.testclient import TestClient
from service_helpers import (
    ADMIN,
    ANNOTATE,
    KEYS,
    TRAIN,
    TRAIN2,
    auth,
    make_settings,
    upload_toy,
)
from sqlalchemy import select
from test_service_e2e import postgres_url

from api.main import create_app
from mslm_core.config import TrainConfig
from mslm_core.errors import ConfigError

__all__ = ["postgres_url"]

NUL = "%00"
LS = "labelstudio-key-for-the-id-tests-0123"
PATHS = [  # every route with an id in its path, with the scope it needs
    ("GET", f"/v1/jobs/j{NUL}x", TRAIN),
    ("POST", f"/v1/jobs/j{NUL}x/cancel", TRAIN),
    ("GET", f"/v1/datasets/d{NUL}x", TRAIN),
    ("DELETE", f"/v1/datasets/d{NUL}x", TRAIN),
    ("GET", f"/v1/evaluations/e{NUL}x", TRAIN),
    ("GET", f"/v1/evaluations/e{NUL}x/calibration.png", TRAIN),
    ("GET", f"/v1/models/m{NUL}x", ANNOTATE),
    ("GET", f"/v1/models/m{NUL}x/calibration.png", ANNOTATE),
    ("POST", f"/v1/models/m{NUL}x/activate", ADMIN),
    ("DELETE", f"/v1/models/m{NUL}x", ADMIN),
    ("GET", f"/v1/jobs?state=run{NUL}ning", TRAIN),
]
BODIES = [  # every body field that reaches the database as an id, a key or a name
    ("/v1/annotate", ANNOTATE, {"texts": ["aspirin"], "model": "m\x00x"}, "model"),
    ("/v1/jobs", TRAIN, {"dataset_id": "d\x00x"}, "dataset_id"),
    ("/v1/jobs", TRAIN, {"dataset_id": "d", "idempotency_key": "k\x00"}, "idempotency_key"),
    ("/v1/evaluations", TRAIN, {"model_id": "m\x00", "dataset_id": "d"}, "model_id"),
    ("/v1/evaluations", TRAIN, {"model_id": "m", "dataset_id": "d\x00"}, "dataset_id"),
]


@pytest.fixture()
def pg_client(tmp_path, tiny_encoder, postgres_url):
    settings = make_settings(tmp_path, tiny_encoder, database_url=postgres_url)
    assert settings.sqlalchemy_url.startswith("postgresql")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def _problem(response) -> dict:
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()


def _fields(response) -> list[str]:
    return [e["field"] for e in _problem(response)["errors"]]


def test_nul_in_a_path_id_is_422_not_500_on_postgresql(pg_client, caplog):
    caplog.set_level(logging.DEBUG)
    for method, path, key in PATHS:
        response = pg_client.request(method, path, headers=auth(key))
        assert response.status_code == 422, (method, path, response.status_code, response.text)
        fields = [e["field"] for e in _problem(response)["errors"]]
        assert any(f.startswith(("path.", "query.")) for f in fields), fields
        # the connection and the pool are fine: the next request answers
        assert pg_client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize(("route", "key", "body", "field"), BODIES)
def test_nul_in_a_body_id_is_422_naming_the_field(pg_client, route, key, body, field):
    response = pg_client.post(route, headers=auth(key), json=body)
    assert response.status_code == 422, response.text
    assert _fields(response) == [f"body.{field}"]


def test_nul_in_a_dataset_name_is_422(pg_client, tmp_path):
    corpus = tmp_path / "train.tsv"
    corpus.write_text("Aspirin\tB-Chemical\nhelps\tO\n\n", encoding="utf-8")
    with corpus.open("rb") as f:
        response = pg_client.post(
            "/v1/datasets",
            headers=auth(TRAIN),
            data={"name": "ward\x00 7"},
            files={"train": ("train.tsv", f), "dev": ("dev.tsv", corpus.read_bytes())},
        )
    assert response.status_code == 422, response.text
    assert _fields(response) == ["body.name"]


@pytest.mark.parametrize("threshold", ["NaN", "-5", "Infinity", "-Infinity"])
def test_per_type_thresholds_are_finite_and_not_negative(pg_client, threshold):
    body = '{"texts": ["aspirin"], "min_confidence_per_type": {"Chemical": THRESHOLD}}'
    body = body.replace("THRESHOLD", threshold)
    response = pg_client.post(
        "/v1/annotate",
        headers={**auth(ANNOTATE), "content-type": "application/json"},
        content=body,
    )
    assert response.status_code == 422, response.text
    assert _fields(response) == ["body.min_confidence_per_type.Chemical"]


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64])
def test_a_seed_out_of_range_is_refused_at_submission(pg_client, seed):
    response = pg_client.post(
        "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": "d", "seed": seed}
    )
    assert response.status_code == 422, response.text
    assert _fields(response) == ["body.seed"]


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_train_config_refuses_a_seed_numpy_cannot_take(seed):
    with pytest.raises(ConfigError, match="seed"):
        TrainConfig(train="t", dev="d", seed=seed)
    TrainConfig(train="t", dev="d", seed=2**32 - 1)


class _Queue:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def train(self, job_id: str) -> None:
        self.sent.append(job_id)

    def evaluate(self, evaluation_id: str) -> None:
        self.sent.append(evaluation_id)


def _at_once(factory, first, second) -> tuple[str, str]:
    """Run ``first(session)`` and ``second(session)`` at the same moment, each in its own
    thread and session; each returns what it saw (an outcome's name)."""
    start = threading.Barrier(2)
    seen: list[str] = ["", ""]

    def run(k, call):
        with factory() as session:
            start.wait()
            seen[k] = call(session)

    threads = [threading.Thread(target=run, args=(k, c)) for k, c in enumerate((first, second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return seen[0], seen[1]


def test_a_job_and_the_deletion_of_its_dataset_never_both_succeed(
    tmp_path, tiny_encoder, postgres_url
):
    """Issue 18 item 9: 3 races in 25 let both succeed and the job failed with "dataset
    None". Each round submits a job and deletes its dataset at the same moment."""
    from store.datasets import delete_dataset
    from store.db import session_factory
    from store.errors import Conflict, NotFound
    from store.jobs import create_job
    from store.migrate import upgrade
    from store.tables import Dataset, Job

    settings = make_settings(tmp_path, tiny_encoder, database_url=postgres_url)
    upgrade(settings.sqlalchemy_url)
    factory = session_factory(settings.sqlalchemy_url)
    queue, outcomes = _Queue(), collections.Counter()
    for i in range(25):
        with factory() as session:
            session.add(
                Dataset(
                    id=f"ds-race{i}",
                    name="race",
                    files={},
                    stats={"train": {"sentences": 1}},
                    types=[],
                )
            )
            session.commit()

        def submit(session, i=i):
            try:
                create_job(settings, session, queue, f"ds-race{i}", {}, {"onnx": False})
                return "created"
            except NotFound:
                return "not found"

        def delete(session, i=i):
            try:
                delete_dataset(settings, session, f"ds-race{i}")
                return "deleted"
            except Conflict:
                return "conflict"

        result = _at_once(factory, submit, delete)
        outcomes[result] += 1
        with factory() as session:
            jobs = session.scalars(select(Job).where(Job.id.in_(queue.sent))).all()
            assert all(job.dataset_id is not None for job in jobs), (i, result)
    assert set(outcomes) <= {("created", "conflict"), ("not found", "deleted")}, outcomes


def test_activating_and_deleting_one_model_at_once_never_leave_it_served_and_gone(
    tmp_path, tiny_encoder, postgres_url
):
    """Issue 18 item 2: activate answered 500, delete 204, and the store served a deleted
    model (every annotate 503 after a restart). Each round activates and deletes one model at
    the same moment; one of them must lose."""
    from store.db import session_factory
    from store.errors import Conflict, NotFound
    from store.migrate import upgrade
    from store.models import delete_model, set_active_model
    from store.serving import active_model_id
    from store.tables import Model

    settings = make_settings(tmp_path, tiny_encoder, database_url=postgres_url)
    upgrade(settings.sqlalchemy_url)
    factory = session_factory(settings.sqlalchemy_url)
    outcomes = collections.Counter()
    for i in range(25):
        with factory() as session:
            session.add(
                Model(id=f"m-race{i}", path=f"models/m-race{i}", base_model="x", strategy="v")
            )
            session.commit()

        def activate(session, i=i):
            try:
                set_active_model(session, f"m-race{i}")
                return "activated"
            except NotFound:
                return "not found"

        def delete(session, i=i):
            try:
                delete_model(settings, session, f"m-race{i}")
                return "deleted"
            except Conflict:
                return "conflict"

        result = _at_once(factory, activate, delete)
        outcomes[result] += 1
        with factory() as session:
            active = active_model_id(session)
            assert active is None or session.get(Model, active) is not None, (i, result)
    assert set(outcomes) <= {("activated", "conflict"), ("not found", "deleted")}, outcomes


@pytest.mark.parametrize(
    ("authorization", "why"),
    [
        (None, "required"),
        (b"Bearer wrong-key-000000000000", "not valid"),
        (b"Bearer " + b"k" * 10**6, "not valid"),
    ],
)
def test_a_body_is_never_read_before_its_key_is_checked(pg_client, authorization, why):
    """Issue 18 item 4: 20 keyless 75 MB bodies were parsed before the 401 (API RSS 228 MB →
    1.67 GB). A request with a body and a missing or wrong key is refused before the app
    asks for one byte of it."""
    app = pg_client.app
    reads, sent = [], []

    async def receive():
        reads.append(1)
        return {"type": "http.request", "body": b"x" * 1024, "more_body": True}

    async def send(message):
        sent.append(message)

    headers = [(b"content-type", b"application/json"), (b"content-length", b"78643200")]
    if authorization is not None:
        headers.append((b"authorization", authorization))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/annotate",
        "raw_path": b"/v1/annotate",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("192.0.2.9", 1234),
        "server": ("testserver", 80),
        "state": {},
    }
    pg_client.portal.call(app, scope, receive, send)
    assert reads == []
    assert sent[0]["status"] == 401
    assert (b"www-authenticate", b"Bearer") in sent[0]["headers"]
    body = json.loads(sent[1]["body"])
    assert why in body["detail"] and body["type"] == "urn:mslm:problem:unauthorized"
    # a good key gets through to the route (which then reads the body and judges it)
    ok = pg_client.post("/v1/annotate", headers=auth(ANNOTATE), content=b"{}")
    assert ok.status_code == 422


def test_an_unknown_job_state_filter_is_422_naming_the_field(pg_client):
    """Issue 19: GET /v1/jobs?state=null answered 404."""
    from typing import get_args

    from api.schemas import JobState
    from store.tables import STATES

    assert get_args(JobState) == STATES
    response = pg_client.get("/v1/jobs?state=null", headers=auth(TRAIN))
    assert response.status_code == 422 and _fields(response) == ["query.state"]


def test_the_document_lists_the_strategies_and_this_deployments_encoders(pg_client):
    """Issue 19: schemathesis sent a strategy 'X' and a base_model '' that the document allowed
    and the API refused (422): the document now says which values there are."""
    from mslm_core.config import STRATEGY_CHOICES

    job = pg_client.get("/openapi.json").json()["components"]["schemas"]["JobCreate"]
    assert job["properties"]["strategy"]["anyOf"][0]["enum"] == list(STRATEGY_CHOICES)
    assert job["properties"]["base_model"]["anyOf"][0]["enum"] == ["tiny"]  # MSLM_BASE_MODELS
    response = pg_client.post(
        "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": "d", "strategy": "X"}
    )
    assert response.status_code == 422 and _fields(response) == ["body.strategy"]
    assert pg_client.get("/v1/jobs?state=queued", headers=auth(TRAIN)).json()["count"] == 0


def test_a_train_key_sees_and_changes_only_its_own_datasets_and_jobs(pg_client, tmp_path, caplog):
    """Issue 18, item 10: any train key used to see, delete and reuse the idempotency key of
    every other key's datasets and jobs; rows now record their owner key id."""
    caplog.set_level(logging.INFO, logger="mslm.access")
    mine = upload_toy(pg_client, tmp_path / "a", key=TRAIN)
    theirs = upload_toy(pg_client, tmp_path / "b", key=TRAIN2)
    assert (
        mine["created_by"] and theirs["created_by"] and mine["created_by"] != theirs["created_by"]
    )
    assert TRAIN not in mine["created_by"] and TRAIN[:12] not in caplog.text  # ids, not secrets

    def ids(path: str, key: str) -> set[str]:
        body = pg_client.get(path, headers=auth(key)).json()
        assert body["count"] == len(body["data"])
        return {row["id"] for row in body["data"]}

    assert ids("/v1/datasets", TRAIN) == {mine["id"]}
    assert ids("/v1/datasets", TRAIN2) == {theirs["id"]}
    assert ids("/v1/datasets", ADMIN) == {mine["id"], theirs["id"]}
    other = f"/v1/datasets/{theirs['id']}"
    assert pg_client.get(other, headers=auth(TRAIN)).status_code == 404  # as if absent
    assert pg_client.delete(other, headers=auth(TRAIN)).status_code == 404
    assert pg_client.get(other, headers=auth(TRAIN2)).status_code == 200  # still there

    def submit(key: str, dataset: dict, idem: str = "nightly"):
        body = {"dataset_id": dataset["id"], "epochs": 1, "idempotency_key": idem}
        return pg_client.post("/v1/jobs", headers=auth(key), json=body)

    assert submit(TRAIN, theirs).status_code == 404  # another key's dataset
    first = submit(TRAIN, mine)
    assert first.status_code == 202 and first.json()["created_by"] == mine["created_by"]
    assert submit(TRAIN, mine).json()["id"] == first.json()["id"]  # idempotent, same key
    second = submit(TRAIN2, theirs)  # the same idempotency key, another API key: its own job
    assert second.status_code == 202 and second.json()["id"] != first.json()["id"]
    job_a, job_b = first.json()["id"], second.json()["id"]
    assert ids("/v1/jobs", TRAIN) == {job_a} and ids("/v1/jobs", TRAIN2) == {job_b}
    assert ids("/v1/jobs", ADMIN) == {job_a, job_b}
    assert pg_client.get(f"/v1/jobs/{job_b}", headers=auth(TRAIN)).status_code == 404
    assert pg_client.post(f"/v1/jobs/{job_b}/cancel", headers=auth(TRAIN)).status_code == 404
    assert pg_client.get(f"/v1/jobs/{job_b}", headers=auth(TRAIN2)).json()["state"] == "queued"
    cancelled = pg_client.post(f"/v1/jobs/{job_b}/cancel", headers=auth(ADMIN))
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    # the access log names the key id of every mutating request
    posts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("POST /v1/")]
    assert len(posts) == 8  # 2 uploads, 4 jobs, 2 cancels
    assert all(" key=key-" in m for m in posts)
    assert f"key={mine['created_by']}" in posts[0] and f"key={theirs['created_by']}" in posts[1]


def test_a_huge_header_is_refused_without_being_read(tmp_path, tiny_encoder):
    """Issue 18 item 4: a 100 MB Authorization header was read whole (401 after 12 s) and
    stalled /healthz for 4 s. The head of a request is now bounded at 16 KiB (api.http): the
    connection is answered 431 and closed."""
    import socket
    from urllib.parse import urlparse

    import httpx
    from service_helpers import serving

    from api.cli import uvicorn_options

    settings = make_settings(tmp_path, tiny_encoder)
    options = {k: v for k, v in uvicorn_options(settings).items() if k != "log_config"}
    from api.http import BoundedHttpToolsProtocol

    assert issubclass(options["http"], BoundedHttpToolsProtocol)
    with serving(create_app(settings), **options) as url, httpx.Client(base_url=url) as c:
        sent = 0
        answer = b""
        with socket.create_connection(("127.0.0.1", urlparse(url).port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
            try:
                for _ in range(100 * 1024):  # up to 100 MiB, 1 KiB at a time
                    sock.sendall(b"k" * 1024)
                    sent += 1024
            except OSError:  # the server closed the connection
                pass
            try:
                answer = sock.recv(4096)
            except OSError:
                answer = b""
        # refused after the first 16 KiB: what was sent beyond sat in socket buffers (a few
        # MiB on loopback) until the server closed the connection — never the 100 MiB
        assert sent < 32 * 1024 * 1024
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431")
        assert c.get("/healthz").status_code == 200
        # ordinary headers (keys, request ids) are far below the limit
        r = c.get("/v1/jobs", headers={**auth(TRAIN), "X-Request-ID": "r" * 100})
        assert r.status_code == 200


def test_a_body_arriving_too_slowly_is_cut_off_and_its_connection_may_be_closed(
    tmp_path, tiny_encoder
):
    """Issue 58 item 2, in process: a body sent a byte at a time is answered 408 and closed
    past MSLM_HEADER_TIMEOUT_SECONDS plus its length at MSLM_MIN_BODY_RATE_KB; over the
    connection cap, a connection still sending its body is one that may be closed for a new
    client; a body that arrives in time is served."""
    import socket
    import time
    from urllib.parse import urlparse

    import httpx
    from service_helpers import serving

    from api.cli import uvicorn_options

    settings = make_settings(
        tmp_path, tiny_encoder, header_timeout_seconds=1, min_body_rate_kb=64, max_connections=4
    )
    options = {k: v for k, v in uvicorn_options(settings).items() if k != "log_config"}
    head = (
        "POST /v1/datasets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TRAIN}\r\nContent-Length: 65536\r\n\r\n"
    ).encode()
    with serving(create_app(settings), **options) as url, httpx.Client(base_url=url) as c:
        port = urlparse(url).port
        slow = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
        for sock in slow:
            sock.sendall(head + b"{")  # then nothing more
        time.sleep(0.3)
        # the cap is full of connections still sending bodies: a new client is served, one of
        # them closed for it
        assert c.get("/healthz").status_code == 200
        started = time.monotonic()
        answers = []
        for sock in slow:
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            answers.append(data.split(b"\r\n", 1)[0])
            sock.close()
        waited = time.monotonic() - started
        assert b"HTTP/1.1 408 Request Timeout" in answers, answers  # 1 s + 1 s of body
        assert waited < 5, waited
        assert c.get("/healthz").status_code == 200


def test_a_worker_waits_for_the_schema_before_it_touches_a_table(tmp_path):
    """CI failure: ``mslm worker`` started beside ``mslm serve`` swept its leftovers before
    the API had migrated the new database ('relation "jobs" does not exist') and died; the job
    stayed queued for ever. The worker now waits until the schema is at head."""
    import time

    from store.migrate import upgrade, wait_for_schema

    url = f"sqlite:///{tmp_path / 'late.db'}"
    with pytest.raises(SystemExit, match="run mslm migrate"):
        wait_for_schema(url, timeout_s=0.3, every_s=0.1)  # nothing migrates it: a clear exit
    threading.Timer(0.5, upgrade, args=(url,)).start()  # the API migrates it a moment later
    started = time.monotonic()
    wait_for_schema(url, timeout_s=60, every_s=0.1)
    assert 0.4 < time.monotonic() - started < 30


def test_a_json_body_s_shape_is_checked_whatever_its_content_type_headers_say(pg_client):
    """Issue 58 item 3: with Content-Type application/json then text/plain, the middleware
    read the last header and skipped the shape check while FastAPI read the first and parsed
    a 63 MB body of 4.5 M thresholds on the event loop. Two Content-Type headers are refused;
    one is the one checked; a body with none is checked too (a FastAPI that is not strict
    about content types parses it as JSON)."""
    entries = b",".join(b'"t%d":0.5' % i for i in range(60_000))
    body = b'{"texts":["x"],"min_confidence_per_type":{' + entries + b"}}"
    key = [("authorization", f"Bearer {ANNOTATE}")]
    twice = [("content-type", "application/json"), ("content-type", "text/plain")]
    r = pg_client.post("/v1/annotate", content=body, headers=key + twice)
    assert r.status_code == 400 and "more than one Content-Type" in r.json()["detail"]
    for given in ([twice[0]], []):
        r = pg_client.post("/v1/annotate", content=body, headers=key + given)
        assert r.status_code == 413 and "more than 50,000 values" in r.json()["detail"]


@pytest.mark.parametrize("fmt", ["json", "bioc", "pubtator", "labelstudio"])
def test_a_nul_or_lone_surrogate_in_a_text_is_a_422_saying_where(pg_client, fmt):
    """Issue 58 item 8: ``\\ud800`` in /v1/annotate with format bioc, pubtator or labelstudio
    was a 500 with a traceback (and the connection dropped): no UTF-8 answer can hold it."""
    for text, says in (("fever \ud800 today", "lone surrogate (U+D800)"), ("a\x00b", "a NUL")):
        body = json.dumps({"texts": ["fine", text], "format": fmt}).encode()
        r = pg_client.post(
            "/v1/annotate",
            content=body,
            headers={**auth(ANNOTATE), "content-type": "application/json"},
        )
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "body.texts.1" and says in r.json()["detail"]


def test_notes_uploads_with_a_nul_or_lone_surrogate_keep_their_other_notes(pg_client):
    """Issue 58 item 8: a notes id "a\\u0000b", and a notes JSONL holding \\ud800, were 500s
    on PostgreSQL (which refuses NUL in text); the note is a problem, the others are kept."""
    lines = [
        json.dumps({"id": "a\x00b", "text": "fever"}),
        json.dumps({"id": "2", "text": "cough \ud800"}),
        json.dumps({"id": "3", "text": "no fever"}),
    ]
    r = pg_client.post(
        "/v1/annotation-jobs/inputs",
        headers=auth(ANNOTATE),
        files={"file": ("n.jsonl", ("\n".join(lines) + "\n").encode())},
    )
    assert r.status_code == 201, r.text
    assert r.json()["notes"] == 1
    problems = r.json()["problems"]
    assert [p["where"] for p in problems] == ["note 1", "note 2"]
    assert problems[0]["id"] is None and "its id holds a NUL character" in problems[0]["reason"]
    assert problems[1]["id"] == "2" and "lone surrogate" in problems[1]["reason"]


def test_label_studio_ids_with_a_nul_or_of_megabytes_are_refused(tmp_path, tiny_encoder):
    """Issue 58 items 8 and 14: a Label Studio annotation id with a NUL was a 500; a 3 MB one
    was stored."""
    settings = make_settings(tmp_path, tiny_encoder, api_keys=f"{KEYS},{LS}:annotate+train")
    config = (
        '<View><Labels name="label" toName="text"><Label value="disease"/></Labels>'
        '<Text name="text" value="$note"/></View>'
    )
    with TestClient(create_app(settings)) as c:
        setup = {"project": "5.1", "schema": config, "hostname": "http://ls", "access_token": "x"}
        assert c.post("/labelstudio/setup", headers=auth(LS), json=setup).status_code == 200
        for bad, says in (("a\x00b", "a NUL"), ("x" * 3_000_000, "longer than 200")):
            event = {
                "action": "ANNOTATION_CREATED",
                "project": {"id": 5, "label_config": config},
                "annotation": {"id": bad, "task": 1, "result": []},
                "task": {"id": 1, "data": {"note": "fever"}},
            }
            r = c.post("/labelstudio/webhook", headers=auth(LS), json=event)
            assert r.status_code == 422, r.text[:300]
            assert r.json()["errors"][0]["field"] == "body.annotation.id"
            assert says in r.json()["detail"]


@pytest.mark.reliability
def test_import_model_refuses_an_id_that_is_not_a_folder_name(
    tmp_path, tiny_encoder, toy_corpus, record
):
    """Issue 58 item 11: a manifest whose id was "../../../escaped-bundle" was written outside
    the artifacts folder and registered; an absolute id left its copy behind."""
    from conftest import toy_config

    from mslm_core.bundle import MANIFEST
    from mslm_core.errors import BundleError
    from mslm_core.train import train
    from store.db import session_factory
    from store.migrate import upgrade
    from store.models import import_bundle

    bundle = tmp_path / "bundle"
    train(toy_config(toy_corpus, tiny_encoder, epochs=1), bundle)
    settings = make_settings(tmp_path / "home", tiny_encoder)
    upgrade(settings.sqlalchemy_url)
    manifest = json.loads((bundle / MANIFEST).read_text())
    refusals = {}
    for bad_id in ("../../../escaped-bundle", str(tmp_path / "absolute-bundle"), ".."):
        (bundle / MANIFEST).write_text(json.dumps({**manifest, "id": bad_id}))
        session = session_factory(settings.sqlalchemy_url)()
        with session, pytest.raises(BundleError, match="letters, digits") as refused:
            import_bundle(settings, session, bundle)
        shown = bad_id.replace(str(tmp_path), "<tmp>")
        refusals[shown] = str(refused.value).replace(str(tmp_path), "<tmp>")[:120]
    written = [p for p in tmp_path.rglob("*") if "escaped" in p.name or "absolute" in p.name]
    staging = list(settings.artifacts.rglob(".staging-*"))
    assert written == [] and staging == []
    record(
        "round 4, item 11: a manifest's id as a path",
        "mslm import-model of a bundle whose manifest id is '../../../escaped-bundle', an "
        "absolute path, and '..' (before: written outside the artifacts folder and registered; "
        "an absolute id left its copy behind)",
        {"refusals": refusals, "written_outside": len(written), "staging_left": len(staging)},
        "refused before anything is copied: an id is a folder name (letters, digits, '.', '_' "
        "and '-', starting with a letter or a digit)",
    )


def test_a_model_with_a_queued_annotation_job_is_not_deleted(tmp_path, tiny_encoder, postgres_url):
    """Issue 58 item 14: a model deleted while an annotation job on it was queued answered
    204, and the job failed later. While a job on it is queued or running, delete is a 409
    naming the job; once the job has ended, the model may go."""
    from store.db import session_factory
    from store.errors import Conflict
    from store.migrate import upgrade
    from store.models import delete_model
    from store.tables import QUEUED, SUCCEEDED, AnnotationJob, Model

    settings = make_settings(tmp_path, tiny_encoder, database_url=postgres_url)
    upgrade(settings.sqlalchemy_url)
    factory = session_factory(settings.sqlalchemy_url)
    with factory() as session:
        session.add(Model(id="m-used", path="models/m-used", base_model="x", strategy="v"))
        session.add(AnnotationJob(id="aj-1", model_id="m-used", state=QUEUED, chunk_size=10))
        session.commit()
        with pytest.raises(Conflict, match="annotation job aj-1"):
            delete_model(settings, session, "m-used")
        assert session.get(Model, "m-used") is not None
        session.get(AnnotationJob, "aj-1").state = SUCCEEDED
        session.commit()
        delete_model(settings, session, "m-used")
        assert session.get(Model, "m-used") is None


def test_a_model_s_manifest_shows_an_annotate_key_no_server_path_nor_others_datasets(pg_client):
    """Issue 58 item 14: /v1/models/{id} showed annotate keys the server's paths and the ids
    of other keys' datasets. An admin sees the manifest whole; a key without the admin scope
    sees file names for paths and no dataset id that is not its own."""
    from store.tables import Model

    settings = pg_client.app.state.settings
    folder = settings.artifacts / "models" / "m-shown"
    folder.mkdir(parents=True)
    manifest = {
        "id": "m-shown",
        "config": {
            "base_model": "/srv/encoders/secret-encoder",
            "sources": [{"name": "ds-0123456789abcdef", "train": "/srv/mslm/datasets/x/train.tsv"}],
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pg_client.app.state.mslm.factory() as session:
        session.add(Model(id="m-shown", path="models/m-shown", base_model="x", strategy="v"))
        session.commit()
    admin = pg_client.get("/v1/models/m-shown", headers=auth(ADMIN)).json()["manifest"]
    assert admin == manifest
    shown = pg_client.get("/v1/models/m-shown", headers=auth(ANNOTATE))
    assert shown.status_code == 200, shown.text
    text = json.dumps(shown.json()["manifest"])
    assert "/srv" not in text and "ds-0123456789abcdef" not in text
    assert shown.json()["manifest"]["config"]["base_model"] == "secret-encoder"
    assert shown.json()["manifest"]["config"]["sources"][0]["train"] == "train.tsv"


def test_no_redirect_reflects_the_host_header(pg_client):
    """Issue 58 item 14: the trailing-slash 307 built its Location from the Host header. A
    path with an extra slash is a 404 with no Location, whatever the Host says."""
    response = pg_client.get(
        "/v1/models/", headers={**auth(ANNOTATE), "Host": "evil.example"}, follow_redirects=False
    )
    assert response.status_code == 404
    assert "location" not in response.headers
    assert "evil.example" not in response.text


def test_the_access_log_names_the_key_of_a_request_refused_before_its_route(pg_client, caplog):
    """Issue 58 item 14: a keyed request refused before the route (a scope it lacks) was
    logged with key=-. The access line names the key id (never the key)."""
    with caplog.at_level(logging.INFO, logger="mslm.access"):
        response = pg_client.post("/v1/models/m-x/activate", headers=auth(ANNOTATE))
    assert response.status_code == 403
    lines = [r.getMessage() for r in caplog.records if " 403 " in r.getMessage()]
    assert lines, [r.getMessage() for r in caplog.records]
    assert "key=-" not in lines[-1] and "key=" in lines[-1]
    assert ANNOTATE not in lines[-1]
