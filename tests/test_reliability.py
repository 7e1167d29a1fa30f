"""Reliability under hostile input (issue 7): schemathesis against the API's own OpenAPI schema,
property-based tests of the corpus readers and of annotate offsets, hostile uploads against a
real ``mslm serve`` process with its memory measured, and logs that hold neither keys nor text.

Each scenario reports its figures through the ``record`` fixture (docs/reliability.md)."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from conftest import TOY_CONLL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_helpers import ADMIN, ANNOTATE, TRAIN, auth, service_env
from test_service_e2e import api_client, free_port, postgres_database, redis_database

from mslm_core.config import TrainConfig
from mslm_core.corpus import Corpus, read_conll, read_jsonl, write_conll, write_jsonl
from mslm_core.errors import CorpusError
from mslm_core.export import export_bundle
from mslm_core.train import train

pytestmark = pytest.mark.reliability


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_encoder):
    """``mslm serve`` on this machine's PostgreSQL and Redis (where the outside attack of
    issue 18 found what SQLite hid) with an exported tiny model active, no worker."""
    with postgres_database() as database_url, redis_database() as broker_url:
        yield from _served(tmp_path_factory, tiny_encoder, database_url, broker_url)


def _served(tmp_path_factory, tiny_encoder, database_url: str, broker_url: str):
    tmp = tmp_path_factory.mktemp("served")
    (tmp / "toy.tsv").write_text(TOY_CONLL, encoding="utf-8")
    cfg = TrainConfig(
        train=str(tmp / "toy.tsv"),
        dev=str(tmp / "toy.tsv"),
        base_model=str(tiny_encoder),
        epochs=25,
        batch_size=2,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        max_length=16,
        seed=3,
    )
    train(cfg, tmp / "bundle")
    export_bundle(tmp / "bundle", quantize="int8")
    env = {
        **os.environ,
        **service_env(tmp / "home", tiny_encoder),
        "HF_HUB_OFFLINE": "1",
        "MSLM_DATABASE_URL": database_url,
        "MSLM_BROKER_URL": broker_url,
        # loopback is a trusted proxy here: the fuzz gives each case its own client address
        # (X-Forwarded-For), so schemathesis's wrong-key probes are not slowed by the bad-key
        # throttle meant for one client guessing keys
        "MSLM_FORWARDED_ALLOW_IPS": "127.0.0.1",
    }
    subprocess.run(
        [sys.executable, "-m", "mslm_core.cli", "import-model", str(tmp / "bundle"), "--activate"],
        env=env,
        check=True,
        capture_output=True,
    )
    port, log = free_port(), tmp / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mslm_core.cli", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        client = api_client(port, log)
        for _ in range(100):
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.2)
        yield {
            "url": f"http://127.0.0.1:{port}",
            "client": client,
            "pid": proc.pid,
            "log": log,
            "home": tmp / "home",
            "bundle": tmp / "bundle",
            "env": env,
        }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


# -- schemathesis ------------------------------------------------------------------------------
#: Operations that take a file (a corpus, a vocabulary, notes).
UPLOADS = {
    ("POST", "/v1/datasets"),
    ("POST", "/v1/vocabularies"),
    ("POST", "/v1/annotation-jobs/inputs"),
}

#: Operations whose body carries a Label Studio labelling config (XML; docs/labelstudio.md).
XML_CONFIGS = {("POST", "/labelstudio/setup"), ("POST", "/labelstudio/predict")}

#: Operations whose body carries annotated documents: an entity's offsets must fall inside its
#: text and not overlap another's, which JSON Schema cannot express (docs/active-learning.md).
DOCUMENTS = {("POST", "/v1/datasets/{dataset_id}/documents")}

#: Operations whose body is a FHIR resource: any JSON object is "schema-valid"; whether it is a
#: readable DocumentReference is checked against FHIR's own models (docs/fhir.md).
FHIR = {("POST", "/v1/annotate/fhir")}


def _python_patterns(node):
    """The document with each ``pattern`` ending in ``$`` ending in ``\\Z`` instead: the
    document's patterns are ECMA-262's, where ``$`` is the end of the string; the generator reads
    them with Python's ``re``, where ``$`` also matches before a final newline, and so made
    "schema-valid" strings with a control character at their end, which the API rightly
    refuses."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str) and re.search(r"(?<!\\)\$$", value):
                node[key] = value[:-1] + "\\Z"
            else:
                _python_patterns(value)
    elif isinstance(node, list):
        for value in node:
            _python_patterns(value)
    return node


def test_fuzz_every_operation_no_5xx_and_problem_details(served, record):
    import schemathesis
    from schemathesis.checks import CHECKS, load_all_checks

    load_all_checks()
    every_check = list(CHECKS.get_all())  # all of schemathesis's checks, not only 5xx
    clients = itertools.count(1)

    document = httpx.get(served["url"] + "/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(_python_patterns(json.loads(json.dumps(document))))
    stats = {
        "operations": 0,
        "requests": 0,
        "server_errors": 0,
        "not_problem_details": 0,
        "undocumented_statuses": 0,
        "schemathesis_checks": len(every_check),
        "check_failures": {},
        "statuses": {},
    }
    problems: list[str] = []

    def check(case, headers) -> None:
        if not headers:  # "no key": drop any generated Authorization (guessed keys are slowed
            case.headers = {
                k: v
                for k, v in (case.headers or {}).items()  # down by design;
                if k.lower() != "authorization"
            }  # that has its own test)
        n = next(clients)  # a client address of its own, probes included (see served)
        case.headers = {**(case.headers or {}), "X-Forwarded-For": f"10.{n // 250}.{n % 250}.1"}
        response = case.call(base_url=served["url"], headers=headers, timeout=30)
        stats["requests"] += 1
        code = response.status_code
        stats["statuses"][str(code)] = stats["statuses"].get(str(code), 0) + 1
        if code >= 500:
            stats["server_errors"] += 1
            problems.append(f"{case.method} {case.formatted_path}: {code}")
        declared = document["paths"][case.operation.path][case.method.lower()]["responses"]
        if str(code) not in declared:  # the document must tell the truth (issue 19)
            stats["undocumented_statuses"] += 1
            problems.append(f"{case.method} {case.operation.path}: {code} not documented")
        content_type = (response.headers.get("content-type") or [""])[0]  # a list per name
        if code >= 400 and not content_type.startswith("application/problem+json"):
            stats["not_problem_details"] += 1
            problems.append(f"{case.method} {case.formatted_path}: {code} not problem+json")
        if code >= 400:
            body = response.json()
            assert {"type", "title", "status", "detail"} <= set(body)
        checks = every_check
        if (case.method, case.operation.path) in UPLOADS | XML_CONFIGS | DOCUMENTS | FHIR:
            # a file is "schema-valid" whatever it holds; its content is checked against the
            # corpus formats, which JSON Schema cannot express: 422 (documented) for noise;
            # so is a labelling config, checked as XML for a <Labels> on a <Text>, and so are
            # documents whose entities must lie inside their texts, and FHIR resources
            checks = [c for c in every_check if c.__name__ != "positive_data_acceptance"]
        try:
            case.validate_response(response, checks=checks, headers=headers)
        except (AssertionError, BaseExceptionGroup) as exc:  # one failure, or a group
            for failure in getattr(exc, "exceptions", [exc]):
                title = getattr(failure, "title", type(failure).__name__)
                stats["check_failures"][title] = stats["check_failures"].get(title, 0) + 1
                sent = case.body if isinstance(case.body, dict) else ""
                # the title first: a long generated body must not hide what failed
                problems.append(f"{case.method} {case.formatted_path}: {title}: {sent}"[:400])

    def fuzz(op, headers):
        @settings(
            max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=op.as_strategy())
        def run(case):
            check(case, headers)

        run()

    for result in schema.get_all_operations():
        op = result.ok()
        stats["operations"] += 1
        for headers in ({}, auth(ADMIN)):
            fuzz(op, headers)
    record(
        "fuzzing: schemathesis",
        "every operation of /openapi.json, generated requests with no key and with an "
        "admin key (15 examples each way per operation), against `mslm serve` on PostgreSQL "
        "and Redis; every schemathesis check (positive_data_acceptance left out for the "
        "content of uploaded corpora and vocabularies, which JSON Schema cannot describe); "
        "each case from its own client address, so wrong-key probes do not meet the bad-key "
        "throttle",
        {k: v for k, v in stats.items()},
        "pass" if not problems else "FAIL",
    )
    assert problems == [], "\n".join(problems)
    assert stats["operations"] >= 15


# -- a generated client --------------------------------------------------------------------------
def test_a_client_generated_from_the_document_reads_every_answer(served, record, tmp_path):
    """Issue 19: a client generated with openapi-python-client raised on every error and on
    every non-JSON format. Generated here from the served /openapi.json, it reads annotate in
    every format, and a 401, a 404 and a 422 as problem details."""
    import importlib

    document = tmp_path / "openapi.json"
    document.write_text(httpx.get(served["url"] + "/openapi.json", timeout=30).text)
    package = tmp_path / "mslm_generated"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "openapi_python_client", "generate"),
            *("--path", str(document), "--output-path", str(package), "--meta", "none"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        gen = importlib.import_module("mslm_generated")
        annotate = importlib.import_module("mslm_generated.api.annotate.annotate_v1_annotate_post")
        pubtator = importlib.import_module(
            "mslm_generated.api.annotate.annotate_pubtator_v1_annotate_pubtator_post"
        )
        jobs = importlib.import_module("mslm_generated.api.jobs.get_job_v1_jobs_job_id_get")
        models = importlib.import_module("mslm_generated.models")
    finally:
        sys.path.remove(str(tmp_path))
    client = gen.AuthenticatedClient(base_url=served["url"], token=ANNOTATE)
    text = "Cisplatin caused renal failure in the patient ."

    def request(**kw):
        return models.AnnotateRequest(texts=[text], **kw)

    answers = {
        fmt: annotate.sync(client=client, body=request(format_=models.AnnotateRequestFormat(fmt)))
        for fmt in ("json", "bioc", "labelstudio")
    }
    answers["pubtator"] = pubtator.sync(client=client, body=request())
    seen = {
        "json": type(answers["json"]).__name__,
        "bioc": type(answers["bioc"]).__name__,
        "labelstudio": f"list of {type(answers['labelstudio'][0]).__name__}",
        "pubtator": type(answers["pubtator"]).__name__,
    }
    entities = answers["json"].results[0].entities
    assert entities and all(text[e.start : e.end] == e.text for e in entities)
    assert answers["bioc"].documents[0].passages[0].text == text
    assert answers["labelstudio"][0].predictions[0].result
    assert answers["pubtator"].startswith(f"0|t|{text}\n")
    errors = {
        "401": annotate.sync(client=gen.Client(base_url=served["url"]), body=request()),
        "404": annotate.sync(client=client, body=request(model="m-absent")),
        "422": jobs.sync(
            client=gen.AuthenticatedClient(base_url=served["url"], token=TRAIN), job_id="x" * 300
        ),
    }
    for status, problem in errors.items():
        assert isinstance(problem, models.ProblemDetails), (status, problem)
        assert problem.status == int(status)
        seen[status] = f"ProblemDetails: {problem.title}"
    record(
        "interop: a generated OpenAPI client",
        "openapi-python-client "
        + importlib.import_module("importlib.metadata").version("openapi-python-client")
        + " generates a client from the served /openapi.json; annotate in each format, then "
        "a request without a key, one on an unknown model, one with a job id over 200 characters",
        seen,
        "every answer parsed into its documented type",
    )


# -- property-based ------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None, database=None)
@given(data=st.binary(max_size=400))
def test_readers_refuse_or_read_any_bytes(data):
    with tempfile.TemporaryDirectory() as tmp:
        for name, reader in (("x.tsv", read_conll), ("x.jsonl", read_jsonl)):
            path = Path(tmp) / name
            path.write_bytes(data)
            try:
                corpus = reader(path)
            except CorpusError as exc:
                assert exc.issues and all(i.path == str(path) for i in exc.issues)
                continue
            for s in corpus.sentences:  # whatever was read is internally consistent
                for m in s.mentions:
                    assert 0 <= m.start < m.end <= len(s.word_spans)


word = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=8,
).filter(lambda w: w.strip() == w and w.isprintable() and not any(c.isspace() for c in w))


@settings(max_examples=150, deadline=None, database=None)
@given(
    sentences=st.lists(
        st.lists(
            st.tuples(word, st.sampled_from(["O", "B-Dis", "I-Dis", "B-Chem"])),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_conll_and_jsonl_round_trip_the_same_mentions(sentences):
    lines = "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.tsv"
        src.write_text(lines, encoding="utf-8")
        corpus = read_conll(src)
        write_jsonl(corpus, Path(tmp) / "out.jsonl")
        back = read_jsonl(Path(tmp) / "out.jsonl")
        write_conll(back, Path(tmp) / "again.tsv")
        again = read_conll(Path(tmp) / "again.tsv")

    # JSONL re-cuts words from the text (CoNLL "0:" becomes "0", ":", written back as "0 :"),
    # so what a conversion keeps is the content: the text without its spaces, and each
    # mention's surface form and type, in order
    def content(s):
        return (
            "".join(s.text.split()),
            [("".join(s.text[a:b].split()), label) for a, b, label in s.char_mentions()],
        )

    for a, b in zip(corpus.sentences, again.sentences, strict=True):
        assert content(a) == content(b)
    assert isinstance(back, Corpus)


def test_annotate_offsets_for_any_unicode(served, record):
    from mslm_core.inference import EntityExtractor

    engine = EntityExtractor.from_bundle(served["bundle"])
    counted = {"texts": 0, "entities": 0}

    @settings(max_examples=400, deadline=None, database=None)
    @given(
        text=st.text(max_size=300)
        | st.lists(
            st.sampled_from(
                [
                    "breast",
                    "cancer",
                    "renal",
                    "failure",
                    " ",
                    "\n",
                    "😀",
                    "é",
                    "Cisplatin",
                    ".",
                    "\t",
                    "\u200b",
                    "\ud800",
                ]
            ),
            max_size=60,
        ).map("".join)
    )
    def check(text: str) -> None:
        (entities,) = engine.annotate([text])
        counted["texts"] += 1
        previous_end = 0
        for e in entities:
            counted["entities"] += 1
            assert 0 <= e.start < e.end <= len(text)
            assert text[e.start : e.end] == e.text
            assert e.start >= previous_end  # ordered, never overlapping
            previous_end = e.end
            assert 0.0 <= e.confidence <= 1.0

    check()
    record(
        "property: annotate offsets",
        "hypothesis: any Unicode string (lone surrogates, zero-width and control "
        "characters, emoji included) through the ONNX engine",
        counted,
        "pass",
    )
    assert counted["entities"] > 0


# -- hostile uploads ---------------------------------------------------------------------------
def _hostile_files(folder: Path) -> dict[str, tuple[str, Path, str]]:
    """name → (client file name, path, what the refusal must say)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    with open(folder / "line.tsv", "wb") as fh:  # a single 100 MB line
        fh.write(b"x" * 100_000_000 + b"\tO\n")
    out["a 100 MB single line"] = ("notes.tsv", folder / "line.tsv", "longer than 8 MiB")
    (folder / "empty.tsv").write_bytes(b"\n" * 5_000_000)
    out["5 million empty lines"] = ("empty.tsv", folder / "empty.tsv", "empty corpus")
    (folder / "binary.tsv").write_bytes(os.urandom(2_000_000))
    out["a binary file"] = ("model.bin", folder / "binary.tsv", "")
    (folder / "utf.tsv").write_bytes(b"ok\tO\nbad\xff\xfe\tO\n")
    out["invalid UTF-8"] = ("utf.tsv", folder / "utf.tsv", "invalid UTF-8")
    (folder / "ctl.tsv").write_bytes(b"Aspirin\tB-Chem\x00ical\nfever\tB-Dis\x1bease\n")
    out["tags with control characters"] = ("ctl.tsv", folder / "ctl.tsv", "control characters")
    (folder / "evil.tsv").write_text("x\tB-\n", encoding="utf-8")
    out["a file name with ../"] = ("../../../../etc/cron.d/evil", folder / "evil.tsv", "")
    return out


def test_hostile_uploads_are_refused_with_bounded_memory_and_nothing_written(
    served, record, tmp_path
):
    client: httpx.Client = served["client"]
    pid, home = served["pid"], served["home"]
    artifacts = home / "artifacts"
    before_files = sorted(p.relative_to(artifacts) for p in artifacts.rglob("*"))
    measured = {}
    for scenario, (filename, path, says) in _hostile_files(tmp_path / "hostile").items():
        base = vm_hwm_mb(pid)
        started = time.perf_counter()
        with open(path, "rb") as fh:  # streamed from disk, never whole in this process
            r = client.post(
                "/v1/datasets",
                headers=auth(TRAIN),
                files={"train": (filename, fh, "text/plain")},
                timeout=300,
            )
        seconds = time.perf_counter() - started
        growth = vm_hwm_mb(pid) - base
        body = r.json()
        assert r.status_code == 422, (scenario, r.status_code, body)
        assert body["type"] == "urn:mslm:problem:invalid-corpus"
        assert says in json.dumps(body), (scenario, body)
        assert ".." not in json.dumps(body["errors"][0]["file"]).replace("(../", "(")
        measured[scenario] = {
            "status": r.status_code,
            "seconds": round(seconds, 2),
            "peak_rss_growth_mb": round(growth, 1),
            "first_error": body["errors"][0]["message"][:60],
        }
        assert growth < 80, (scenario, growth)
    after_files = sorted(p.relative_to(artifacts) for p in artifacts.rglob("*"))
    assert after_files == before_files  # nothing written, no spool left behind
    assert client.get("/v1/datasets", headers=auth(TRAIN)).json()["count"] == 0
    assert not Path("/etc/cron.d/evil").exists()
    record(
        "hostile uploads",
        "each file uploaded as a dataset to `mslm serve` (default 100 MiB limit), streamed",
        measured,
        "all refused (422, file and line), nothing stored, "
        f"server peak RSS growth ≤ {max(v['peak_rss_growth_mb'] for v in measured.values())}"
        " MB",
    )


def test_logs_hold_neither_keys_nor_text(served, record):
    client: httpx.Client = served["client"]
    secret = "Zyxqvorin overdose in Mrs Examplename at 12 Secret Lane"
    for _ in range(3):
        assert (
            client.post(
                "/v1/annotate", headers=auth(ANNOTATE), json={"texts": [secret]}
            ).status_code
            == 200
        )
    client.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [secret], "x": 1})
    client.post(
        "/v1/annotate", headers=auth("wrong-key-Examplename-123456"), json={"texts": [secret]}
    )
    client.get("/v1/jobs?state=" + "Examplename", headers=auth(TRAIN))
    time.sleep(0.5)
    log = served["log"].read_text()
    leaked = [
        s for s in ("Zyxqvorin", "Examplename", "Secret Lane", ADMIN, ANNOTATE, TRAIN) if s in log
    ]
    record(
        "security: logs",
        "annotate with a made-up patient sentence, bad keys and a bad "
        "query value; grep the server log",
        {"log_lines": log.count("\n"), "leaks": leaked},
        "pass" if not leaked else "FAIL",
    )
    assert leaked == []
    assert "/v1/annotate" in log


def test_security_headers_and_bad_key_slow_down(served, record):
    client: httpx.Client = served["client"]
    r = client.get("/healthz")
    headers = {
        k: r.headers.get(k)
        for k in (
            "x-content-type-options",
            "x-frame-options",
            "content-security-policy",
            "referrer-policy",
        )
    }
    assert all(headers.values())
    times = []
    for _ in range(9):
        started = time.perf_counter()
        assert client.get("/v1/jobs", headers=auth("guess-0000000000000000")).status_code == 401
        times.append(round(time.perf_counter() - started, 3))
    record(
        "security: bad keys and headers",
        "9 requests with a wrong key from one client",
        {"seconds_per_attempt": times, "headers": headers},
        "slowed after 5 attempts" if times[-1] > 0.5 else "FAIL",
    )
    assert times[0] < 0.2 and times[-1] >= 0.9


def test_corrupt_bundle_is_refused_and_the_served_model_keeps_answering(served, record):
    client: httpx.Client = served["client"]
    active = client.get("/readyz", headers=auth(ANNOTATE)).json()["model"]["id"]
    copy = served["home"] / "copy"
    shutil.copytree(served["bundle"], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["id"] = "m-corrupt-copy"
    (copy / "manifest.json").write_text(json.dumps(manifest))  # the manifest checksums stay
    env = {**served["env"], "MSLM_BASE_MODELS": "minilm", "MSLM_BASE_MODEL": "minilm"}
    subprocess.run(
        [sys.executable, "-m", "mslm_core.cli", "import-model", str(copy)],
        env=env,
        check=True,
        capture_output=True,
    )
    onnx = served["home"] / "artifacts" / "models" / "m-corrupt-copy" / "model.int8.onnx"
    data = bytearray(onnx.read_bytes())
    data[len(data) // 3] ^= 0x55
    onnx.write_bytes(bytes(data))
    r = client.post("/v1/models/m-corrupt-copy/activate", headers=auth(ADMIN))
    served_after = client.post(
        "/v1/annotate", headers=auth(ANNOTATE), json={"texts": ["breast cancer"]}
    ).json()["model"]["id"]
    record(
        "corruption",
        "a bundle whose int8 model no longer matches its sha256 is activated",
        {
            "activate_status": r.status_code,
            "detail": r.json()["detail"][:90],
            "still_served": served_after == active,
        },
        "refused, previous model kept" if r.status_code == 409 else "FAIL",
    )
    assert r.status_code == 409 and "checksum mismatch" in r.json()["detail"]
    assert served_after == active
