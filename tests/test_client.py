"""The Python client (``mslm_client``).

Retries and back-off are checked at the HTTP level with ``httpx.MockTransport`` (no sleeping:
the sleep function is injected). Everything else runs against the real service: the FastAPI
app in a uvicorn server on a free localhost port (SQLite store, embedded broker, the tiny
encoder), with a worker thread that runs queued jobs and evaluations through the worker's
own runner — the client sees what it would see in production.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pandas as pd
import pytest
from service_helpers import ADMIN, ANNOTATE, JOB, TRAIN, make_settings, serving, toy_files
from sqlalchemy import select

from api.main import create_app
from mslm_client import (
    APIConnectionError,
    APIError,
    AsyncClient,
    AuthenticationError,
    Client,
    ConflictError,
    Dataset,
    Entity,
    Job,
    JobDataset,
    JobError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    ValidationError,
)
from mslm_settings import Settings
from store.db import session_factory
from store.tables import Evaluation
from store.tables import Job as JobRow
from worker.runner import run_evaluation, run_training_job

TEXTS = [
    "Cisplatin caused renal failure in the patient .",
    "The patient has breast cancer .",
    "Aspirin reduces fever .",
    "No sign of diabetes or cancer today .",
    "",
    "The patient was treated with cisplatin for cancer .",
    "Renal failure and fever were seen in patients .",
]


# -- unit level: retries and back-off over httpx.MockTransport ----------------------------------
def _job_json(state: str = "queued", **extra: Any) -> dict[str, Any]:
    return {
        "id": "job-1",
        "state": state,
        "dataset_id": "ds-1",
        "params": {},
        "export": {"onnx": True, "quantize": None},
        "created_at": "2025-01-01T00:00:00Z",
        "started_at": None,
        "finished_at": None,
        "attempts": 0,
        "cancel_requested": False,
        "progress": {},
        "history": [],
        "metrics": {},
        "model_id": None,
        "error": None,
        **extra,
    }


def _problem(status: int, detail: str, **headers: str) -> httpx.Response:
    body = {"type": "about:blank", "title": "t", "status": status, "detail": detail}
    return httpx.Response(
        status, json=body, headers={"content-type": "application/problem+json", **headers}
    )


class Script:
    """A MockTransport handler answering from a list, recording every request."""

    def __init__(self, *answers: httpx.Response | Exception):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _client(script: Script, sleeps: list[float], **kwargs: Any) -> Client:
    return Client(
        "http://mslm.test",
        api_key="k" * 20,
        transport=httpx.MockTransport(script),
        sleep=sleeps.append,
        **kwargs,
    )


def test_503_with_retry_after_is_retried_once_after_that_delay():
    script = Script(
        _problem(503, "model loading", **{"retry-after": "2"}),
        httpx.Response(200, json=_job_json()),
    )
    sleeps: list[float] = []
    with _client(script, sleeps) as client:
        job = client.get_job("job-1")
    assert isinstance(job, Job) and job.state == "queued" and job.id == "job-1"
    assert sleeps == [2.0] and len(script.requests) == 2
    first, second = script.requests
    assert first.headers["authorization"] == "Bearer " + "k" * 20
    assert first.url == "http://mslm.test/v1/jobs/job-1"
    # one request id for the logical call, so the service's log ties the attempts together
    assert first.headers["x-request-id"] == second.headers["x-request-id"]


def test_a_non_idempotent_post_is_not_retried():
    for status in (500, 503):
        script = Script(_problem(status, "boom"))
        sleeps: list[float] = []
        with _client(script, sleeps) as client, pytest.raises(ServerError) as caught:
            client.create_evaluation("m-1", "ds-1")
        assert caught.value.status == status and caught.value.detail == "boom"
        assert len(script.requests) == 1 and sleeps == []


def test_a_500_is_not_retried_even_for_a_get():
    script = Script(_problem(500, "internal"))
    with _client(script, []) as client, pytest.raises(ServerError):
        client.get_job("job-1")
    assert len(script.requests) == 1


def test_gives_up_after_max_retries_with_the_last_error_and_backs_off_exponentially():
    script = Script(*[_problem(502, f"attempt {i}") for i in range(4)])
    sleeps: list[float] = []
    with (
        _client(script, sleeps, max_retries=3, backoff=1.0) as client,
        pytest.raises(ServerError) as caught,
    ):
        client.list_models()
    assert len(script.requests) == 4 and caught.value.detail == "attempt 3"
    assert caught.value.status == 502
    # retry k waits in [d/2, d] with d = backoff × 2^k: jittered, growing
    assert len(sleeps) == 3
    for k, slept in enumerate(sleeps):
        assert 2**k / 2 <= slept <= 2**k


def test_a_retry_after_longer_than_the_cap_is_raised_not_slept():
    script = Script(_problem(429, "slow down", **{"retry-after": "3600"}))
    sleeps: list[float] = []
    with _client(script, sleeps) as client, pytest.raises(RateLimitError) as caught:
        client.list_jobs()
    assert caught.value.retry_after == 3600 and sleeps == []


def test_connection_errors_retry_only_what_is_safe_to_send_again():
    # never connected: even a new evaluation is retried (nothing reached the service)
    script = Script(httpx.ConnectError("refused"), httpx.Response(202, json=_eval_json()))
    sleeps: list[float] = []
    with _client(script, sleeps) as client:
        assert client.create_evaluation("m-1", "ds-1").id == "ev-1"
    assert len(script.requests) == 2 and len(sleeps) == 1
    # the request may have arrived: a new evaluation is not sent twice ...
    script = Script(httpx.ReadTimeout("no answer"))
    with _client(script, []) as client, pytest.raises(APIConnectionError):
        client.create_evaluation("m-1", "ds-1")
    assert len(script.requests) == 1
    # ... but a read is, and so is annotate (no side effect)
    ok = {"model": {"id": "m-1"}, "results": [{"entities": []}]}
    script = Script(httpx.ReadError("reset"), httpx.Response(200, json=ok))
    with _client(script, []) as client:
        assert client.annotate(["x"]).results[0].entities == []
    assert len(script.requests) == 2


def test_job_creation_sends_one_idempotency_key_per_call_and_is_retried():
    script = Script(
        _problem(503, "busy"),
        httpx.Response(202, json=_job_json()),
        httpx.Response(202, json=_job_json()),
    )
    with _client(script, []) as client:
        client.create_job("ds-1", epochs=3, quantize="int8")
        client.create_job("ds-1", epochs=3, quantize="int8")
    keys = [r.headers["idempotency-key"] for r in script.requests]
    assert keys[0] == keys[1] != keys[2]  # same call retried; a new call, a new key
    body = json.loads(script.requests[0].content)
    assert body == {"dataset_id": "ds-1", "epochs": 3, "export": {"onnx": True, "quantize": "int8"}}
    with _client(Script(), []) as client, pytest.raises(TypeError, match="epoch"):
        client.create_job("ds-1", epoch=3)


def test_a_job_on_several_datasets_sends_their_maps_and_weights():
    answer = {
        **_job_json(),
        "datasets": [
            {"id": "ds-1", "type_map": {"Chemical": "Drug"}, "weight": 0.5},
            {"id": None, "type_map": {"Proc": ["Procedure", "Test"]}, "weight": 1.0},
        ],
    }
    script = Script(httpx.Response(202, json=answer))
    with _client(script, []) as client:
        job = client.create_job(
            [
                JobDataset("ds-1", {"Chemical": "Drug"}, 0.5),
                JobDataset("ds-2", {"Proc": ["Procedure", "Test"]}),
            ],
            epochs=3,
        )
    body = json.loads(script.requests[0].content)
    assert body["datasets"] == [
        {"id": "ds-1", "type_map": {"Chemical": "Drug"}, "weight": 0.5},
        {"id": "ds-2", "type_map": {"Proc": ["Procedure", "Test"]}, "weight": 1.0},
    ]
    assert "dataset_id" not in body
    assert job.datasets == [
        JobDataset("ds-1", {"Chemical": "Drug"}, 0.5),
        JobDataset(None, {"Proc": ["Procedure", "Test"]}, 1.0),  # deleted since
    ]


def test_a_retried_delete_that_finds_nothing_succeeded_before():
    script = Script(httpx.ReadError("reset"), _problem(404, "dataset ds-1 not found"))
    with _client(script, []) as client:
        assert client.delete_dataset("ds-1") is None
    assert [r.method for r in script.requests] == ["DELETE", "DELETE"]
    script = Script(_problem(404, "dataset ds-1 not found"))  # not retried: a real 404
    with _client(script, []) as client, pytest.raises(NotFoundError):
        client.delete_dataset("ds-1")


def test_format_is_passed_through_only_when_given():
    pubtator = "1|t|Aspirin reduces fever .\n1\t0\t7\tAspirin\tChemical\n"
    script = Script(
        httpx.Response(200, json={"model": {"id": "m"}, "results": [{"entities": []}]}),
        httpx.Response(200, text=pubtator, headers={"content-type": "text/plain"}),
    )
    with _client(script, []) as client:
        client.annotate(["Aspirin reduces fever ."], min_confidence=0.5)
        assert client.annotate(["Aspirin reduces fever ."], format="pubtator") == pubtator
        with pytest.raises(TypeError, match="list of strings"):
            client.annotate("one string")
    first, second = (json.loads(r.content) for r in script.requests)
    assert first == {"texts": ["Aspirin reduces fever ."], "min_confidence": 0.5}
    assert second == {"texts": ["Aspirin reduces fever ."], "format": "pubtator"}


def test_wait_for_job_shows_progress_and_raises_with_the_job_error(capsys):
    running = {"epoch": 2, "epochs": 3, "step": 4, "steps": 6, "loss": 0.5, "dev_f1": 0.25}
    script = Script(
        httpx.Response(200, json=_job_json("running", progress=running)),
        httpx.Response(200, json=_job_json("failed", progress=running, error="out of memory")),
    )
    sleeps: list[float] = []
    with _client(script, sleeps) as client, pytest.raises(JobError) as caught:
        client.wait_for_job("job-1", poll_interval=0.5)
    assert caught.value.state == "failed" and caught.value.error == "out of memory"
    assert "out of memory" in str(caught.value) and sleeps == [0.5]
    err = capsys.readouterr().err
    assert "job-1" in err and "4/6" in err and "epoch 2/3" in err and "dev F1 0.250" in err


def test_the_environment_gives_url_and_key(monkeypatch):
    monkeypatch.setenv("MSLM_URL", "http://from-env:9000/")
    monkeypatch.setenv("MSLM_API_KEY", "env-key-0123456789")
    script = Script(httpx.Response(200, json={"status": "ok"}))
    with Client(transport=httpx.MockTransport(script)) as client:
        assert client.healthz() == {"status": "ok"}
        assert "env-key" not in repr(client)
    assert script.requests[0].url == "http://from-env:9000/healthz"
    assert script.requests[0].headers["authorization"] == "Bearer env-key-0123456789"


def test_async_client_retries_the_same_way():
    script = Script(
        _problem(429, "slow down", **{"retry-after": "1.5"}),
        httpx.Response(200, json=_job_json()),
    )
    sleeps: list[float] = []

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    async def main() -> Job:
        async with AsyncClient(
            "http://mslm.test",
            api_key="k" * 20,
            transport=httpx.MockTransport(script),
            sleep=record,
        ) as client:
            return await client.get_job("job-1")

    assert asyncio.run(main()).id == "job-1"
    assert sleeps == [1.5] and len(script.requests) == 2


def test_the_package_imports_without_pandas():
    code = "import sys; sys.modules['pandas'] = None; import mslm_client; print(mslm_client.Client)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Client" in out.stdout


def _eval_json() -> dict[str, Any]:
    return {
        "id": "ev-1",
        "state": "queued",
        "model_id": "m-1",
        "dataset_id": "ds-1",
        "split": "test",
        "created_at": "2025-01-01T00:00:00Z",
        "started_at": None,
        "finished_at": None,
        "metrics": {},
        "error": None,
    }


# -- against the real service -----------------------------------------------------------------
class EagerWorker(threading.Thread):
    """Runs queued jobs (of the datasets it is told about) and evaluations, with the worker's
    runner, as a Celery worker would."""

    def __init__(self, settings: Settings):
        super().__init__(daemon=True, name="eager-worker")
        self.settings, self.datasets = settings, set[str]()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.factory = session_factory(settings.sqlalchemy_url)

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self._once()
            except Exception as exc:  # e.g. SQLite busy: keep working, say what it was
                self.errors.append(repr(exc))

    def _once(self) -> None:
        with self.factory() as session:
            jobs = session.scalars(
                select(JobRow.id).where(
                    JobRow.state == "queued", JobRow.dataset_id.in_(self.datasets)
                )
            ).all()
            evaluations = session.scalars(
                select(Evaluation.id).where(Evaluation.state == "queued")
            ).all()
        for job_id in jobs:
            run_training_job(job_id, self.settings)
        for evaluation_id in evaluations:
            run_evaluation(evaluation_id, self.settings)


@pytest.fixture(scope="module")
def service(tmp_path_factory, tiny_encoder) -> Iterator[tuple[str, Settings, EagerWorker]]:
    settings = make_settings(tmp_path_factory.mktemp("client-svc"), tiny_encoder)
    worker = EagerWorker(settings)
    worker.start()
    try:
        with serving(create_app(settings)) as base:
            yield base, settings, worker
    finally:
        worker.stop.set()
        worker.join(timeout=60)


@pytest.fixture(scope="module")
def trained(service, tmp_path_factory) -> tuple[Dataset, Job]:
    """A dataset uploaded, a job run to completion and its model activated — by the client."""
    url, _, worker = service
    files = toy_files(tmp_path_factory.mktemp("client-corpus"))
    with Client(url, api_key=TRAIN) as client:
        dataset = client.upload_dataset(
            "toy", train=files["train"], dev=files["dev"], test=files["test"]
        )
        worker.datasets.add(dataset.id)
        job = client.run_job(dataset.id, **JOB, poll_interval=0.2, timeout=300)
    assert job.model_id is not None, worker.errors
    with Client(url, api_key=ADMIN) as admin:
        assert admin.activate_model(job.model_id).active
    return dataset, job


def test_upload_and_run_a_job_to_completion(service, trained):
    url = service[0]
    dataset, job = trained
    assert dataset.name == "toy" and set(dataset.files) == {"train", "dev", "test"}
    assert dataset.files["train"].filename == "train.tsv" and "Disease" in dataset.types
    assert job.state == "succeeded" and job.progress.done and job.finished
    assert job.progress.epochs == JOB["epochs"] and job.progress.steps
    with Client(url, api_key=TRAIN) as client:
        assert client.get_dataset(dataset.id) == dataset
        listed = client.list_datasets()
        assert dataset.id in {d.id for d in listed.data} and listed.count >= 1
        history = client.job_history(job.id)
        assert 1 <= len(history) <= JOB["epochs"] and all("dev_f1" in h for h in history)
        jobs = client.list_jobs(state="succeeded")
        assert [j.id for j in jobs.data] == [job.id] and jobs.count == 1
        assert client.get_job(job.id).params["epochs"] == JOB["epochs"]
    with Client(url, api_key=ANNOTATE) as client:
        models = client.list_models()
        assert models.count == 1 and models.data[0].id == job.model_id and models.data[0].active
        model = client.get_model(job.model_id)
        assert model.manifest and model.manifest["id"] == job.model_id
        assert client.model_calibration_png(job.model_id).startswith(b"\x89PNG")
        ready = client.readyz()
        assert ready.ready and ready.model and ready.model.id == job.model_id
        assert client.healthz() == {"status": "ok"}


def test_annotate_and_evaluate(service, trained):
    url = service[0]
    dataset, job = trained
    with Client(url, api_key=ADMIN) as client:
        answer = client.annotate(TEXTS, min_confidence=0.0)
        assert answer.model.id == job.model_id and len(answer.results) == len(TEXTS)
        found = {(e.text, e.type) for e in answer.results[0].entities}
        assert ("renal failure", "Disease") in found
        for text, result in zip(TEXTS, answer.results, strict=True):
            assert all(text[e.start : e.end] == e.text for e in result.entities)
        assert answer.results[4].entities == []
        # clinical context comes back typed
        negated = client.annotate(["No sign of diabetes or cancer today ."]).results[0].entities
        assert {e.text for e in negated} == {"diabetes", "cancer"}
        for e in negated:
            assert e.assertion is not None and e.assertion.negated and not e.present
            assert [(c.attribute, c.text, c.start, c.end) for c in e.assertion.cues] == [
                ("negated", "No sign of", 0, 10)
            ]
            assert Entity.from_dict(e.to_dict()) == e
        assert all(e.assertion is not None and e.present for e in answer.results[0].entities)
        strict = client.annotate(TEXTS[:1], min_confidence_per_type={"Disease": 1.01})
        assert all(e.type != "Disease" for e in strict.results[0].entities)
        # other formats are passed through and come back as the service renders them
        pubtator = client.annotate(TEXTS[:1], format="pubtator")
        assert isinstance(pubtator, str) and "\trenal failure\tDisease" in pubtator
        bioc = client.annotate(TEXTS[:2], format="bioc")
        assert isinstance(bioc, dict) and len(bioc["documents"]) == 2
        evaluation = client.create_evaluation(job.model_id, dataset.id, "test")
        assert evaluation.state == "queued"
        done = client.wait_for_evaluation(evaluation.id, poll_interval=0.2, timeout=300)
        assert done.state == "succeeded" and done.metrics["n_gold"] == 7
        assert client.evaluation_calibration_png(evaluation.id).startswith(b"\x89PNG")


def test_annotate_iter_batches_lazily_and_keeps_the_order(service, trained):
    url = service[0]
    bodies: list[list[str]] = []

    def record(request: httpx.Request) -> None:
        if request.url.path == "/v1/annotate":
            bodies.append(json.loads(request.content)["texts"])

    consumed: list[str] = []

    def texts() -> Iterator[str]:
        for text in TEXTS:
            consumed.append(text)
            yield text

    http = httpx.Client(event_hooks={"request": [record]})
    with Client(url, api_key=ANNOTATE, http_client=http) as client:
        one_by_one = [client.annotate([t]).results[0].entities for t in TEXTS]
        bodies.clear()
        stream = client.annotate_iter(texts(), batch_size=3)
        assert consumed == []  # nothing read before the first result is asked for
        first = next(stream)
        assert len(consumed) == 3 and len(bodies) == 1
        rest = list(stream)
    http.close()
    assert [first, *rest] == one_by_one  # batch output equals one-by-one output, in order
    assert bodies == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:7]]
    assert any(one_by_one)  # the comparison is not between empty lists only


def test_annotate_series_aligns_to_the_index(service, trained):
    url = service[0]
    index = pd.Index([70, 10, 50, 20, 60, 30, 40, 99], name="note_id")
    values = [TEXTS[6], TEXTS[0], TEXTS[5], TEXTS[1], None, TEXTS[2], TEXTS[3], TEXTS[4]]
    series = pd.Series(values, index=index, name="note")
    with Client(url, api_key=ANNOTATE) as client:
        expected = {t: client.annotate([t]).results[0].entities for t in TEXTS}
        out = client.annotate_series(series, batch_size=2)
    assert isinstance(out, pd.Series) and out.name == "note"
    assert out.index.equals(series.index)
    for note_id, text in zip(index, values, strict=True):
        entities = out[note_id]
        assert entities == ([] if text is None else expected[text])
        assert all(isinstance(e, Entity) and text[e.start : e.end] == e.text for e in entities)
    assert {e.text for e in out[10]} >= {"renal failure"}


def test_errors_carry_status_problem_and_request_id(service, trained, tmp_path):
    url = service[0]
    with Client(url, api_key="") as anonymous, pytest.raises(AuthenticationError) as caught:
        anonymous.list_jobs()
    error = caught.value
    assert error.status == 401 and error.title == "Unauthorized" and error.request_id
    assert error.type == "urn:mslm:problem:unauthorized" and "API key" in (error.detail or "")
    with Client(url, api_key=ANNOTATE) as client, pytest.raises(PermissionDeniedError) as denied:
        client.list_jobs()
    assert denied.value.status == 403 and "'train'" in str(denied.value)
    with Client(url, api_key=ADMIN) as client:
        with pytest.raises(NotFoundError) as missing:
            client.get_job("job-does-not-exist")
        assert missing.value.status == 404 and "job-does-not-exist" in (missing.value.detail or "")
        with pytest.raises(ValidationError) as invalid:
            client.annotate(["text"], min_confidence=2.0)
        assert invalid.value.status == 422
        assert [e["field"] for e in invalid.value.errors] == ["body.min_confidence"]
        bad = tmp_path / "bad.tsv"
        bad.write_bytes(b"The\tO\npatient\tX-Disease\n")
        with pytest.raises(ValidationError) as corpus:
            client.upload_dataset(train=bad)
        where = corpus.value.errors[0]
        assert "bad.tsv" in where["file"] and where["line"] == 2
        assert isinstance(corpus.value, APIError) and f"{where['file']}:2" in str(corpus.value)


def test_waiting_for_a_cancelled_job_raises(service, trained, tmp_path):
    url = service[0]
    files = toy_files(tmp_path)
    with Client(url, api_key=TRAIN) as client:
        other = client.upload_dataset(train=files["train"].read_bytes())  # the worker ignores it
        job = client.create_job(other.id, epochs=1)
        assert job.state == "queued"
        assert client.cancel_job(job.id).state == "cancelled"
        with pytest.raises(JobError) as caught:
            client.wait_for_job(job.id, progress=False)
        assert caught.value.state == "cancelled" and caught.value.job.id == job.id
        client.delete_dataset(other.id)  # its only job is finished
        with pytest.raises(NotFoundError):
            client.get_dataset(other.id)
    with Client(url, api_key=ADMIN) as admin, pytest.raises(ConflictError):
        admin.delete_model(trained[1].model_id)  # the served model


def test_async_client_against_the_service(service, trained):
    url = service[0]
    _, job = trained

    async def texts() -> AsyncIterator[str]:
        for text in TEXTS * 3:
            await asyncio.sleep(0)
            yield text

    async def main() -> None:
        async with AsyncClient(url, api_key=ADMIN) as client:
            assert await client.healthz() == {"status": "ok"}
            assert (await client.get_job(job.id)).state == "succeeded"
            answer = await client.annotate(TEXTS)
            expected = [r.entities for r in answer.results]
            streamed = [e async for e in client.annotate_iter(texts(), batch_size=2, concurrency=3)]
            assert streamed == expected * 3
            series = pd.Series(TEXTS, index=list("gfedcba"))
            out = await client.annotate_series(series, batch_size=3)
            assert out.index.equals(series.index) and list(out) == expected
            with pytest.raises(NotFoundError):
                await client.get_model("no-such-model")
            with pytest.raises(ValidationError) as invalid:
                await client.annotate([])
            assert invalid.value.errors[0]["field"] == "body.texts"

    asyncio.run(main())


def test_an_entity_reads_its_concept_and_candidates():
    """Issue 21: concept and candidates when the service links; None when it does not."""
    base = {
        "start": 0,
        "end": 8,
        "text": "diabetes",
        "type": "Disease",
        "confidence": 0.9,
        "detection_score": 0.95,
        "type_score": 0.95,
    }
    plain = Entity.from_dict(base)
    assert plain.concept is None and plain.candidates is None and plain.to_dict() == base
    mesh = {"id": "D003920", "name": "Diabetes Mellitus", "score": 1.0, "vocabulary": "MeSH"}
    url = "https://meshb.nlm.nih.gov/record/ui?ui=D003920"
    linked = {**base, "concept": {**mesh, "url": url}, "candidates": [{**mesh, "url": url}]}
    entity = Entity.from_dict(linked)
    assert entity.concept is not None and entity.concept.id == "D003920"
    assert entity.concept.url == url and entity.candidates == (entity.concept,)
    assert entity.to_dict() == linked
    below = Entity.from_dict({**base, "concept": None, "candidates": []})
    assert below.concept is None and below.candidates == ()


def test_vocabularies_are_imported_activated_and_deleted(service, trained, tmp_path):
    url = service[0]
    tsv = tmp_path / "site.tsv"
    tsv.write_text("# Site: a test\nD051437\tRenal Insufficiency\trenal failure\n", "utf-8")
    with Client(url, api_key=ADMIN) as client:
        vocabulary = client.import_vocabulary(tsv, url_pattern="https://x.example/{id}")
        assert (vocabulary.name, vocabulary.concepts, vocabulary.active) == ("Site", 1, False)
        page, linking = client.list_vocabularies()
        assert [v.id for v in page.data] == [vocabulary.id] and linking.id == "default"
        linking = client.activate_vocabulary(vocabulary.id)
        assert (linking.id, linking.origin, linking.rerank) == (vocabulary.id, "store", None)
        entities = client.annotate(TEXTS[:1]).results[0].entities
        renal = next(e for e in entities if e.text == "renal failure")
        assert renal.concept is not None and renal.concept.id == "D051437"
        assert renal.concept.url == "https://x.example/D051437"
        with pytest.raises(ConflictError):
            client.delete_vocabulary(vocabulary.id)
        assert client.activate_vocabulary("default").origin == "none"
        client.delete_vocabulary(vocabulary.id)
        with pytest.raises(NotFoundError):
            client.get_vocabulary(vocabulary.id)
        with pytest.raises(ValidationError) as refused:
            client.import_vocabulary(b"D 1\tname\n")
        assert refused.value.status == 422


# -- the REST contract, declared on the service and mirrored here (issue 32) -------------------
CONTRACT = {  # client dataclass → the API's response model
    "Cue": "CueOut",
    "Concept": "ConceptOut",
    "Entity": "EntityOut",
    "TextResult": "TextResult",
    "ServedModel": "ServedModel",
    "LinkedVocabulary": "LinkedVocabulary",
    "AnnotateResponse": "AnnotateResponse",
    "SplitFile": "SplitFile",
    "Dataset": "DatasetOut",
    "DatasetVersion": "DatasetVersionOut",
    "VersionChange": "VersionChange",
    "Suggestion": "Suggestion",
    "Suggestions": "SuggestResponse",
    "JobDataset": "JobDatasetOut",
    "Job": "JobOut",
    "Model": "ModelDetail",
    "Vocabulary": "VocabularyOut",
    "Linking": "LinkingOut",
    "Evaluation": "EvaluationOut",
    "NoteFile": "NoteInputOut",
    "AnnotationJob": "AnnotationJobOut",
    "Relation": "RelationOut",
    "FactPart": "FactPart",
    "Medication": "MedicationOut",
    "Measurement": "MeasurementOut",
    "Facts": "FactsOut",
}


def _nullable(annotation) -> bool:
    import types
    import typing

    return type(None) in typing.get_args(annotation) and typing.get_origin(annotation) in (
        typing.Union,
        types.UnionType,
    )


def test_the_client_mirrors_every_response_field():
    """A field the service answers with is a field of the client's result, under the same name,
    None-able where the service may send null; the library's entity (what /v1/annotate
    renders) has the fields of the API's. Adding a field to one and not the others fails
    here."""
    import dataclasses
    import typing

    import api.schemas as service
    import mslm_client.results as client
    from mslm_core import types as core

    for ours, theirs in CONTRACT.items():
        mirror, model = getattr(client, ours), getattr(service, theirs)
        hints = typing.get_type_hints(mirror)
        assert {f.name for f in dataclasses.fields(mirror)} == set(model.model_fields), ours
        for name, info in model.model_fields.items():
            if _nullable(info.annotation):
                assert _nullable(hints[name]), f"{ours}.{name} may be null"
    for library, theirs in (
        (core.Entity, "EntityOut"),
        (core.LinkedConcept, "ConceptOut"),
        (core.Cue, "CueOut"),
    ):
        # an entity's head (mslm_core.relations) is answered as its result's relations, by
        # index, not on the entity
        names = [f.name for f in dataclasses.fields(library) if f.name != "head"]
        assert sorted(names) == sorted(getattr(service, theirs).model_fields), library
    assert set(client.JobProgress.__dataclass_fields__) >= {"epoch", "step", "loss", "done"}


def test_the_sync_and_async_clients_are_twins():
    """Both are drivers of the one sans-I/O protocol (``_core``, ``_endpoints``): each public
    method of one is a method of the other with the same parameters, kinds and defaults (the
    async one awaitable or an async iterator), but for the differences listed here — so that a
    method added to one and not the other, or changed in one only, fails here."""
    import inspect

    from mslm_client import AsyncClient, Client

    renamed = {"close": "aclose"}
    async_only = {"annotate_iter": {"concurrency"}, "annotate_series": {"concurrency"}}

    def public(cls) -> dict[str, object]:
        return {n: m for n, m in vars(cls).items() if not n.startswith("_") and callable(m)}

    sync, asynchronous = public(Client), public(AsyncClient)
    assert sorted(renamed.get(n, n) for n in sync) == sorted(asynchronous)
    for name, method in sync.items():
        twin = asynchronous[renamed.get(name, name)]
        returns = str(inspect.signature(twin).return_annotation)
        assert (
            inspect.iscoroutinefunction(twin)
            or inspect.isasyncgenfunction(twin)
            or returns.startswith("AsyncIterator")
        ), name
        ours, theirs = inspect.signature(method), inspect.signature(twin)
        extra = async_only.get(name, set())
        assert [p for p in theirs.parameters if p not in extra] == list(ours.parameters), name
        for p in ours.parameters.values():
            q = theirs.parameters[p.name]
            assert (p.kind, p.default) == (q.kind, q.default), f"{name}({p.name})"


def test_the_clients_suggest_defaults_are_the_services():
    """``Client.suggest`` sends every option, so its defaults must be the service's own: a
    default changed in ``SuggestRequest`` alone would silently not reach client users."""
    import inspect

    from api.schemas import SuggestRequest
    from mslm_client import Client

    params = inspect.signature(Client.suggest).parameters
    for name, field in SuggestRequest.model_fields.items():
        assert params[name].default == field.default, name
