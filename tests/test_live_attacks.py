"""Attacks on a live service, as an outside attacker runs them: against a real ``mslm serve``
on this machine's PostgreSQL and Redis, serving MiniLM bundles, with keys of each scope — slow
and huge requests, trigger words, races, killed processes, floods. One test per attack, in an
order that keeps one attack's after-effects (a throttled address, a killed process) out of the
next; each records what it measured for docs/reliability.md (``benchmarks/reliability.py``),
under the round and item of the review that found it."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import TOY_CONLL
from service_helpers import ADMIN, ANNOTATE, TRAIN, TRAIN2, auth, service_env, wait_for
from test_refusals import BODIES, PATHS
from test_service_e2e import (
    api_client,
    free_port,
    postgres_database,
    process,
    redis_database,
)

pytestmark = pytest.mark.reliability

SENTENCE = "Aspirin caused renal failure in the patient . "
MiB = 1 << 20


def _proc_status(pid: int, field: str) -> float:
    """A ``/proc/PID/status`` memory field (VmRSS) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


class Api:
    """``mslm serve`` as a process that a test may stop, kill and start again."""

    def __init__(self, env: dict[str, str], home: Path, log: Path):
        self.env, self.home, self.log = env, home, log
        self.proc: subprocess.Popen | None = None
        self.client: httpx.Client | None = None
        self.port = 0
        self.models: dict[str, str] = {}

    def start(self) -> None:
        self.port = free_port()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mslm_core.cli", "serve", "--port", str(self.port)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.client = api_client(self.port, self.log)
        wait_for(lambda: self.client.get("/readyz").status_code, lambda s: s == 200, timeout=60)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss(self) -> float:
        return _proc_status(self.pid, "VmRSS")

    def signal(self, sig: int, timeout: float = 60) -> float:
        """Send ``sig`` to the process group; the seconds until the API process exited."""
        assert self.proc is not None
        started = time.perf_counter()
        os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=timeout)
        if self.client is not None:
            self.client.close()
        return time.perf_counter() - started

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.signal(signal.SIGTERM, timeout=30)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "mslm_core.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"mslm {args[0]}: exit {done.returncode}: {done.stderr}"
        return done.stdout.strip().splitlines()[-1]

    def annotate(self, texts: list[str], model: str | None = None, **kw) -> httpx.Response:
        body = {"texts": texts} | ({"model": model} if model else {})
        return httpx.post(
            f"http://127.0.0.1:{self.port}/v1/annotate",
            headers=auth(ANNOTATE),
            json=body,
            timeout=kw.get("timeout", 300),
        )


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    """Three MiniLM bundles (int8 ONNX): one fine-tuned briefly, and two copies under other
    ids (the checksums cover the files, not the id), so that three models can be served."""
    from mslm_core.config import TrainConfig
    from mslm_core.export import export_bundle
    from mslm_core.train import train

    tmp = tmp_path_factory.mktemp("attack-models")
    (tmp / "toy.tsv").write_text(TOY_CONLL, encoding="utf-8")
    cfg = TrainConfig(
        train=str(tmp / "toy.tsv"),
        dev=str(tmp / "toy.tsv"),
        strategy="vanilla",
        epochs=2,
        batch_size=8,
        seed=18,
    )
    train(cfg, tmp / "a")
    export_bundle(tmp / "a", quantize="int8")
    out = {"a": tmp / "a"}
    for name in ("b", "c"):
        shutil.copytree(tmp / "a", tmp / name)
        manifest = json.loads((tmp / name / "manifest.json").read_text())
        manifest["id"] = f"{manifest['id']}-{name}"
        (tmp / name / "manifest.json").write_text(json.dumps(manifest))
        out[name] = tmp / name
    return out


@pytest.fixture(scope="module")
def api(tmp_path_factory, bundles):
    """The attacked deployment: ``mslm serve`` on PostgreSQL and Redis, model A active, B and
    C in the store, a model cache of 2 (as attacked), uploads up to 50 MiB, no worker."""
    tmp = tmp_path_factory.mktemp("attacked")
    with postgres_database() as database_url, redis_database() as broker_url:
        env = {
            **os.environ,
            **service_env(
                tmp / "home",
                Path("/nonexistent"),
                database_url=database_url,
                broker_url=broker_url,
                model_cache_size=2,
                max_upload_mb=50,
                shutdown_grace_seconds=5,
            ),
            "MSLM_BASE_MODELS": "minilm",
            "MSLM_BASE_MODEL": "minilm",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        server = Api(env, tmp / "home", tmp / "serve.log")
        server.models = {
            "a": server.cli("import-model", str(bundles["a"]), "--activate"),
            "b": server.cli("import-model", str(bundles["b"])),
            "c": server.cli("import-model", str(bundles["c"])),
        }
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _raw_request(port: int, head: bytes, body_bytes: int, chunked: bool = False) -> dict:
    """Send ``head`` and then up to ``body_bytes`` of body, 1 MiB at a time, stopping as soon
    as the server answers or closes (as a client that reads while it writes does). Returns
    the status (None when the connection was closed without one), the bytes of body sent."""
    chunk = memoryview(bytes(MiB))
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        try:
            sock.sendall(head)
            while sent < body_bytes:
                if select.select([sock], [], [], 0)[0]:
                    break
                n = min(MiB, body_bytes - sent)
                sock.sendall(b"%x\r\n" % n + chunk[:n] + b"\r\n" if chunked else chunk[:n])
                sent += n
            answer = sock.recv(65536)
        except OSError:
            pass
    status = int(answer.split(b" ")[1]) if answer.startswith(b"HTTP/1.1 ") else None
    return {"status": status, "sent_mb": round(sent / MiB, 1)}


class Sampler:
    """Calls :meth:`sample` every ``every`` seconds in a thread while the ``with`` lasts."""

    def __init__(self, every: float):
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


class Probe(Sampler):
    """Times ``GET /healthz`` (or another request) every ``every`` seconds."""

    def __init__(self, call, every: float = 0.05):
        super().__init__(every)
        self.call = call
        self.times: list[float] = []
        self.codes: collections.Counter[int] = collections.Counter()
        self.sample()  # one at once: an attack may be over before the first interval

    def sample(self) -> None:
        started = time.perf_counter()
        try:
            self.codes[self.call().status_code] += 1
        except httpx.HTTPError:
            self.codes[0] += 1
        self.times.append(time.perf_counter() - started)

    def figures(self) -> dict:
        ms = sorted(1000 * t for t in self.times)
        return {
            "requests": len(ms),
            "median_ms": round(statistics.median(ms), 1),
            "max_ms": round(ms[-1], 1),
            "failed": self.codes.get(0, 0) + sum(n for c, n in self.codes.items() if c >= 500),
        }


class Rss(Sampler):
    """The API's resident memory sampled every 20 ms: how far it rose above where it was when
    sampling started (VmHWM would keep an earlier attack's peak)."""

    def __init__(self, api: Api):
        super().__init__(0.02)
        self.api = api
        self.start = self.peak = api.rss()

    def sample(self) -> None:
        self.peak = max(self.peak, self.api.rss())

    @property
    def growth(self) -> float:
        return round(self.peak - self.start, 1)

    def kept(self) -> float:
        return round(self.api.rss() - self.start, 1)


def _at_once(api: Api, *calls) -> list[int]:
    """Each of ``calls(client)`` on its own connection, released at the same moment; their
    status codes."""
    barrier = threading.Barrier(len(calls))
    codes = [0] * len(calls)

    def run(k: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{api.port}", timeout=60) as client:
            barrier.wait()
            codes[k] = calls[k](client).status_code

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return codes


def _healthz(api: Api):
    return lambda: httpx.get(f"http://127.0.0.1:{api.port}/healthz", timeout=30)


def _short(api: Api):
    return lambda: api.annotate(["Aspirin caused renal failure ."], timeout=60)


# -- item 3 -------------------------------------------------------------------------------------
def test_item3_nul_in_any_id_is_422_and_the_connection_lives_on(api, record, tmp_path):
    client = api.client
    statuses: collections.Counter[int] = collections.Counter()
    next_ok = 0
    for method, path, key in PATHS:
        statuses[client.request(method, path, headers=auth(key)).status_code] += 1
        next_ok += client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200
    for route, key, body, _ in BODIES:
        statuses[client.post(route, headers=auth(key), json=body).status_code] += 1
        next_ok += client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200
    named = client.post(
        "/v1/datasets",
        headers=auth(TRAIN),
        data={"name": "ward\x00 7"},
        files={"train": ("train.tsv", b"Aspirin\tB-Chemical\n")},
    )
    statuses[named.status_code] += 1
    next_ok += client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200
    sent = len(PATHS) + len(BODIES) + 1
    log = api.log.read_text(errors="replace")
    measured = {
        "requests": sent,
        "statuses": dict(statuses),
        "next_request_on_the_connection_ok": f"{next_ok}/{sent}",
        "tracebacks_in_log": log.count("Traceback"),
    }
    ok = statuses == {422: sent} and next_ok == sent and "Traceback" not in log
    record(
        "attack 3: NUL in an id (PostgreSQL)",
        "a NUL in every id, key and name that reaches PostgreSQL: 11 path and query ids, "
        "5 body fields, a dataset name; one keep-alive connection",
        measured,
        "422 naming the field; the connection and the pool carry on" if ok else "FAIL",
    )
    assert ok, measured


# -- item 4 -------------------------------------------------------------------------------------
def test_item4_no_body_is_read_before_its_key_nor_a_huge_header(api, record):
    size = 75 * MiB
    head = (
        "POST /v1/annotate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    with Rss(api) as rss, Probe(_healthz(api)) as probe, ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: _raw_request(api.port, head, size), range(20)))
    seconds = time.perf_counter() - started
    bodies = {
        "requests": 20,
        "statuses": dict(collections.Counter(a["status"] for a in answers)),
        "body_sent_per_request_mb": max(a["sent_mb"] for a in answers),
        "seconds": round(seconds, 2),
        "api_rss_growth_mb": rss.growth,
        "healthz": probe.figures(),
    }
    # a 100 MB Authorization header, 1 KiB at a time
    header = b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
    started = time.perf_counter()
    with Rss(api) as rss, Probe(_healthz(api)) as probe:
        sent, answer = 0, b""
        with socket.create_connection(("127.0.0.1", api.port), timeout=30) as sock:
            try:
                sock.sendall(header)
                while sent < 100_000_000:
                    sock.sendall(b"k" * 1024)
                    sent += 1024
            except OSError:
                pass
            with contextlib.suppress(OSError):
                answer = sock.recv(4096)
    huge = {
        "status": int(answer.split(b" ")[1]) if answer.startswith(b"HTTP/1.1") else "closed",
        "sent_before_refusal_mb": round(sent / MiB, 1),
        "seconds": round(time.perf_counter() - started, 2),
        "api_rss_growth_mb": rss.growth,
        "healthz": probe.figures(),
    }
    ok = (
        bodies["statuses"] == {401: 20}
        and bodies["api_rss_growth_mb"] < 100
        and huge["status"] in (431, "closed")
        and sent < 32 * MiB
        and max(bodies["healthz"]["max_ms"], huge["healthz"]["max_ms"]) < 1000
    )
    record(
        "attack 4: bodies before keys, a huge header",
        "20 concurrent keyless POST /v1/annotate of 75 MiB (before: RSS 228 MB → 1.67 GB); "
        "a 100 MB Authorization header (before: 401 after 12 s, /healthz stalled 4 s)",
        {"keyless 75 MiB bodies": bodies, "100 MB header": huge},
        "401 before any body byte is read; the header refused at 16 KiB with 431" if ok else "FAIL",
    )
    assert ok, (bodies, huge)


# -- item 1 -------------------------------------------------------------------------------------
def test_item1_a_request_whose_model_is_evicted_still_answers(api, record):
    a, b, c = api.models["a"], api.models["b"], api.models["c"]
    long_texts = [SENTENCE * 400] * 16  # 16 texts of 18,800 characters, on model B
    answer: dict = {}

    def long_request() -> None:
        started = time.perf_counter()
        r = api.annotate(long_texts, model=b)
        answer.update(status=r.status_code, seconds=round(time.perf_counter() - started, 2))
        answer["model"] = r.json()["model"]["id"] if r.status_code == 200 else None

    others = []
    with Probe(_healthz(api)) as probe:
        thread = threading.Thread(target=long_request, daemon=True)
        thread.start()
        time.sleep(0.5)
        for model in (c, a, c, b, c):  # C evicts B (A, the active one, is never evicted)
            others.append(api.annotate(["renal failure"], model=model, timeout=120).status_code)
        thread.join(timeout=300)
    measured = {
        "long_request_on_b": answer or "no answer in 300 s",
        "requests_on_c_a_c_b_c": others,
        "healthz": probe.figures(),
    }
    ok = (
        answer.get("status") == 200
        and answer.get("model") == b
        and others == [200] * 5
        # a stalled event loop holds /healthz for seconds (11 s when eviction blocked it);
        # two models loading beside the long request on 2 shared cores take up to about 1.5 s
        and probe.figures()["max_ms"] < 3000
    )
    record(
        "attack 1: a model evicted under a request",
        "a long annotate (16 × 18,800 characters) on model B while requests on C and A "
        "evict B from a cache of 2 (before: the B request never answered, /healthz stalled "
        "11 s, SIGTERM hung)",
        measured,
        "answered; /healthz never stalled" if ok else "FAIL",
    )
    assert ok, measured


# -- item 5 -------------------------------------------------------------------------------------
def test_item5_heavy_valid_texts_do_not_block_everyone(api, record):
    dots = "." * 100_000
    started = time.perf_counter()
    with Rss(api) as rss:
        one = api.annotate([dots])
    one_s = time.perf_counter() - started
    one_fig = {
        "status": one.status_code,
        "entities": len(one.json()["results"][0]["entities"]),
        "seconds": round(one_s, 2),
        "api_rss_growth_mb": rss.growth,
        "api_rss_kept_mb": rss.kept(),
    }
    # three of them at once, while one client annotates a short text every 0.2 s
    with Probe(_short(api), every=0.2) as probe, ThreadPoolExecutor(3) as pool:
        started = time.perf_counter()
        codes = list(pool.map(lambda _: api.annotate([dots]).status_code, range(3)))
        three_s = time.perf_counter() - started
    three = {
        "statuses": codes,
        "seconds": round(three_s, 2),
        "short_requests": probe.figures(),
        "api_rss_kept_mb": rss.kept(),  # a plateau, not a leak: the memory is reused
    }
    # a client that leaves: its work is dropped
    before = _abandoned(api)
    body = json.dumps({"texts": [dots] * 16}).encode()
    with socket.create_connection(("127.0.0.1", api.port)) as sock:
        sock.sendall(
            (
                "POST /v1/annotate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {ANNOTATE}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        time.sleep(1.0)
    wait_for(lambda: _abandoned(api), lambda n: n > before, timeout=60)
    started = time.perf_counter()
    free = _short(api)().status_code
    left = {"abandoned_counted": _abandoned(api) - before, "next_short_request_s": 0.0}
    left["next_short_request_s"] = round(time.perf_counter() - started, 2)
    # blocked, a short request waits for the heavy ones to end (before the fix: 73 s, 2.5 times
    # one heavy text alone); served in turns, it waits for one step of theirs at most. Judged
    # against one heavy text's own time on this machine, not in seconds: the same build took
    # 14.7 s for it on an AVX-512 Xeon and 45-60 s on an AVX2 EPYC. The slowest short request
    # may also take up to a third of the three's time: blocked, it waits for nearly all of it
    # (on an AVX-512 EPYC, 7.5 s of 42 s against 14.1 s for one, served in turns)
    one_ms, three_ms = 1000 * one_s, 1000 * three_s
    ok = (
        one.status_code == 200
        and codes == [200] * 3
        and three["short_requests"]["median_ms"] < max(1500, 0.1 * one_ms)
        and three["short_requests"]["max_ms"] < max(0.5 * one_ms, three_ms / 3)
        and free == 200
        and one_fig["api_rss_kept_mb"] < 200
        and three["api_rss_kept_mb"] < one_fig["api_rss_kept_mb"] + 100
    )
    record(
        "attack 5: heavy valid texts",
        "one 100,000-character text of '.' (before: 29 s, +390 MB kept); three at once while "
        "another client annotates a short text every 0.2 s (before: all blocked 73 s); 16 of "
        "them from a client that leaves after 1 s (before: the work went on)",
        {"one": one_fig, "three at once": three, "client gone": left},
        "served in turns: short requests answered beside them; a gone client's work dropped"
        if ok
        else "FAIL",
    )
    assert ok, json.dumps({"one": one_fig, "three": three, "left": left})


def _abandoned(api: Api) -> float:
    for line in api.client.get("/metrics").text.splitlines():
        if line.startswith("mslm_annotate_abandoned_total "):
            return float(line.split()[1])
    return 0.0


# -- item 2 -------------------------------------------------------------------------------------
def test_item2_activate_and_delete_one_model_at_once(api, bundles, record):
    a, c = api.models["a"], api.models["c"]
    outcomes: collections.Counter[str] = collections.Counter()
    consistent = cached_after_delete = 0
    rounds = 5
    for i in range(rounds):
        if i:
            api.cli("import-model", str(bundles["c"]))
        assert api.annotate(["renal failure"], model=c).status_code == 200  # C is cached
        activated, deleted = _at_once(
            api,
            lambda client: client.post(f"/v1/models/{c}/activate", headers=auth(ADMIN)),
            lambda client: client.delete(f"/v1/models/{c}", headers=auth(ADMIN)),
        )
        result = f"activate {activated}, delete {deleted}"
        outcomes[result] += 1
        ready = api.client.get("/readyz", headers=auth(ANNOTATE))
        served = ready.json().get("model", {}).get("id")
        models = {m["id"] for m in api.client.get("/v1/models", headers=auth(ADMIN)).json()["data"]}
        consistent += ready.status_code == 200 and served in models
        if served == c:  # activate won: serve A again and delete C
            assert api.client.post(f"/v1/models/{a}/activate", headers=auth(ADMIN)).is_success
            wait_for(
                lambda: api.client.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"],
                lambda m: m == a,
            )
            assert api.client.delete(f"/v1/models/{c}", headers=auth(ADMIN)).status_code == 204
        cached_after_delete += api.annotate(["renal failure"], model=c).status_code == 200
    measured = {
        "rounds": rounds,
        "outcomes": dict(outcomes),
        "served_model_in_store_after_each": f"{consistent}/{rounds}",
        "deleted_model_still_answering": cached_after_delete,
    }
    ok = (
        set(outcomes) <= {"activate 200, delete 409", "activate 404, delete 204"}
        and consistent == rounds
        and cached_after_delete == 0
    )
    record(
        "attack 2: activate and delete one model at once",
        "activate and delete of one (cached) model sent at the same moment, 5 rounds; then "
        "annotate with model= the deleted one (before: activate 500, delete 204, a deleted "
        "model served; after a restart every annotate 503 — the restart is in attack 7)",
        measured,
        "one of the two loses (409 or 404); the served model always exists; a deleted model is 404"
        if ok
        else "FAIL",
    )
    assert ok, measured


# -- item 8 -------------------------------------------------------------------------------------
def test_item8_label_studio_result_types_stay_out_of_the_log(api, record):
    odd = "patient text " * 384_630  # 5,000,190 characters
    task = {
        "id": 1,
        "data": {"text": "Aspirin helps."},
        "annotations": [
            {
                "result": [
                    {
                        "from_name": "label",
                        "to_name": "text",
                        "type": "labels",
                        "value": {"start": 0, "end": 7, "text": "Aspirin", "labels": ["Chemical"]},
                    },
                    {"from_name": "x", "to_name": "text", "type": odd, "value": {}},
                ]
            }
        ],
    }
    r = api.client.post(
        "/v1/datasets",
        headers=auth(TRAIN),
        files={"train": ("export.json", json.dumps([task]).encode())},
        timeout=120,
    )
    lines = api.log.read_text(errors="replace").splitlines()
    measured = {
        "status": r.status_code,
        "longest_log_line_chars": max(map(len, lines)),
        "type_in_log": any("patient text" in line for line in lines),
    }
    ok = r.status_code == 201 and measured["longest_log_line_chars"] < 1000
    ok = ok and not measured["type_in_log"]
    record(
        "attack 8: Label Studio result types in the log",
        "a Label Studio export whose result type is 5,000,190 characters of text (before: "
        "one 5,000,189-character log line)",
        measured,
        "counted as 'other', never echoed" if ok else "FAIL",
    )
    assert ok, measured


# -- item 9 -------------------------------------------------------------------------------------
def test_item9_validation_and_the_job_dataset_race(api, record, tmp_path):
    client = api.client
    thresholds = {}
    for value in ("NaN", "-5", "Infinity"):
        r = client.post(
            "/v1/annotate",
            headers={**auth(ANNOTATE), "content-type": "application/json"},
            content=f'{{"texts": ["aspirin"], "min_confidence_per_type": {{"X": {value}}}}}',
        )
        thresholds[value] = r.status_code
    seeds = {}
    for seed in (-1, 2**64):
        r = client.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": "d", "seed": seed})
        seeds[str(seed)] = r.status_code
    outcomes: collections.Counter[str] = collections.Counter()
    for _ in range(25):
        dataset = client.post(
            "/v1/datasets",
            headers=auth(TRAIN),
            files={"train": ("train.tsv", TOY_CONLL.encode())},
        ).json()["id"]
        body = {"dataset_id": dataset, "epochs": 1}
        submitted, deleted = _at_once(
            api,
            lambda c, body=body: c.post("/v1/jobs", headers=auth(TRAIN), json=body),
            lambda c, url=f"/v1/datasets/{dataset}": c.delete(url, headers=auth(TRAIN)),
        )
        outcomes[f"job {submitted}, delete {deleted}"] += 1
    jobs = client.get("/v1/jobs", headers=auth(TRAIN), params={"limit": 500}).json()["data"]
    orphaned = sum(1 for j in jobs if j.get("dataset_id") is None)
    measured = {
        "min_confidence_per_type": thresholds,
        "seed": seeds,
        "job_vs_dataset_delete_25_rounds": dict(outcomes),
        "jobs_without_dataset": orphaned,
    }
    ok = (
        set(thresholds.values()) == {422}
        and set(seeds.values()) == {422}
        and set(outcomes) <= {"job 202, delete 409", "job 404, delete 204"}
        and orphaned == 0
    )
    record(
        "attack 9: validation and races",
        "min_confidence_per_type NaN/-5/Infinity; seed -1 and 2**64 (before: 202, then the "
        "job failed); a job submitted while its dataset is deleted, 25 rounds (before: both "
        "won 3 times in 25). Cancel during export: tests/test_service.py::"
        "test_a_cancel_during_the_export_is_honoured (needs a worker held mid-export)",
        measured,
        "422 naming the field; one of the two always loses" if ok else "FAIL",
    )
    assert ok, measured


# -- item 10 ------------------------------------------------------------------------------------
def test_item10_who_did_what(api, record):
    client = api.client
    mine = client.post(
        "/v1/datasets", headers=auth(TRAIN), files={"train": ("train.tsv", TOY_CONLL.encode())}
    ).json()
    other = auth(TRAIN2)
    seen = {
        "get_anothers_dataset": client.get(f"/v1/datasets/{mine['id']}", headers=other),
        "delete_anothers_dataset": client.delete(f"/v1/datasets/{mine['id']}", headers=other),
    }
    listed = client.get("/v1/datasets", headers=other).json()["data"]
    job = {"dataset_id": mine["id"], "epochs": 1, "idempotency_key": "nightly-1"}
    first = client.post("/v1/jobs", headers=auth(TRAIN), json=job)
    again = client.post("/v1/jobs", headers=auth(TRAIN), json=job)
    yours = client.post(
        "/v1/datasets", headers=other, files={"train": ("train.tsv", TOY_CONLL.encode())}
    ).json()
    theirs = client.post("/v1/jobs", headers=other, json={**job, "dataset_id": yours["id"]})
    log = api.log.read_text(errors="replace")
    posts = [line for line in log.splitlines() if "POST /v1/datasets 201" in line]
    measured = {
        "dataset_created_by": mine["created_by"],
        **{k: v.status_code for k, v in seen.items()},
        "anothers_datasets_listed": sum(d["id"] == mine["id"] for d in listed),
        "same_idempotency_key_same_owner": f"{first.status_code} then {again.status_code}, "
        f"same job: {first.json()['id'] == again.json()['id']}",
        "same_idempotency_key_other_owner": f"{theirs.status_code}, same job: "
        f"{theirs.json().get('id') == first.json()['id']}",
        "access_log_key_ids": sorted({p.split("key=")[1].split()[0] for p in posts}),
        "secrets_in_log": sum(k in log for k in (ADMIN, ANNOTATE, TRAIN, TRAIN2)),
    }
    ok = (
        mine["created_by"].startswith("key-")
        and measured["get_anothers_dataset"] == 404
        and measured["delete_anothers_dataset"] == 404
        and measured["anothers_datasets_listed"] == 0
        and (first.status_code, again.status_code) == (202, 200)
        and first.json()["id"] == again.json()["id"]
        and theirs.status_code == 202
        and theirs.json()["id"] != first.json()["id"]
        and measured["access_log_key_ids"] == sorted({mine["created_by"], yours["created_by"]})
        and mine["created_by"] != yours["created_by"]
        and measured["secrets_in_log"] == 0
    )
    record(
        "attack 10: who did what",
        "a second train key reads, deletes and lists the first's dataset and reuses its "
        "idempotency key; the access log read back (before: no key id anywhere; any train "
        "key deleted any dataset)",
        measured,
        "each row and access-log line names its key id; another key's rows are 404"
        if ok
        else "FAIL",
    )
    assert ok, measured


# -- item 6 -------------------------------------------------------------------------------------
def test_item6_bad_keys_slow_only_bad_keys_and_forwarded_for_is_not_believed(api, record):
    client = api.client
    wrong = auth("wrong-key-0000000000000000")
    for _ in range(8):
        client.get("/v1/jobs", headers=wrong)
    valid = []
    for _ in range(5):
        started = time.perf_counter()
        assert client.get("/v1/jobs", headers=auth(TRAIN)).status_code == 200
        valid.append(time.perf_counter() - started)
    forged = []
    for i in range(2):
        started = time.perf_counter()
        client.get("/v1/jobs", headers={**wrong, "X-Forwarded-For": f"203.0.113.{i}"})
        forged.append(time.perf_counter() - started)
    measured = {
        "valid_key_after_8_bad_median_s": round(statistics.median(valid), 3),
        "bad_key_with_rotated_x_forwarded_for_s": [round(t, 2) for t in forged],
    }
    ok = max(valid) < 0.5 and min(forged) >= 1.0
    record(
        "attack 6: the bad-key throttle",
        "8 bad keys from one address, then its valid key; then bad keys with a new "
        "X-Forwarded-For each (before: valid requests 2 s each; rotating the header escaped "
        "the throttle)",
        measured,
        "valid keys never slowed; forwarded-for believed only from MSLM_FORWARDED_ALLOW_IPS"
        if ok
        else "FAIL",
    )
    assert ok, measured


# -- item 7 -------------------------------------------------------------------------------------
def _in_progress(api: Api) -> list[Path]:
    artifacts = api.home / "artifacts"
    return [
        *artifacts.glob("uploads/*"),
        *artifacts.glob("datasets/.staging-*"),
        *artifacts.glob("models/.staging-*"),
    ]


def test_item7_uploads_in_bounded_memory_and_no_orphans(api, record, tmp_path):
    corpus = tmp_path / "many.tsv"
    corpus.write_bytes(b"x\tB-Disease\n\n" * 3_000_000)  # 39 MB, 3 M one-token sentences
    started = time.perf_counter()
    with Rss(api) as rss, open(corpus, "rb") as fh:
        r = api.client.post(
            "/v1/datasets", headers=auth(TRAIN), files={"train": ("many.tsv", fh)}, timeout=600
        )
    big = {
        "status": r.status_code,
        "mb": round(corpus.stat().st_size / 1e6, 1),
        "sentences": r.json().get("stats", {}).get("train", {}).get("sentences"),
        "seconds": round(time.perf_counter() - started, 1),
        "api_rss_growth_mb": rss.growth,
    }
    # a chunked upload over the 50 MiB limit: no Content-Length to refuse it by
    boundary = "x" * 16
    head = (
        "POST /v1/datasets HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        f"Authorization: Bearer {TRAIN}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n"
    ).encode()
    preamble = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=train; filename=a.tsv\r\n\r\n"
    ).encode()
    over = _raw_request(
        api.port, head + b"%x\r\n%s\r\n" % (len(preamble), preamble), 60 * MiB, True
    )
    # kill -9 mid-upload
    before = set(_in_progress(api))
    size = corpus.stat().st_size
    upload_head = (
        "POST /v1/datasets HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {TRAIN}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(preamble) + size + len(boundary) + 8}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", api.port)) as sock, open(corpus, "rb") as fh:
        # the whole body: the service copies it into the store and checks it (seconds for
        # 3 M sentences); it is killed meanwhile
        sock.sendall(upload_head + preamble + fh.read() + f"\r\n--{boundary}--\r\n".encode())
        wait_for(lambda: set(_in_progress(api)) - before, bool, timeout=60, every=0.05)
        time.sleep(0.3)
        api.signal(signal.SIGKILL)
    left = [p for p in _in_progress(api) if p not in before]
    api.start()
    kept_young = sum(p.exists() for p in left)  # a young one may be another replica's
    old = time.time() - 2 * 3600
    for p in left:
        os.utime(p, (old, old))
    api.signal(signal.SIGTERM)
    api.start()
    swept = [p for p in left if not p.exists()]
    ready = api.client.get("/readyz", headers=auth(ANNOTATE))
    killed = {
        "left_by_kill_9": len(left),
        "kept_at_restart_while_younger_than_1h": kept_young,
        "swept_at_restart_once_older": len(swept),
        "readyz_after_restart": ready.status_code,
        "served_after_restart": ready.json().get("model", {}).get("id") == api.models["a"],
    }
    ok = (
        big["status"] == 201
        and big["sentences"] == 3_000_000
        and big["api_rss_growth_mb"] < 150
        and over["status"] == 413
        and len(left) >= 1
        and len(swept) == len(left)
        and ready.status_code == 200
        and killed["served_after_restart"]
    )
    record(
        "attack 7: uploads",
        "a 39 MB corpus of 3 M one-token sentences (before: +1.55 GB API RSS); a chunked "
        "upload over the 50 MiB limit (before: 400); the API killed with SIGKILL mid-upload, "
        "then started again (before: the spooled copy stayed for good)",
        {"3 M sentences": big, "chunked over the limit": over, "kill -9 mid-upload": killed},
        "stored with bounded memory; 413; orphans swept once older than 1 h (at start and "
        "every 10 min), the service ready after the kill"
        if ok
        else "FAIL",
    )
    assert ok, (big, over, killed)


# -- item 1, SIGTERM ------------------------------------------------------------------------------
def test_item1_sigterm_during_a_long_request_exits(api, record):
    answer: dict = {}

    def long_request() -> None:
        try:
            answer["status"] = api.annotate(
                [SENTENCE * 2000] * 16, model=api.models["b"]
            ).status_code
        except httpx.HTTPError as exc:
            answer["status"] = type(exc).__name__

    thread = threading.Thread(target=long_request, daemon=True)
    thread.start()
    time.sleep(1.0)
    seconds = api.signal(signal.SIGTERM, timeout=120)
    thread.join(timeout=60)
    grace = float(api.env["MSLM_SHUTDOWN_GRACE_SECONDS"])
    measured = {
        "exit_seconds": round(seconds, 2),
        "grace_seconds": grace,
        "long_request": answer.get("status"),
    }
    ok = seconds < grace + 10 and answer.get("status") in (200, 503)
    record(
        "attack 1: SIGTERM during a long request",
        "SIGTERM to the API while a 16 × 94,000-character annotate runs (before: SIGTERM hung)",
        measured,
        "exited once the grace was over; the request answered 503 (retry) and its work dropped"
        if ok
        else "FAIL",
    )
    assert ok, measured


# == issue 29: a second outside attack ===========================================================
# One test per item, replayed as the attacker ran it against `mslm serve` on PostgreSQL and
# Redis; scenario names "round 3, item N" in docs/reliability.md.


def _answers(socks: list[socket.socket]) -> collections.Counter[str]:
    """What each held connection was answered (its status) or ``closed``; each is closed."""
    answered: collections.Counter[str] = collections.Counter()
    for s in socks:
        try:
            s.settimeout(1)
            data = s.recv(64)
            answered[data.split(b" ")[1].decode() if data.startswith(b"HTTP") else "closed"] += 1
        except OSError:
            answered["closed"] += 1
        s.close()
    return answered


def _running(api: Api) -> None:
    """Start the attacked deployment again when an earlier scenario stopped it (SIGTERM)."""
    if api.proc is None or api.proc.poll() is not None:
        api.start()


def _second_server(api: Api, tmp: Path, **settings: object) -> Api:
    """Another `mslm serve` on the attacked deployment's store, with other settings."""
    env = {**api.env, **{f"MSLM_{k.upper()}": str(v) for k, v in settings.items()}}
    server = Api(env, api.home, tmp / "second.log")
    server.models = api.models
    return server


def test_round3_item1_trigger_words_are_linear_and_hold_no_one_back(api, record):
    """`"Cisplatin " + "no " * 12000` took 66 s and held /healthz 62 s; 100,000 characters of
    such words 155 s."""
    _running(api)
    answers = {}
    with Probe(_healthz(api)) as health, Probe(_short(api), every=0.2) as short:
        for label, text in (
            ("12,000 no", "Cisplatin " + "no " * 12000),
            ("100,000 characters", ("Cisplatin " + "no " * 40000)[:100_000]),
        ):
            started = time.perf_counter()
            r = api.annotate([text], timeout=300)
            answers[label] = {
                "status": r.status_code,
                "seconds": round(time.perf_counter() - started, 2),
            }
    # the time per character of the context step alone, 1k to 100k characters (engine only)
    from mslm_core.context import ContextEngine, default_rules
    from mslm_core.types import Entity

    engine = ContextEngine(default_rules())
    timed: dict[int, list[float]] = {1_000: [], 10_000: [], 100_000: []}
    for _ in range(3):  # the sizes in turn, so that the machine's load falls on each alike
        for size, seconds in timed.items():
            text = ("Cisplatin " + "no " * size)[:size]
            started = time.perf_counter()
            engine.apply(text, [Entity(0, 9, "Cisplatin", "Drug", 0.9, 0.9, 1.0)])
            seconds.append(time.perf_counter() - started)
    per_char = {size: round(1e6 * statistics.median(s) / size, 2) for size, s in timed.items()}
    measured = {
        **answers,
        "healthz_during": health.figures(),
        "short_annotate_during": short.figures(),
        "context_us_per_char_1k_10k_100k": list(per_char.values()),
    }
    ok = (
        all(a["status"] == 200 and a["seconds"] < 30 for a in answers.values())
        and health.figures()["max_ms"] < 3000  # held back: a probe would wait the whole request
        and short.figures()["failed"] == 0
        and per_char[100_000] < 5 * per_char[1_000] + 1
    )
    record(
        "round 3, item 1: trigger words",
        "annotate 'Cisplatin' followed by 12,000 'no' (before: 66 s, /healthz held 62 s, "
        "SIGTERM 58 s), then 100,000 characters of them (before: 155 s), while /healthz and a "
        "short annotate are probed",
        measured,
        "answered in seconds; nobody held back; the context step linear" if ok else "FAIL",
    )
    assert ok, measured


def test_round3_item2_json_amplification_is_refused_before_parsing(api, record):
    """A 70 MB body whose min_confidence_per_type has 4.5 M entries, five at once, took the
    API from 437 to 4,299 MB and stalled /healthz 16.7 s; 10.5 M tiny texts added 918 MB."""
    _running(api)
    entries = b",".join(b'"t%d":0.5' % i for i in range(4_500_000))
    bombs = {
        "4.5 M thresholds": b'{"texts":["x"],"min_confidence_per_type":{' + entries + b"}}",
        "10.5 M tiny texts": b'{"texts":[' + b",".join([b'"a"'] * 10_500_000) + b"]}",
        "nesting 100,000 deep": b'{"texts":["x"],"model":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    }
    measured = {}
    with Rss(api) as rss, Probe(_healthz(api)) as probe:
        for label, body in bombs.items():
            started = time.perf_counter()
            codes = _at_once(
                api,
                *[
                    lambda c, body=body: c.post(
                        "/v1/annotate",
                        content=body,
                        headers={**auth(ANNOTATE), "content-type": "application/json"},
                    )
                ]
                * 5,
            )
            measured[label] = {
                "mb": round(len(body) / 1e6, 1),
                "statuses_of_5_at_once": dict(collections.Counter(codes)),
                "seconds": round(time.perf_counter() - started, 2),
            }
    measured["api_rss_growth_mb"] = rss.growth
    measured["healthz"] = probe.figures()
    ok = (
        all(m["statuses_of_5_at_once"] == {413: 5} for k, m in measured.items() if k in bombs)
        and rss.growth < 800  # the bodies themselves, 5 × up to 70 MB, never their objects
        and probe.figures()["max_ms"] < 3000
    )
    record(
        "round 3, item 2: JSON amplification",
        "five at once: a 70 MB body with 4.5 M min_confidence_per_type entries (before: API "
        "437 → 4,299 MB, /healthz stalled 16.7 s); 10.5 M one-letter texts (before: +918 MB); "
        "a body nested 100,000 deep",
        measured,
        "413 from a scan of the bytes before any object exists" if ok else "FAIL",
    )
    assert ok, measured


def test_round3_item3_vocabulary_imports_are_linear_and_bounded(api, record, tmp_path):
    """30,000 lines of one concept id took 28.8 s to import; one 7 MB name +1.8 GB RSS."""
    _running(api)
    measured = {}

    def post(name: str, content: bytes) -> tuple[httpx.Response, float, float]:
        with Rss(api) as rss:
            started = time.perf_counter()
            r = api.client.post(
                "/v1/vocabularies",
                headers=auth(ADMIN),
                files={"file": (name, content)},
                timeout=300,
            )
            return r, round(time.perf_counter() - started, 2), rss.growth

    same = b"".join(b"D1\tname %d\n" % i for i in range(30_000))
    r, seconds, growth = post("same.tsv", same)
    measured["30,000 lines of one id"] = {
        "status": r.status_code,
        "seconds": seconds,
        "first_error": (r.json().get("errors") or [{}])[0],
    }
    r, seconds, growth = post("long.tsv", b"D1\t" + b"x" * 7_000_000 + b"\n")
    measured["a 7 MB name"] = {
        "status": r.status_code,
        "seconds": seconds,
        "api_rss_growth_mb": growth,
        "first_error": (r.json().get("errors") or [{}])[0],
    }
    distinct = b"".join(b"C%d\tconcept %d\tsyn %d\n" % (i, i, i) for i in range(30_000))
    r, seconds, growth = post("distinct.tsv", distinct)
    measured["30,000 distinct concepts"] = {"status": r.status_code, "seconds": seconds}
    ok = (
        measured["30,000 lines of one id"]["status"] == 422
        and measured["30,000 lines of one id"]["first_error"].get("field") == "id"
        and measured["30,000 lines of one id"]["seconds"] < 10
        and measured["a 7 MB name"]["status"] == 422
        and measured["a 7 MB name"]["first_error"].get("field") == "name"
        and measured["a 7 MB name"]["api_rss_growth_mb"] < 300
        and measured["30,000 distinct concepts"]["status"] == 201
    )
    record(
        "round 3, item 3: vocabulary imports",
        "30,000 lines of one concept id (before: 28.8 s to import, 27.6 s to activate); one "
        "name of 7 MB (before: +1.8 GB RSS); 30,000 distinct concepts. 1 M concepts: "
        "benchmarks/vocabulary_scale.py",
        measured,
        "refused with line and field in under a second; imports linear" if ok else "FAIL",
    )
    assert ok, measured


def test_round3_item4_races_and_nul_bytes_are_not_500(api, record):
    """Activating a vocabulary while it was deleted: 500 in 4 of 6 races; a NUL in a
    multipart file name or a vocabulary's # NAME: line: 500 (psycopg DataError)."""
    _running(api)
    log_from = api.log.stat().st_size  # earlier scenarios' lines are theirs
    content = b"".join(b"C%d\tconcept %d\n" % (i, i) for i in range(2_000))
    outcomes: collections.Counter[str] = collections.Counter()
    for _ in range(6):
        vid = api.client.post(
            "/v1/vocabularies", headers=auth(ADMIN), files={"file": ("v.tsv", content)}
        ).json()["id"]
        activated, deleted = _at_once(
            api,
            lambda c, vid=vid: c.post(f"/v1/vocabularies/{vid}/activate", headers=auth(ADMIN)),
            lambda c, vid=vid: c.delete(f"/v1/vocabularies/{vid}", headers=auth(ADMIN)),
        )
        outcomes[f"activate {activated}, delete {deleted}"] += 1
        api.client.post("/v1/vocabularies/default/activate", headers=auth(ADMIN))
        api.client.delete(f"/v1/vocabularies/{vid}", headers=auth(ADMIN))
    # a raw NUL in the file name (httpx would send it percent-encoded)
    boundary = "b0undary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="train"; '
        'filename="ward\x007.tsv"\r\n\r\nAspirin\tB-Chemical\n\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    nul_file = api.client.post(
        "/v1/datasets",
        headers={**auth(TRAIN), "content-type": f"multipart/form-data; boundary={boundary}"},
        content=body,
    )
    nul_name = api.client.post(
        "/v1/vocabularies",
        headers=auth(ADMIN),
        files={"file": ("v.tsv", b"# Site\x00terms: ours\nC1\tconcept\n")},
    )
    measured = {
        "activate_vs_delete_6_rounds": dict(outcomes),
        "nul_in_a_file_name": {
            "status": nul_file.status_code,
            "stored_name": nul_file.json().get("files", {}).get("train", {}).get("filename"),
        },
        "nul_in_the_name_line": {
            "status": nul_name.status_code,
            "error": (nul_name.json().get("errors") or [{}])[0],
        },
        "tracebacks_in_log": api.log.read_bytes()[log_from:].count(b"Traceback"),
    }
    ok = (
        not any("500" in k for k in outcomes)
        and nul_file.status_code == 201
        and measured["nul_in_a_file_name"]["stored_name"] == "ward7.tsv"
        and nul_name.status_code == 422
        and measured["nul_in_the_name_line"]["error"].get("line") == 1
        and measured["tracebacks_in_log"] == 0
    )
    record(
        "round 3, item 4: vocabulary races, NUL bytes",
        "activate and delete one vocabulary at the same moment, 6 rounds (before: 500 in 4); "
        "a NUL in a multipart file name and in a vocabulary's '# NAME:' line (before: 500)",
        measured,
        "one of the two loses (404 or 409); the file name cleaned; the line refused (422)"
        if ok
        else "FAIL",
    )
    assert ok, measured


def test_round3_item5_what_a_killed_worker_leaves_is_swept(api, record, tmp_path):
    """kill -9 of the worker during ONNX export left its scratch folder (173 MB) and a bundle
    without a row; neither was ever swept."""
    _running(api)
    beats = {"heartbeat_seconds": 0.5, "heartbeat_timeout_seconds": 3, "requeue_after_seconds": 2}
    server = _second_server(api, tmp_path, **beats)
    env = server.env
    api.stop()
    server.start()
    try:  # the deployment's reaper re-queues the killed job
        with process(["reaper"], env, tmp_path / "reaper.log"):
            measured = _killed_during_export(server, env, tmp_path)
    finally:
        server.stop()
        api.start()
    ok = (
        measured["scratch_left_by_kill_9"] >= 1
        and measured["job_after_a_new_worker"] == "succeeded"
        and not measured["job_folder_after"]
        and not measured["orphan_bundle_after"]
        and measured["swept_at_worker_start"]
        and measured["left_for_a_second_sweep"] == {}
    )
    record(
        "round 3, item 5: what a killed worker leaves",
        "kill -9 of the worker during a job's ONNX export (before: its mslm-export-* scratch, "
        "173 MB, and a bundle without a row stayed for good); a bundle without a row planted; "
        "a new worker started",
        measured,
        "the job resumed and succeeded; scratch and orphan bundle swept at worker start, "
        "counts logged"
        if ok
        else "FAIL",
    )
    assert ok, measured


def _killed_during_export(api: Api, env: dict[str, str], tmp_path: Path) -> dict:
    from sqlalchemy import update

    from store.db import session_factory
    from store.jobs import sweep_worker_leftovers
    from store.tables import Job

    # the jobs earlier attacks left queued (no worker ran during them) go first
    with session_factory(api.env["MSLM_DATABASE_URL"])() as session:
        session.execute(update(Job).where(Job.state == "queued").values(state="cancelled"))
        session.commit()
    files = {s: (f"{s}.tsv", TOY_CONLL.encode(), "text/plain") for s in ("train", "dev")}
    dataset = api.client.post("/v1/datasets", headers=auth(TRAIN), files=files).json()
    job = api.client.post(
        "/v1/jobs",
        headers=auth(TRAIN),
        json={
            "dataset_id": dataset["id"],
            "epochs": 1,
            "strategy": "vanilla",
            "export": {"onnx": True, "quantize": "int8"},
        },
    ).json()
    work = api.home / "artifacts" / "work" / job["id"]
    log = tmp_path / "worker.log"

    def start_worker() -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "mslm_core.cli", "worker"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    worker = start_worker()
    try:
        wait_for(lambda: list(work.glob("export/mslm-export-*")), bool, timeout=600, every=0.05)
        time.sleep(0.5)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    scratch = list(work.glob("export/mslm-export-*"))
    left_mb = round(sum(f.stat().st_size for f in work.rglob("*") if f.is_file()) / 1e6, 1)
    # a bundle moved into the store whose row never came (killed between rename and commit)
    orphan = api.home / "artifacts" / "models" / "m-killed-before-its-row"
    shutil.copytree(api.home / "artifacts" / "models" / api.models["a"], orphan)
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    settings_url = api.env["MSLM_DATABASE_URL"]
    factory = session_factory(settings_url)
    # a second worker: resumes the job (its export scratch cleared first) and sweeps
    worker = start_worker()
    try:

        def state() -> str:
            with factory() as session:
                return session.get(Job, job["id"]).state

        final = wait_for(state, lambda s: s in ("succeeded", "failed"), timeout=900, every=0.5)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    from mslm_settings import Settings

    settings = Settings(home=api.home, database_url=settings_url)
    with factory() as session:
        again = sweep_worker_leftovers(settings, session, 3)
    measured = {
        "scratch_left_by_kill_9": len(scratch),
        "job_folder_left_mb": left_mb,
        "job_after_a_new_worker": final,
        "job_folder_after": work.exists(),
        "orphan_bundle_after": orphan.exists(),
        "swept_at_worker_start": "swept what killed workers left" in log.read_text(),
        "left_for_a_second_sweep": again,
    }
    return measured


def test_round3_item6_slow_heads_are_cut_off_and_connections_capped(api, record, tmp_path):
    """1,100 slow-header connections were held forever, used up the file descriptors, and
    new clients got connection resets."""
    _running(api)
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # this client opens 1,100 too
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    server = _second_server(api, tmp_path, header_timeout_seconds=2, max_connections=500)
    api.stop()
    server.start()
    try:
        socks, opened = [], 0
        for _ in range(1100):
            try:
                s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
                socks.append(s)
                opened += 1
            except OSError:
                break
        fds_during = len(os.listdir(f"/proc/{server.pid}/fd"))
        with Probe(lambda: httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=10)) as p:
            time.sleep(3.5)  # past the head timeout: the slow ones are answered 408 and closed
        answered = _answers(socks)
        fresh = httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=10).status_code
        fds_after = len(os.listdir(f"/proc/{server.pid}/fd"))
    finally:
        server.stop()
        api.start()
    measured = {
        "slow_connections_opened": opened,
        "api_fds_during": fds_during,
        "answers_to_them": dict(answered),
        "healthz_while_held": p.figures(),
        "new_client_after": fresh,
        "api_fds_after": fds_after,
    }
    ok = (
        fds_during < 600  # the cap (500) and the process's own files
        and p.figures()["failed"] == 0
        and fresh == 200
        and fds_after < 100
        and answered.get("408", 0) > 0
    )
    record(
        "round 3, item 6: slow headers",
        "1,100 connections that send half a request head and wait (before: held forever; "
        "new clients reset once the file descriptors ran out); MSLM_MAX_CONNECTIONS 500, "
        "MSLM_HEADER_TIMEOUT_SECONDS 2",
        measured,
        "connections over the cap closed at once; slow heads answered 408 and closed; new "
        "clients served throughout"
        if ok
        else "FAIL",
    )
    assert ok, measured


def test_round3_item7_the_scope_is_checked_before_the_body(api, record):
    """A key with the wrong scope got its 403 only after its whole body was read."""
    _running(api)
    size = 50 * MiB
    results = {}
    for label, key, path in (
        ("annotate key, dataset upload", ANNOTATE, "/v1/datasets"),
        ("train key, vocabulary import", TRAIN, "/v1/vocabularies"),
        ("annotate key, job", ANNOTATE, "/v1/jobs"),
    ):
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: multipart/form-data; boundary=xxxx\r\n"
            f"Content-Length: {size}\r\n\r\n"
        ).encode()
        results[label] = _raw_request(api.port, head, size)
    ok = all(r["status"] == 403 and r["sent_mb"] < 10 for r in results.values())
    record(
        "round 3, item 7: the scope before the body",
        "50 MiB bodies sent with a key of the wrong scope (before: 403 after the whole body)",
        results,
        "403 before the body is read" if ok else "FAIL",
    )
    assert ok, results


def test_round3_item8_quotas_per_key(api, record, tmp_path):
    """One train key queued fifty 200-epoch jobs; nothing capped jobs per key or queued work."""
    _running(api)
    from store.db import session_factory
    from store.tables import Job
    from store.transitions import claim

    fresh = "quota-key-0123456789abcdef"  # a key with nothing of its own yet
    server = _second_server(
        api,
        tmp_path,
        quota_queued_jobs=3,
        quota_uploads_per_hour=4,
        quota_running_jobs=1,
        api_keys=f"{api.env['MSLM_API_KEYS']},{fresh}:train",
    )
    api.stop()
    server.start()
    try:
        files = {"train": ("t.tsv", TOY_CONLL.encode(), "text/plain")}
        uploads = [
            server.client.post("/v1/datasets", headers=auth(fresh), files=files) for _ in range(5)
        ]
        dataset = uploads[0].json()["id"]
        jobs = [
            server.client.post(
                "/v1/jobs",
                headers=auth(fresh),
                json={"dataset_id": dataset, "epochs": 200, "idempotency_key": f"q{i}"},
            )
            for i in range(5)
        ]
        refused = jobs[-1]
        factory = session_factory(server.env["MSLM_DATABASE_URL"])
        queued = [j.json()["id"] for j in jobs if j.status_code == 202]
        with factory() as session:
            claimed = [claim(session, Job, jid, "w-test", running_quota=1) for jid in queued[:2]]
            for jid in queued:
                session.get(Job, jid).state = "cancelled"
            session.commit()
    finally:
        server.stop()
        api.start()
    measured = {
        "uploads_of_5": [u.status_code for u in uploads],
        "upload_retry_after_s": uploads[-1].headers.get("retry-after"),
        "jobs_of_5": [j.status_code for j in jobs],
        "job_refusal": refused.json().get("detail", "")[:90],
        "job_retry_after_s": refused.headers.get("retry-after"),
        "claims_with_running_quota_1": claimed,
    }
    ok = (
        [u.status_code for u in uploads] == [201] * 4 + [429]
        and [j.status_code for j in jobs] == [202] * 3 + [429] * 2
        and refused.headers.get("retry-after")
        and uploads[-1].headers.get("retry-after")
        and claimed == [True, False]
    )
    record(
        "round 3, item 8: quotas",
        "one train key uploads 5 datasets and submits 5 200-epoch jobs with quotas of 4 "
        "uploads per hour, 3 queued jobs, 1 running job (before: no limit)",
        measured,
        "429 with Retry-After past each quota; a second job of the key waits while one runs"
        if ok
        else "FAIL",
    )
    assert ok, measured


def test_round3_item9_metadata_behind_a_key(api, record, tmp_path):
    """/metrics, /readyz and /docs answered without a key (model ids, job counts, versions)."""
    _running(api)
    import base64

    server = _second_server(api, tmp_path, protect_metadata="true")
    api.stop()
    server.start()
    try:
        c = server.client
        basic = "Basic " + base64.b64encode(f"me:{ANNOTATE}".encode()).decode()
        measured = {
            "metrics_no_key": c.get("/metrics").status_code,
            "metrics_bearer": c.get("/metrics", headers=auth(ANNOTATE)).status_code,
            "docs_no_key": c.get("/docs").status_code,
            "docs_challenge": c.get("/docs").headers.get("www-authenticate"),
            "docs_basic": c.get("/docs", headers={"Authorization": basic}).status_code,
            "openapi_no_key": c.get("/openapi.json").status_code,
            "healthz_no_key": c.get("/healthz").status_code,
            "readyz_no_key": c.get("/readyz").json(),
            "readyz_with_key_names_the_model": "model"
            in c.get("/readyz", headers=auth(ANNOTATE)).json(),
        }
    finally:
        server.stop()
        api.start()
    ok = (
        measured["metrics_no_key"] == 401
        and measured["metrics_bearer"] == 200
        and measured["docs_no_key"] == 401
        and "Basic" in (measured["docs_challenge"] or "")
        and measured["docs_basic"] == 200
        and measured["openapi_no_key"] == 401
        and measured["healthz_no_key"] == 200
        and measured["readyz_no_key"] == {"status": "ready"}
        and measured["readyz_with_key_names_the_model"]
    )
    record(
        "round 3, item 9: metadata",
        "/metrics, /docs, /openapi.json, /healthz and /readyz without a key, with "
        "MSLM_PROTECT_METADATA (compose's default) (before: all open, /readyz named the model)",
        measured,
        "401 without a key (Basic or Bearer accepted); /healthz open; /readyz says only ready"
        if ok
        else "FAIL",
    )
    assert ok, measured


# -- round 4 ----------------------------------------------------------------------------------
def test_round4_item2_slow_bodies_are_cut_off_and_do_not_lock_clients_out(api, record, tmp_path):
    """520 POST /v1/annotate with Content-Length 100,000, each sending a byte every 2 s, held
    500 connections with no answer and reset every new /healthz for 40 s: the connection cap
    evicted only idle and head-sending connections, and nothing bounded a body's duration."""
    _running(api)
    server = _second_server(api, tmp_path, header_timeout_seconds=2, max_connections=100)
    api.stop()
    server.start()
    head = (
        "POST /v1/annotate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {ANNOTATE}\r\nContent-Length: 100000\r\n\r\n{{"
    ).encode()
    try:
        socks = []
        for _ in range(130):  # over the cap, every one an authorised body arriving slowly
            try:
                s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                s.sendall(head)
                socks.append(s)
            except OSError:
                break
        stop = threading.Event()

        def trickle() -> None:  # a byte every 0.5 s on each
            while not stop.is_set():
                for s in list(socks):
                    with contextlib.suppress(OSError):
                        s.send(b" ")
                stop.wait(0.5)

        dripping = threading.Thread(target=trickle, daemon=True)
        dripping.start()
        started = time.perf_counter()
        with Probe(lambda: httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=10)) as p:
            time.sleep(6)  # past 2 s + 100,000 bytes at 64 KB/s: the slow bodies are cut off
        stop.set()
        dripping.join(5)
        answered = _answers(socks)
        fresh = server.annotate(["renal failure"]).status_code
        held = round(time.perf_counter() - started, 1)
    finally:
        server.stop()
        api.start()
    measured = {
        "slow_bodies_opened": len(socks),
        "answers_to_them": dict(answered),
        "healthz_while_held": p.figures(),
        "annotate_after": fresh,
        "seconds": held,
    }
    ok = (
        p.figures()["failed"] == 0
        and p.figures()["max_ms"] < 1000
        and fresh == 200
        and answered.get("408", 0) > 0
        and sum(answered.values()) == len(socks)
    )
    record(
        "round 4, item 2: slow bodies",
        "130 authorised POST /v1/annotate with Content-Length 100,000, each sending a byte every "
        "0.5 s (before: 500 such held every connection and new clients were reset for 40 s); "
        "MSLM_MAX_CONNECTIONS 100, MSLM_HEADER_TIMEOUT_SECONDS 2, MSLM_MIN_BODY_RATE_KB 64",
        measured,
        "bodies past their deadline answered 408 and closed; over the cap, the oldest "
        "still-sending connection closed; /healthz and annotate served throughout"
        if ok
        else "FAIL",
    )
    assert ok, measured


LS = "labelstudio-key-for-round-4-0123"  # annotate + train, as docs/labelstudio.md asks
FLOOD = "flooding-annotate-key-0123456789"  # annotate keys with nothing of their own yet
FLOOD2 = "second-flooding-annotate-key-0123"
RANKER = "ranking-train-key-0123456789abcd"  # a train key with no uploads of its own this hour
LS_CONFIG = (
    '<View><Labels name="label" toName="text"><Label value="Disease"/></Labels>'
    '<Text name="text" value="$note"/></View>'
)


@pytest.fixture(scope="module")
def round4(api, tmp_path_factory):
    """The attacked deployment with a Label Studio key (annotate + train) and a key that
    floods, under quotas of 3 uploads an hour and 3 queued jobs per key."""
    _running(api)
    server = _second_server(
        api,
        tmp_path_factory.mktemp("round4"),
        api_keys=f"{api.env['MSLM_API_KEYS']},{LS}:annotate+train,{FLOOD}:annotate,{FLOOD2}:annotate,"
        f"{RANKER}:train",
        quota_uploads_per_hour=3,
        quota_queued_jobs=3,
    )
    api.stop()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        api.start()


def _served(server: Api) -> list[str]:
    models = server.client.get("/v1/models", headers=auth(ANNOTATE)).json()["data"]
    return [m["id"] for m in models if m["active"]]


def _tracebacks(server: Api) -> int:
    return server.log.read_text(errors="replace").count("Traceback")


def test_round4_item1_a_non_admin_key_cannot_serve_what_its_project_trains(round4, record):
    """An annotate+train key connected a project with serve true; one webhook later its
    model was served to every key."""
    from store.db import session_factory
    from store.tables import Job

    served_before = _served(round4)

    def setup(key: str, project: str, serve: bool) -> httpx.Response:
        body = {"project": project, "schema": LS_CONFIG, "hostname": "http://ls"}
        body |= {"access_token": "x"}
        body["extra_params"] = {"train_every": 1, "serve": serve, "params": {"epochs": 1}}
        return round4.client.post("/labelstudio/setup", headers=auth(key), json=body)

    asked = setup(LS, "41.1", serve=True)
    connected = setup(LS, "41.1", serve=False)
    event = {
        "action": "ANNOTATION_CREATED",
        "project": {"id": 41, "label_config": LS_CONFIG},
        "task": {"id": 1, "data": {"note": "Cancer ."}},
        "annotation": {"id": 1, "task": 1, "result": []},
    }
    event["annotation"]["result"] = [
        {
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": 0, "end": 6, "text": "Cancer", "labels": ["Disease"]},
        }
    ]
    hook = round4.client.post("/labelstudio/webhook", headers=auth(LS), json=event)
    job_id = hook.json().get("job")
    with session_factory(round4.env["MSLM_DATABASE_URL"])() as session:
        job = session.get(Job, job_id) if job_id else None
        activates = None if job is None else job.activate
        if job is not None:
            job.state = "cancelled"  # no worker here; leave nothing queued
            session.commit()
    measured = {
        "setup_serve_true": asked.status_code,
        "refusal": asked.json().get("detail", "")[:100],
        "setup_without_serve": connected.status_code,
        "webhook_job_will_be_served": activates,
        "served_before_after": [served_before, _served(round4)],
    }
    ok = (
        asked.status_code == 403
        and connected.status_code == 200
        and job_id is not None
        and activates is False
        and _served(round4) == served_before
    )
    record(
        "round 4, item 1: serving is an admin act",
        "an annotate+train key connects a Label Studio project with serve true, then without, "
        "and sends one ANNOTATION_CREATED webhook (before: its model was served to every key "
        "about 20 s later)",
        measured,
        "403 naming the admin scope; the project's jobs train and are never served; what "
        "every key is served unchanged"
        if ok
        else "FAIL",
    )
    assert ok, measured


def test_round4_item3_a_duplicate_content_type_does_not_skip_the_scan(round4, record):
    """With Content-Type application/json then text/plain the middleware read the last
    header and FastAPI the first: a 63 MB body of 4.5 M thresholds was parsed on the event
    loop (7.8 s, /healthz stalled 7.6 s, 236 → 1,022 MB; three at once: 14.8 s, 1.26 GB)."""
    entries = b",".join(b'"t%d":0.5' % i for i in range(4_500_000))
    body = b'{"texts":["x"],"min_confidence_per_type":{' + entries + b"}}"
    headers = [
        ("authorization", f"Bearer {ANNOTATE}"),
        ("content-type", "application/json"),
        ("content-type", "text/plain"),
    ]
    with Rss(round4) as rss, Probe(_healthz(round4)) as probe:
        started = time.perf_counter()
        codes = _at_once(
            round4, *[lambda c: c.post("/v1/annotate", content=body, headers=headers)] * 3
        )
        seconds = round(time.perf_counter() - started, 2)
    measured = {
        "mb": round(len(body) / 1e6, 1),
        "statuses_of_3_at_once": dict(collections.Counter(codes)),
        "seconds": seconds,
        "api_rss_growth_mb": rss.growth,
        "healthz": probe.figures(),
    }
    ok = (
        set(codes) <= {400, 413}
        and probe.figures()["max_ms"] < 1000
        and probe.figures()["failed"] == 0
        and rss.growth < 3 * len(body) / MiB  # the bodies in flight, never their objects
    )
    record(
        "round 4, item 3: a duplicate Content-Type",
        "three at once: a 63 MB body of 4.5 M min_confidence_per_type entries sent with "
        "Content-Type application/json and then text/plain (before: parsed on the event loop, "
        "/healthz stalled 14.8 s, peak 1.26 GB)",
        measured,
        "refused before parsing (400 for the duplicate header, or 413 from the scan); "
        "/healthz answered throughout"
        if ok
        else "FAIL",
    )
    assert ok, measured


def _upload(server: Api, key: str, name: str, data: bytes, fmt: str | None = None):
    return server.client.post(
        "/v1/annotation-jobs/inputs",
        headers=auth(key),
        files={"file": (name, data)},
        data={"format": fmt} if fmt else {},
        timeout=120,
    )


def test_round4_item4_unreadable_notes_are_refused_early_and_count(round4, record):
    """b"x\\n" * 5,000,000 (9.5 MB) got its 422 after 25 s with the API from 575 to 2,085 MB;
    refused uploads did not count toward the upload quota."""
    junk = b"x\n" * 5_000_000
    with Rss(round4) as rss, Probe(_healthz(round4)) as probe:
        started = time.perf_counter()
        first = _upload(round4, FLOOD, "notes.jsonl", junk, "jsonl")
        seconds = round(time.perf_counter() - started, 2)
        again = [_upload(round4, FLOOD, "notes.jsonl", junk, "jsonl") for _ in range(3)]
    measured = {
        "mb": round(len(junk) / 1e6, 1),
        "status": first.status_code,
        "seconds": seconds,
        "detail": first.json().get("detail", "")[:80],
        "api_rss_growth_mb": rss.growth,
        "healthz": probe.figures(),
        "next_3_with_a_quota_of_3_an_hour": [r.status_code for r in again],
    }
    ok = (
        first.status_code == 422
        and seconds < 5
        and rss.growth < 10 * len(junk) / MiB
        and [r.status_code for r in again] == [422, 422, 429]
        and probe.figures()["max_ms"] < 1000
    )
    record(
        "round 4, item 4: unreadable notes uploads",
        "an annotate key uploads b'x\\n' × 5,000,000 (9.5 MB) as notes, then three more times "
        "under a quota of 3 uploads an hour (before: 422 after 25 s, API 575 → 2,085 MB, and "
        "refusals never counted)",
        measured,
        "refused after its first 1,000 unreadable notes, in bounded memory; a refusal counts "
        "toward the quota (429 with Retry-After)"
        if ok
        else "FAIL",
    )
    assert ok, measured


def _disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def test_round4_item5_bioc_offsets_cannot_blow_a_note_up(round4, record):
    """A 919-byte BioC file with five passage offsets of 2×10⁸ became 954 MB on disk and
    +570 MB of RSS; uploads never checked MSLM_MAX_TEXT_CHARS."""

    def doc(i: int, offset: int) -> dict:
        passage = {"offset": offset, "text": "fever", "infons": {}, "sentences": []}
        passage |= {"annotations": [], "relations": []}
        return {"id": f"d{i}", "infons": {}, "relations": [], "passages": [passage]}

    collection = {"source": "", "date": "", "key": "", "infons": {}}
    collection["documents"] = [doc(i, 200_000_000) for i in range(5)] + [doc(9, 4)]
    data = json.dumps(collection).encode()
    disk_before = _disk_mb(round4.home)
    with Rss(round4) as rss:
        started = time.perf_counter()
        r = _upload(round4, ANNOTATE, "notes.json", data, "bioc")
        seconds = round(time.perf_counter() - started, 2)
    measured = {
        "bytes": len(data),
        "status": r.status_code,
        "notes_kept": r.json().get("notes"),
        "problems": len(r.json().get("problems", [])),
        "first_problem": (r.json().get("problems") or [{}])[0].get("reason", "")[:90],
        "seconds": seconds,
        "disk_growth_mb": round(_disk_mb(round4.home) - disk_before, 3),
        "api_rss_growth_mb": rss.growth,
    }
    ok = (
        r.status_code == 201
        and r.json()["notes"] == 1
        and measured["problems"] == 5
        and measured["disk_growth_mb"] < 1
        and rss.growth < 50
    )
    record(
        "round 4, item 5: BioC offsets",
        "a BioC file of six documents, five with a passage at offset 2×10⁸ (before: 954 MB on "
        "disk, +570 MB of RSS)",
        measured,
        "the five are problems (past MSLM_MAX_TEXT_CHARS), never built; the sixth is kept"
        if ok
        else "FAIL",
    )
    assert ok, measured


def test_round4_item6_ranking_and_predict_hold_no_one_back(round4, record, tmp_path):
    """suggest on 10,000 documents built a dense n×n matrix on the event loop (2.97 GB,
    /healthz stalled 6.7 s); /labelstudio/predict with 4,900 tasks stalled /healthz 8.6 s."""
    client = round4.client
    files = {"train": ("t.tsv", TOY_CONLL.encode(), "text/plain")}
    # a key of its own: the module's train key has used the quota of 3 uploads an hour
    uploaded = client.post("/v1/datasets", headers=auth(RANKER), files=files)
    assert uploaded.status_code == 201, uploaded.text[:300]
    dataset = uploaded.json()["id"]
    words = ["fever", "cough", "renal", "failure", "aspirin", "rash", "pain", "no", "the"]
    for batch in range(10):  # 1,000 documents a request, the most one takes
        documents = [
            {
                "id": f"p{batch}-{i}",
                "text": " ".join(words[(i * 7 + k * batch + k) % len(words)] for k in range(8))
                + f" {i} .",
                "entities": None,
            }
            for i in range(1000)
        ]
        added = client.post(
            f"/v1/datasets/{dataset}/documents",
            headers=auth(RANKER),
            json={"documents": documents},
            timeout=120,
        )
        assert added.status_code == 201, added.text[:300]
    setup = {"project": "46.1", "schema": LS_CONFIG, "hostname": "http://ls"}
    assert (
        client.post(
            "/labelstudio/setup", headers=auth(LS), json=setup | {"access_token": "x"}
        ).status_code
        == 200
    )
    tasks = [{"id": i, "data": {"note": f"Fever and cough on day {i} ."}} for i in range(4900)]
    started = time.perf_counter()
    too_many = client.post(
        "/labelstudio/predict", headers=auth(LS), json={"tasks": tasks, "project": "46.1"}
    )
    too_many_s = round(time.perf_counter() - started, 2)
    tasks = tasks[:3000]  # what the JSON scan lets through: 13 values a task
    with (
        Rss(round4) as rss,
        Probe(_healthz(round4)) as probe,
        Probe(lambda: round4.annotate(["Aspirin caused renal failure ."]), every=0.3) as short,
    ):
        started = time.perf_counter()
        suggested = client.post(
            f"/v1/datasets/{dataset}/suggest",
            headers=auth(RANKER),
            json={"limit": 10, "max_documents": 10_000, "diversity": 0.5},
            timeout=600,
        )
        suggest_s = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        predicted = client.post(
            "/labelstudio/predict",
            headers=auth(LS),
            json={"tasks": tasks, "project": "46.1"},
            timeout=600,
        )
        predict_s = round(time.perf_counter() - started, 1)
    measured = {
        "suggest_10000": {
            "status": suggested.status_code,
            "scored": suggested.json().get("scored"),
            "seconds": suggest_s,
        },
        "predict_4900": {"status": too_many.status_code, "seconds": too_many_s},
        "predict_3000": {
            "status": predicted.status_code,
            "results": len(predicted.json().get("results", [])),
            "seconds": predict_s,
        },
        "api_rss_growth_mb": rss.growth,
        "healthz": probe.figures(),
        "another_keys_short_annotate": short.figures(),
    }
    ok = (
        suggested.status_code == 200
        and suggested.json()["scored"] == 10_000
        and predicted.status_code == 200
        and len(predicted.json()["results"]) == 3000
        and too_many.status_code == 413
        and rss.growth < 1500  # was 2,970 for the matrix alone
        and probe.figures()["max_ms"] < 1000
        and short.figures()["failed"] == 0
    )
    record(
        "round 4, item 6: ranking and Label Studio predict",
        "suggest over a pool of 10,000 unlabelled documents (before: a dense 10,000 × 10,000 "
        "matrix on the event loop, 2.97 GB, /healthz stalled 6.7 s), then /labelstudio/predict "
        "with 4,900 tasks (before: 61 s of work, /healthz stalled 8.6 s) and with 3,000, while "
        "/healthz and another key's short annotate are probed",
        measured,
        "suggest answered, the ranking one row at a time off the event loop; 4,900 tasks "
        "over the JSON scan's 50,000 values (413 at once); 3,000 predicted in turns with "
        "other requests"
        if ok
        else "FAIL",
    )
    assert ok, measured


def test_round4_item7_queued_annotation_work_has_a_quota(round4, record):
    """Annotation jobs and evaluations had no quota (25/25 and 40/40 accepted)."""
    lines = "".join(json.dumps({"id": i, "text": "renal failure ."}) + "\n" for i in range(200))
    notes = _upload(round4, FLOOD2, "n.jsonl", lines.encode())
    assert notes.status_code == 201, notes.text
    body = {"source": {"kind": "file", "input": notes.json()["id"]}, "chunk_size": 1}
    answers = [
        round4.client.post("/v1/annotation-jobs", headers=auth(FLOOD2), json=body) for _ in range(5)
    ]
    queued = [a.json()["id"] for a in answers if a.status_code == 202]
    for job_id in queued:
        round4.client.post(f"/v1/annotation-jobs/{job_id}/cancel", headers=auth(FLOOD2))
    measured = {
        "annotation_jobs_of_5": [a.status_code for a in answers],
        "refusal": answers[-1].json().get("detail", "")[:90],
        "retry_after_s": answers[-1].headers.get("retry-after"),
    }
    ok = [a.status_code for a in answers] == [202] * 3 + [429] * 2 and answers[-1].headers.get(
        "retry-after"
    )
    record(
        "round 4, item 7: queued annotation work",
        "an annotate key submits 5 annotation jobs (chunk_size 1) under a quota of 3 queued "
        "jobs per key (before: 25 of 25 accepted, and 40 of 40 evaluations). Chunks per job "
        "(at most 1,000) and the publishing window (8 a job): tests/test_bulk.py",
        measured,
        "429 with Retry-After past the quota" if ok else "FAIL",
    )
    assert ok, measured


def test_round4_item8_nul_and_lone_surrogates_at_every_new_boundary(round4, record):
    """Each gave a 500 with a traceback: a notes id "a\\u0000b"; a Label Studio annotation id
    with a NUL; \\ud800 in /v1/annotate with format bioc, pubtator or labelstudio (the
    connection dropped too); a notes JSONL holding \\ud800."""
    tracebacks = _tracebacks(round4)
    setup = {"project": "48.1", "schema": LS_CONFIG, "hostname": "http://ls"}
    round4.client.post("/labelstudio/setup", headers=auth(LS), json=setup | {"access_token": "x"})
    answers: dict[str, object] = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{round4.port}", timeout=60) as conn:
        lines = [
            json.dumps({"id": "a\x00b", "text": "fever"}),
            json.dumps({"id": "2", "text": "cough \ud800"}),
            json.dumps({"id": "3", "text": "no fever"}),
        ]
        notes = conn.post(
            "/v1/annotation-jobs/inputs",
            headers=auth(ANNOTATE),
            files={"file": ("n.jsonl", ("\n".join(lines) + "\n").encode())},
        )
        answers["notes_with_a_nul_id_and_a_surrogate"] = {
            "status": notes.status_code,
            "kept": notes.json().get("notes"),
            "problems": [p["where"] for p in notes.json().get("problems", [])],
        }
        event = {
            "action": "ANNOTATION_CREATED",
            "project": {"id": 48, "label_config": LS_CONFIG},
            "annotation": {"id": "a\x00b", "task": 1, "result": []},
            "task": {"id": 1, "data": {"note": "fever"}},
        }
        hook = conn.post("/labelstudio/webhook", headers=auth(LS), json=event)
        answers["label_studio_annotation_id_with_a_nul"] = hook.status_code
        for fmt in ("bioc", "pubtator", "labelstudio"):
            r = conn.post(
                "/v1/annotate",
                content=json.dumps({"texts": ["fine", "fever \ud800"], "format": fmt}).encode(),
                headers={**auth(ANNOTATE), "content-type": "application/json"},
            )
            answers[f"annotate_{fmt}_with_a_surrogate"] = {
                "status": r.status_code,
                "field": (r.json().get("errors") or [{}])[0].get("field"),
            }
        answers["next_request_on_the_connection"] = conn.get("/healthz").status_code
    answers["tracebacks_in_log"] = _tracebacks(round4) - tracebacks
    statuses = [
        answers["notes_with_a_nul_id_and_a_surrogate"]["status"],
        answers["label_studio_annotation_id_with_a_nul"],
        *[answers[f"annotate_{f}_with_a_surrogate"]["status"] for f in ("bioc", "pubtator")],
        answers["annotate_labelstudio_with_a_surrogate"]["status"],
    ]
    ok = (
        statuses == [201, 422, 422, 422, 422]
        and answers["notes_with_a_nul_id_and_a_surrogate"]["kept"] == 1
        and answers["next_request_on_the_connection"] == 200
        and answers["tracebacks_in_log"] == 0
    )
    record(
        "round 4, item 8: NUL and lone surrogates",
        "a notes JSONL with a NUL id and a lone surrogate; a Label Studio annotation id with a "
        "NUL; \\ud800 in /v1/annotate with format bioc, pubtator and labelstudio; one "
        "keep-alive connection (before: 500s with tracebacks, the connection dropped)",
        answers,
        "422 naming the field (the notes file: those notes are problems, the others kept); "
        "the connection carries on; no traceback"
        if ok
        else "FAIL",
    )
    assert ok, answers


def test_round4_item14_assorted(round4, record):
    """A model deleted under a queued annotation job (204, then the job failed); the Host
    header in the trailing-slash 307; server paths and other keys' dataset ids in
    /v1/models/{id}; key=- in the access log for keyed requests refused before the route."""
    client = round4.client
    model_b = round4.models["b"]
    lines = "".join(json.dumps({"id": i, "text": "fever ."}) + "\n" for i in range(3))
    notes = _upload(round4, ANNOTATE, "n.jsonl", lines.encode())
    job = client.post(
        "/v1/annotation-jobs",
        headers=auth(ANNOTATE),
        json={"source": {"kind": "file", "input": notes.json()["id"]}, "model": model_b},
    )
    deleted = client.delete(f"/v1/models/{model_b}", headers=auth(ADMIN))
    client.post(f"/v1/annotation-jobs/{job.json()['id']}/cancel", headers=auth(ANNOTATE))
    slash = client.get(
        "/v1/models/", headers={**auth(ANNOTATE), "Host": "evil.example"}, follow_redirects=False
    )
    detail = client.get(f"/v1/models/{model_b}", headers=auth(ANNOTATE)).json()
    manifest = json.dumps(detail.get("manifest", {}))
    refused = client.post(f"/v1/models/{model_b}/activate", headers=auth(ANNOTATE))
    time.sleep(0.5)
    log_lines = [
        line
        for line in round4.log.read_text(errors="replace").splitlines()
        if "/activate" in line or (" 403 " in line and "POST" in line)
    ]
    measured = {
        "delete_while_a_job_waits": deleted.status_code,
        "delete_refusal": deleted.json().get("detail", "")[:90],
        "slash_with_evil_host": {
            "status": slash.status_code,
            "location": slash.headers.get("location"),
        },
        "server_paths_in_an_annotate_keys_manifest": manifest.count('"/'),
        "refused_activate": refused.status_code,
        "its_access_log_line_names_a_key": bool(log_lines) and "key=-" not in log_lines[-1],
    }
    ok = (
        job.status_code == 202
        and deleted.status_code == 409
        and slash.status_code == 404
        and "location" not in slash.headers
        and measured["server_paths_in_an_annotate_keys_manifest"] == 0
        and refused.status_code == 403
        and measured["its_access_log_line_names_a_key"]
    )
    record(
        "round 4, item 14: assorted",
        "delete a model an annotation job waits for; GET /v1/models/ with Host evil.example; "
        "read a model's manifest with an annotate key; an annotate key's activate, then its "
        "access-log line (zero-step weights and 3 MB Label Studio ids: tests/"
        "test_multi_corpus.py, tests/test_refusals.py)",
        measured,
        "409 naming the job; 404 with no Location; file names only; the key id logged"
        if ok
        else "FAIL",
    )
    assert ok, measured
