"""The compose stack, run for real (issue 30): build every image, bring the stack up from the
quick start of docs/deployment.md and walk a user's path through the published port.

Steps, each timed: the container engine (Docker, else Podman behind its Docker-compatible
socket); base images (pulled, or — when no registry answers — a Debian base made with
debootstrap, and Redis and PostgreSQL built from Debian's packages); the images; the quick start
(.env, secrets/, ``up``); the admin key from the first start; upload a corpus, fine-tune on the
CPU worker to ``succeeded``, activate, annotate (confidences, assertions), evaluate; ``down`` +
``up`` (keys, datasets, jobs and the served model survive); a worker killed mid-job (the job
runs again or fails, never stays ``running``); scale out (``--scale api=2 --scale
worker-cpu=2``: a model activated through one API replica is served by both, two jobs run at
once); every container non-root; the images saved, removed and loaded (air-gapped install);
backup, ``down -v``, restore into fresh volumes (the same annotations back).

Standard library only: it runs with the machine's ``python3``. Settings (environment):
SMOKE_WORK (scratch folder), SMOKE_OUT (results; default benchmarks/results/deploy),
SMOKE_PORT (18000), SMOKE_ENGINE (docker|podman), SMOKE_KEEP=1 (leave the stack and images),
SMOKE_LOCK_WAIT (seconds to wait for another run on this host; 3600).

One run at a time per host: the stack's project name, its ports and the image tags are
fixed, so a second run (two CI jobs on one runner, or a local run left going) would recreate the
first one's containers under it. A run takes an exclusive lock first and waits for one that
holds it; containers of the project found after that are a dead run's leftovers and are removed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROJECT = "mslm-smoke"
LOCK = Path(tempfile.gettempdir()) / "mslm-compose-smoke.lock"
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = "python3,python3-venv,ca-certificates"
BASE_TAG = "localhost/mslm-debian-python:3.11-bookworm"
BASE_MAX_AGE_DAYS = 7  # a cached base older than this is rebuilt (security updates)
EXIT_FAILED, EXIT_NO_ENGINE = 1, 3

TEXTS = [
    "The patient has no fever but reports breast cancer treated with aspirin.",
    "Metformin was given for diabetes; pneumonia was ruled out.",
]


class Failed(Exception):
    """Our images or stack did not do what they must."""


class NoEngine(Exception):
    """No container engine can run a container here: nothing of ours was tested."""


def env_example() -> dict[str, str]:
    """The defaults a user starts from (.env.example): image names, version."""
    values = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        m = re.match(r"^([A-Z_]+)=(\S*)", line)
        if m:
            values[m.group(1)] = m.group(2)
    return values


def corpus() -> dict[str, str]:
    """A small IOB corpus (Disease, Chemical) in three splits, made here: nothing copied."""
    diseases = ["fever", "breast cancer", "pneumonia", "diabetes", "hypertension", "asthma"]
    drugs = ["aspirin", "metformin", "insulin", "ibuprofen", "amoxicillin"]
    templates = [
        "The patient has {d} .",
        "{c} was given for {d} .",
        "No {d} was found .",
        "She takes {c} daily for {d} .",
        "History of {d} treated with {c} .",
        "He reports {d} and stopped {c} .",
    ]

    def sentence(template: str, d: str, c: str) -> str:
        rows = []
        for i, word in enumerate(template.split()):
            if word in ("{d}", "{c}"):
                name, tag = (d, "Disease") if word == "{d}" else (c, "Chemical")
                for j, part in enumerate(name.split()):
                    part = part.capitalize() if i == 0 and j == 0 else part
                    rows.append(f"{part}\t{'B' if j == 0 else 'I'}-{tag}")
            else:
                rows.append(f"{word}\tO")
        return "\n".join(rows) + "\n"

    sentences = [
        sentence(t, diseases[(i + k) % len(diseases)], drugs[(i * 2 + k) % len(drugs)])
        for k in range(8)
        for i, t in enumerate(templates)
    ]
    return {
        "train": "\n".join(sentences[:36]),
        "dev": "\n".join(sentences[36:42]),
        "test": "\n".join(sentences[42:]),
    }


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
        )
    for name, (filename, content) in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: text/tab-separated-values\r\n\r\n'
        )
        parts.append(head.encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def apt_mirror() -> str:
    """The machine's own Debian source (deb822 or one-line), else deb.debian.org."""
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for m in re.finditer(r"^URIs:\s*(\S+)", path.read_text(), re.MULTILINE):
            if "security" not in m.group(1):
                return m.group(1)
    for path in [Path("/etc/apt/sources.list"), *Path("/etc/apt").glob("sources.list.d/*.list")]:
        if path.exists():
            for m in re.finditer(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+\S+", path.read_text(), re.M):
                if "security" not in m.group(1):
                    return m.group(1)
    return "http://deb.debian.org/debian"


class Smoke:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.work = Path(os.environ.get("SMOKE_WORK") or tempfile.mkdtemp(prefix="mslm-smoke-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.out = Path(os.environ.get("SMOKE_OUT") or REPO / "benchmarks/results/deploy")
        self.out.mkdir(parents=True, exist_ok=True)
        self.port = int(os.environ.get("SMOKE_PORT", "18000"))
        self.keep = os.environ.get("SMOKE_KEEP") == "1"
        self.stack = self.work / "stack"
        self.full_log = (self.out / "compose-smoke.full.log").open("w", encoding="utf-8")
        self.steps: list[dict[str, Any]] = []
        self.env = dict(os.environ)
        self.defaults = env_example()
        self.version = self.defaults["MSLM_VERSION"]
        self.images: dict[str, str] = {}
        self.sizes: dict[str, int] = {}
        self.report: dict[str, Any] = {
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        }
        self.service: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()
        self.engine = ""
        self.compose_cmd: list[str] = []
        self.admin = ""

    # -- plumbing -----------------------------------------------------------------------------
    def log(self, message: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f} s] {message}"
        print(line, flush=True)
        self.full_log.write(line + "\n")
        self.full_log.flush()

    def run(
        self,
        argv: list[str],
        *,
        check: bool = True,
        timeout: float = 900,
        input: bytes | None = None,
        cwd: Path | None = None,
        quiet: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command; its output goes to the full log (and is returned)."""
        self.full_log.write(f"$ {shlex.join(argv)}\n")
        self.full_log.flush()
        try:
            done = subprocess.run(
                argv,
                cwd=cwd or (self.stack if self.stack.exists() else self.work),
                env=self.env,
                input=input,
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise Failed(f"{shlex.join(argv)} ran past {timeout:.0f} s") from exc
        if not quiet:
            self.full_log.write(done.stdout.decode(errors="replace")[-20000:])
        self.full_log.write(done.stderr.decode(errors="replace")[-20000:])
        self.full_log.flush()
        if check and done.returncode != 0:
            tail = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
            raise Failed(f"{shlex.join(argv)} exited {done.returncode}:\n{tail}")
        return done

    def compose(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
        return self.run([*self.compose_cmd, *args], **kw)

    def take_lock(self) -> None:
        """Hold :data:`LOCK` for the rest of this process (the kernel lets go when it ends,
        however it ends); wait up to SMOKE_LOCK_WAIT s for another run that holds it."""
        self.lock = LOCK.open("a+")
        wait = float(os.environ.get("SMOKE_LOCK_WAIT", "3600"))
        deadline = time.monotonic() + wait
        said = False
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Failed(
                        f"another compose smoke run has held {LOCK} for over {wait:.0f} s"
                    ) from None
                if not said:
                    self.lock.seek(0)
                    holder = self.lock.read().strip() or "?"
                    self.log(f"another compose smoke run holds {LOCK} ({holder}): waiting")
                    said = True
                time.sleep(5)
        self.lock.seek(0)
        self.lock.truncate()
        self.lock.write(f"pid {os.getpid()}, started {self.report['started']}\n")
        self.lock.flush()

    def remove_leftovers(self) -> None:
        """Containers and volumes of the project that a killed run left behind (this run holds
        the lock, so no live run owns them): gone before the first start, which would otherwise
        recreate some and keep others."""
        left = self.run(
            [self.engine, "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"],
            check=False,
        ).stdout.split()
        if left:
            self.log(f"{len(left)} container(s) left by an earlier run of {PROJECT}: removed")
            self.compose("down", "-v", "--remove-orphans", check=False, timeout=300)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        record: dict[str, Any] = {"step": name}
        start = time.monotonic()
        self.log(f"-> {name}")
        try:
            yield record
        except BaseException as exc:
            record.update(
                ok=False, seconds=round(time.monotonic() - start, 1), error=str(exc)[:2000]
            )
            self.steps.append(record)
            self.log(f"FAILED {name}: {exc}")
            raise
        record.update(ok=True, seconds=round(time.monotonic() - start, 1))
        self.steps.append(record)
        extra = {k: v for k, v in record.items() if k not in ("step", "ok", "seconds")}
        self.log(f"ok {name} ({record['seconds']} s) {json.dumps(extra) if extra else ''}")

    def http(
        self,
        method: str,
        path: str,
        *,
        key: str | None = None,
        body: Any = None,
        port: int | None = None,
        raw: tuple[bytes, str] | None = None,
        timeout: float = 120,
    ) -> tuple[int, Any]:
        url = f"http://127.0.0.1:{port or self.port}{path}"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        data = None
        if raw is not None:
            data, headers["Content-Type"] = raw
        elif body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        try:
            return status, json.loads(payload)
        except ValueError:
            return status, payload.decode(errors="replace")

    def expect(self, status: int, want: int, body: Any, what: str) -> Any:
        if status != want:
            raise Failed(f"{what}: HTTP {status}, wanted {want}: {str(body)[:1500]}")
        return body

    def wait(self, what: str, probe: Any, timeout: float, every: float = 2.0) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = probe()
            except (OSError, urllib.error.URLError, ConnectionError) as exc:
                last = exc
            else:
                if last:
                    return last
            time.sleep(every)
        raise Failed(f"{what}: not within {timeout:.0f} s (last: {str(last)[:800]})")

    # -- the engine ---------------------------------------------------------------------------
    def setup_engine(self) -> None:
        wanted = os.environ.get("SMOKE_ENGINE", "")
        docker_ok = (
            wanted != "podman"
            and shutil.which("docker")
            and subprocess.run(["docker", "info"], capture_output=True).returncode == 0
        )
        if docker_ok:
            self.engine = "docker"
        elif wanted != "docker" and shutil.which("podman"):
            self.engine = "podman"
            if not (shutil.which("catatonit") or Path("/usr/libexec/podman/catatonit").exists()):
                # the compose file's `init: true` (a PID 1 that forwards SIGTERM); Debian's
                # podman only recommends it, so a --no-install-recommends host lacks it
                raise Failed(
                    "Podman needs catatonit for the compose file's `init: true`: "
                    "apt-get install catatonit"
                )
            if shutil.which("runc") and not self.env.get("CONTAINERS_CONF"):
                # crun and the default limits fail on some machines (ours among them); runc and
                # explicit limits work everywhere Podman does
                conf = self.work / "containers.conf"
                conf.write_text(
                    '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\n'
                    '[engine]\nruntime = "runc"\n'
                )
                self.env["CONTAINERS_CONF"] = str(conf)
            sock = self.work / "podman.sock"
            sock.unlink(missing_ok=True)
            self.service = subprocess.Popen(
                ["podman", "system", "service", "--time=0", f"unix://{sock}"],
                env=self.env,
                stdout=self.full_log,
                stderr=subprocess.STDOUT,
            )
            self.wait("the Podman socket", sock.exists, 30, 0.5)
            self.env["DOCKER_HOST"] = f"unix://{sock}"
            if not Path("/run/systemd/system").is_dir():
                self.tick_health_checks()
        else:
            raise NoEngine("neither a Docker engine nor Podman is installed")
        if (
            subprocess.run(
                ["docker", "compose", "version"], capture_output=True, env=self.env
            ).returncode
            == 0
        ):
            self.compose_cmd = ["docker", "compose"]
        elif shutil.which("docker-compose"):
            # Compose v1 applies deploy.resources only in compatibility mode
            self.compose_cmd = ["docker-compose", "--compatibility"]
        elif self.engine == "podman" and shutil.which("podman-compose"):
            self.compose_cmd = ["podman-compose"]
        else:
            raise NoEngine("no compose command: install Docker Compose (or docker-compose)")
        plain = [c for c in self.compose_cmd if not c.startswith("--")]
        self.report["tools"] = {
            "engine": self.run([self.engine, "--version"]).stdout.decode().strip(),
            "compose": self.run([*plain, "version"], check=False).stdout.decode().splitlines()[:1],
        }
        self.env["ENGINE"] = self.engine
        self.env["COMPOSE"] = shlex.join(self.compose_cmd)

    def tick_health_checks(self) -> None:
        """Podman runs health checks from systemd timers; on a host without systemd (this
        machine's containers) nothing runs them and every `service_healthy` waits for ever.
        Run them here, as the timers would, every 5 s."""
        self.log("no systemd: Podman's health checks are run by this script every 5 s")

        def tick() -> None:
            while not self.stopping.is_set():
                ids = subprocess.run(
                    [
                        "podman",
                        "ps",
                        "-q",
                        "--filter",
                        f"label=com.docker.compose.project={PROJECT}",
                    ],
                    capture_output=True,
                    env=self.env,
                    text=True,
                ).stdout.split()
                for cid in ids:
                    subprocess.run(
                        ["podman", "healthcheck", "run", cid],
                        capture_output=True,
                        env=self.env,
                        timeout=60,
                    )
                self.stopping.wait(5)

        threading.Thread(target=tick, daemon=True).start()

    def pull(self, image: str) -> bool:
        name = image if "/" in image.split(":")[0] else f"docker.io/library/{image}"
        done = self.run([self.engine, "pull", name], check=False, timeout=600)
        if done.returncode == 0 and name != image:
            self.run([self.engine, "tag", name, image], check=False)
        return done.returncode == 0

    def debian_base(self) -> str:
        mirror = os.environ.get("SMOKE_DEBIAN_MIRROR") or apt_mirror()
        recipe = f"debootstrap --variant=minbase --include={BASE_PACKAGES} {DEBIAN_SUITE} {mirror}"
        key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
        label = (
            self.run(
                [
                    self.engine,
                    "image",
                    "inspect",
                    "--format",
                    '{{index .Config.Labels "mslm.base.recipe"}} '
                    '{{index .Config.Labels "mslm.base.built"}}',
                    BASE_TAG,
                ],
                check=False,
            )
            .stdout.decode()
            .split()
        )
        if len(label) == 2 and label[0] == key:
            age = dt.date.today() - dt.date.fromisoformat(label[1])
            if age.days <= BASE_MAX_AGE_DAYS:
                self.log(f"the Debian base from {label[1]} is reused ({recipe})")
                return BASE_TAG
        if not shutil.which("debootstrap"):
            raise NoEngine(
                "no registry answers and debootstrap is not installed (apt-get install debootstrap)"
            )
        root = self.work / "debian-root"
        shutil.rmtree(root, ignore_errors=True)
        self.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={BASE_PACKAGES}",
                DEBIAN_SUITE,
                str(root),
                mirror,
            ],
            timeout=1200,
        )
        python = root / "usr/bin/python"
        if not python.exists():
            python.symlink_to("python3")
        for junk in (
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
        ):
            for path in (root / junk).glob("*"):
                if path.is_file() or path.is_symlink():
                    path.unlink()
                elif path.is_dir() and path.name != "partial":
                    shutil.rmtree(path, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        self.run(
            [
                self.engine,
                "import",
                "--change",
                'CMD ["python3"]',
                "--change",
                f"LABEL mslm.base.recipe={key}",
                "--change",
                f"LABEL mslm.base.built={dt.date.today().isoformat()}",
                "-",
                BASE_TAG,
            ],
            input=tar.communicate()[0],
        )
        shutil.rmtree(root, ignore_errors=True)
        return BASE_TAG

    def base_images(self) -> None:
        """The base of our images, Redis and PostgreSQL: pulled where a registry answers, else
        from Debian."""
        python = self.defaults["MSLM_PYTHON_IMAGE"]
        self.images["python"] = python if self.pull(python) else self.debian_base()
        check = self.run(
            [
                self.engine,
                "run",
                "--rm",
                self.images["python"],
                "python",
                "-c",
                "import sys; print(sys.version)",
            ],
            check=False,
        )
        if check.returncode != 0:
            raise NoEngine(
                f"{self.engine} cannot run a container here: "
                + (check.stdout + check.stderr).decode(errors="replace")[-1500:]
            )
        for name in ("redis", "postgres"):
            official = self.defaults[f"MSLM_{name.upper()}_IMAGE"]
            if self.pull(official):
                self.images[name] = official
            else:
                self.images[name] = f"localhost/mslm-{name}:{DEBIAN_SUITE}"
                self.build(
                    f"docker/{name}.Dockerfile",
                    self.images[name],
                    {"BASE_IMAGE": self.images["python"]},
                )

    def build(self, dockerfile: str, tag: str, args: dict[str, str]) -> None:
        argv = [self.engine, "build", "-f", dockerfile, "-t", tag]
        for key, value in args.items():
            argv += ["--build-arg", f"{key}={value}"]
        cert = self.env.get("PIP_CERT", "")
        if self.engine == "podman":
            # Podman's default OCI format drops HEALTHCHECK from the image
            argv += ["--network", "host", "--format", "docker"]
            if cert and Path(cert).is_file() and "PYTHON_IMAGE" in args:
                # a TLS-inspecting proxy's CA, for pip (a build argument: not kept in the image)
                argv += ["-v", f"{Path(cert).resolve()}:/run/pip-ca.pem:ro"]
                argv += ["--build-arg", "PIP_CERT=/run/pip-ca.pem"]
        self.run([*argv, "."], cwd=REPO, timeout=1800, quiet=True)
        self.sizes[tag] = int(
            self.run([self.engine, "image", "inspect", "--format", "{{.Size}}", tag]).stdout
        )

    def torch_cpu_wheel(self) -> None:
        """PyTorch's CPU wheel from a local wheel folder into docker/wheels/, when one holds the
        file the lock names (its sha256 is checked again by pip in the build)."""
        lock = (REPO / "docker/requirements-worker-cpu.txt").read_text()
        m = re.search(r"^torch==(\S+) \\\n\s+--hash=sha256:(\w+)", lock, re.MULTILINE)
        if not m:
            raise Failed("docker/requirements-worker-cpu.txt names no hashed torch")
        folders = [
            *os.environ.get("SMOKE_WHEELS", "").split(":"),
            *os.environ.get("PIP_FIND_LINKS", "").split(),
        ]
        for folder in filter(None, folders):
            for wheel in Path(folder).glob(f"torch-{m.group(1)}-*.whl"):
                if hashlib.sha256(wheel.read_bytes()).hexdigest() == m.group(2):
                    target = REPO / "docker/wheels" / wheel.name
                    if not target.exists():
                        shutil.copy(wheel, target)
                    self.log(f"torch from {wheel} (sha256 as locked)")
                    return
        self.log("torch from PyTorch's CPU index")

    # -- the stack ----------------------------------------------------------------------------
    def quick_start(self) -> None:
        """The quick start of docs/deployment.md, in a folder of its own, with this machine's
        choices."""
        shutil.rmtree(self.stack, ignore_errors=True)
        self.stack.mkdir(parents=True)
        shutil.copy(REPO / "docker-compose.yml", self.stack)
        shutil.copy(REPO / ".env.example", self.stack / ".env")
        cpus = str(os.cpu_count() or 2)
        choices = {
            "COMPOSE_PROJECT_NAME": PROJECT,
            "COMPOSE_PROFILES": "cpu",
            "MSLM_PORT": str(self.port),
            "MSLM_PYTHON_IMAGE": self.images["python"],
            "MSLM_REDIS_IMAGE": self.images["redis"],
            "MSLM_POSTGRES_IMAGE": self.images["postgres"],
            "MSLM_API_CPUS": cpus,
            "MSLM_WORKER_CPUS": cpus,
            "MSLM_WORKER_MEMORY": "8G",
            # a worker's death is noticed in 30 s, not 2 min
            "MSLM_HEARTBEAT_TIMEOUT_SECONDS": "30",
            # the first start would fetch the clinical corpora and train for half an hour
            # (issue 28); the smoke test trains its own small job instead
            "MSLM_BOOTSTRAP": "none",
        }
        text = (self.stack / ".env").read_text()
        for key, value in choices.items():
            text, n = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.MULTILINE)
            if n == 0:
                text += f"{key}={value}\n"
        (self.stack / ".env").write_text(text)
        # the quick start's commands for the secrets, as a user runs them
        self.run(
            [
                "bash",
                "-c",
                "mkdir -p secrets && openssl rand -base64 32 | tr -d '\\n' > "
                "secrets/mslm_database_password && touch secrets/mslm_api_keys "
                "secrets/mslm_warehouses",
            ]
        )

    def wait_healthy(self, port: int | None = None, timeout: float = 300) -> None:
        self.wait(
            f"the API on port {port or self.port}",
            lambda: self.http("GET", "/healthz", port=port, timeout=5)[0] == 200,
            timeout,
        )

    def up(self, *args: str) -> None:
        """``compose up -d``; once more where Podman lost the race to read the cgroup of a
        container that had just exited (the one-shot ``migrate``: "read /proc/N/cgroup: no
        such process", podman 4.3), which leaves the stack half up; ``up`` is idempotent, and
        the retry is logged and counted in the report."""
        try:
            self.compose("up", "-d", "--no-build", *args, timeout=900)
        except Failed as exc:
            if not re.search(r"read /proc/\d+/cgroup: no such process", str(exc)):
                raise
            self.log("the engine lost a container's cgroup as it exited: compose up once more")
            self.report["engine_retries"] = self.report.get("engine_retries", 0) + 1
            self.compose("up", "-d", "--no-build", *args, timeout=900)

    def container_ids(self, service: str) -> list[str]:
        out = self.compose("ps", "-q", service).stdout.decode().split()
        return [c for c in out if c]

    def health(self, cid: str) -> str:
        return (
            self.run([self.engine, "inspect", "--format", "{{.State.Health.Status}}", cid])
            .stdout.decode()
            .strip()
        )

    def admin_key(self) -> str:
        logs = self.compose("logs", "--no-color", "api").stdout.decode(errors="replace")
        lines = [line.split("|", 1)[-1].strip() for line in logs.splitlines()]
        for i, line in enumerate(lines[:-1]):
            if "created an ADMIN key" in line:
                return lines[i + 1]
        raise Failed("the API's log shows no ADMIN key at the first start")

    def job(self, dataset_id: str, **params: Any) -> str:
        body = {
            "dataset_id": dataset_id,
            "strategy": "vanilla",
            "epochs": 3,
            "batch_size": 8,
            "max_length": 32,
            "patience": 0,
            "export": {"onnx": True, "quantize": "int8"},
            **params,
        }
        status, created = self.http("POST", "/v1/jobs", key=self.admin, body=body)
        return self.expect(status, 202, created, "POST /v1/jobs")["id"]

    def get_job(self, job_id: str, port: int | None = None) -> dict[str, Any]:
        status, body = self.http("GET", f"/v1/jobs/{job_id}", key=self.admin, port=port)
        return self.expect(status, 200, body, f"GET /v1/jobs/{job_id}")

    def finished(self, job_id: str, timeout: float = 900) -> dict[str, Any]:
        job = self.wait(
            f"job {job_id} to finish",
            lambda: (
                (j := self.get_job(job_id))["state"] in ("succeeded", "failed", "cancelled") and j
            ),
            timeout,
            3,
        )
        if job["state"] != "succeeded":
            raise Failed(f"job {job_id} ended {job['state']}: {job.get('error')}")
        return job

    def annotate(self, port: int | None = None) -> dict[str, Any]:
        status, body = self.http(
            "POST", "/v1/annotate", key=self.admin, body={"texts": TEXTS}, port=port
        )
        return self.expect(status, 200, body, "POST /v1/annotate")

    # -- the user's path ----------------------------------------------------------------------
    def walk(self) -> None:
        with self.step("the first start: up -d") as r:
            self.up()
            self.wait_healthy()
            self.admin = self.admin_key()
            r["services"] = sorted(set(self.compose("ps", "--services").stdout.decode().split()))

        with self.step("upload a corpus") as r:
            files = {s: (f"{s}.tsv", text.encode()) for s, text in corpus().items()}
            status, body = self.http(
                "POST", "/v1/datasets", key=self.admin, raw=multipart({"name": "smoke"}, files)
            )
            self.dataset = self.expect(status, 201, body, "POST /v1/datasets")["id"]
            r["dataset"] = self.dataset

        with self.step("fine-tune on the CPU worker") as r:
            job = self.finished(self.job(self.dataset))
            self.first_job, self.model = job["id"], job["model_id"]
            r.update(job=job["id"], model=self.model, attempts=job["attempts"])

        with self.step("activate, annotate, evaluate") as r:
            status, body = self.http("POST", f"/v1/models/{self.model}/activate", key=self.admin)
            self.expect(status, 200, body, "activate")
            answer = self.wait(
                "the activated model to be served",
                lambda: (a := self.annotate())["model"]["id"] == self.model and a,
                60,
            )
            entities = [e for res in answer["results"] for e in res["entities"]]
            if not entities:
                raise Failed(f"no entity found in {TEXTS}: {answer}")
            for text, res in zip(TEXTS, answer["results"], strict=True):
                for e in res["entities"]:
                    if text[e["start"] : e["end"]] != e["text"] or not 0 < e["confidence"] <= 1:
                        raise Failed(f"a wrong entity: {e}")
            fever = [e for e in answer["results"][0]["entities"] if e["text"] == "fever"]
            if fever and not fever[0]["assertion"]["negated"]:
                raise Failed(f"'no fever' is not negated: {fever[0]}")
            if not all(e.get("assertion") for e in entities if e["type"] == "Disease"):
                raise Failed("a Disease without its assertion")
            self.answer = answer
            status, body = self.http(
                "POST",
                "/v1/evaluations",
                key=self.admin,
                body={"model_id": self.model, "dataset_id": self.dataset},
            )
            evaluation = self.expect(status, 202, body, "POST /v1/evaluations")
            done = self.wait(
                "the evaluation",
                lambda: (
                    (
                        e := self.http(
                            "GET", f"/v1/evaluations/{evaluation['id']}", key=self.admin
                        )[1]
                    )["state"]
                    in ("succeeded", "failed")
                    and e
                ),
                600,
                3,
            )
            if done["state"] != "succeeded":
                raise Failed(f"the evaluation failed: {done}")
            r.update(
                entities=[
                    (
                        e["text"],
                        e["type"],
                        round(e["confidence"], 3),
                        {k: v for k, v in (e["assertion"] or {}).items() if v is True},
                    )
                    for e in entities
                ],
                test_f1_strict=done["metrics"]["strict"]["f1"],
            )

        with self.step("a bulk annotation job on the annotator") as r:
            notes = "".join(
                json.dumps({"id": f"note-{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)
            )
            status, body = self.http(
                "POST",
                "/v1/annotation-jobs/inputs",
                key=self.admin,
                raw=multipart({}, {"file": ("notes.jsonl", notes.encode())}),
            )
            upload = self.expect(status, 201, body, "POST /v1/annotation-jobs/inputs")
            status, body = self.http(
                "POST",
                "/v1/annotation-jobs",
                key=self.admin,
                body={"source": {"kind": "file", "input": upload["id"]}, "chunk_size": 1},
            )
            bulk_job = self.expect(status, 202, body, "POST /v1/annotation-jobs")
            done = self.wait(
                "the annotation job",
                lambda: (
                    (
                        j := self.http(
                            "GET", f"/v1/annotation-jobs/{bulk_job['id']}", key=self.admin
                        )[1]
                    )["state"]
                    in ("succeeded", "failed", "cancelled")
                    and j
                ),
                300,
                2,
            )
            if done["state"] != "succeeded":
                raise Failed(f"the annotation job ended {done['state']}: {done.get('error')}")
            status, body = self.http(
                "GET", f"/v1/annotation-jobs/{bulk_job['id']}/output", key=self.admin
            )
            text = self.expect(status, 200, body, "GET /v1/annotation-jobs/{id}/output")
            rows = (
                [json.loads(line) for line in str(text).splitlines()]
                if isinstance(text, str)
                else [text]
            )
            want = [res["entities"] for res in self.answer["results"]]
            if [row["entities"] for row in rows] != want:
                raise Failed("the annotation job's entities differ from /v1/annotate's")
            r.update(job=bulk_job["id"], notes=done["progress"]["committed"], same_as_annotate=True)

        with self.step("down + up: keys, datasets, jobs and the served model survive") as r:
            self.compose("down", timeout=300)
            self.up()
            self.wait_healthy()
            status, body = self.http("GET", f"/v1/datasets/{self.dataset}", key=self.admin)
            self.expect(status, 200, body, "the dataset after down + up (and the admin key)")
            again = self.wait(
                "the served model after up",
                lambda: (a := self.annotate())["model"]["id"] == self.model and a,
                120,
            )
            if again["results"] != self.answer["results"]:
                raise Failed("other annotations after down + up")
            r["same_annotations"] = True

        with self.step("a worker killed mid-job: its job runs again, never stuck running") as r:
            job_id = self.job(self.dataset, epochs=60, export={"onnx": False})
            self.wait(
                "the long job to run",
                lambda: (j := self.get_job(job_id))["state"] == "running" and j["progress"],
                300,
            )
            (worker,) = self.container_ids("worker-cpu")
            pid = (
                self.run([self.engine, "inspect", "--format", "{{.State.Pid}}", worker])
                .stdout.decode()
                .strip()
            )
            os.kill(int(pid), signal.SIGKILL)  # what the OOM killer or a crash does
            killed = time.monotonic()
            job = self.wait(
                "the job to leave its dead worker",
                lambda: (
                    j
                    if (j := self.get_job(job_id))["attempts"] >= 2
                    or j["state"] in ("failed", "succeeded")
                    else None
                ),
                420,
                3,
            )
            restarts = (
                self.run(
                    [self.engine, "inspect", "--format", "{{.RestartCount}}", worker], check=False
                )
                .stdout.decode()
                .strip()
            )
            r.update(
                state=job["state"],
                attempts=job["attempts"],
                seconds_to_recover=round(time.monotonic() - killed, 1),
                worker_restarts=restarts,
            )
            if job["state"] in ("running", "queued"):
                self.http("POST", f"/v1/jobs/{job_id}/cancel", key=self.admin)
                self.wait(
                    "the cancelled job to stop",
                    lambda: self.get_job(job_id)["state"] not in ("running", "queued"),
                    300,
                    3,
                )

        with self.step("scale out: api=2, worker-cpu=2") as r:
            self.env["MSLM_PORT"] = ""  # an ephemeral host port per API replica
            try:
                self.up("--scale", "api=2", "--scale", "worker-cpu=2")
            finally:
                del self.env["MSLM_PORT"]
            ports = []
            for index in (1, 2):
                out = self.compose("port", "--index", str(index), "api", "8000").stdout.decode()
                ports.append(int(out.strip().rsplit(":", 1)[1]))
            for port in ports:
                self.wait_healthy(port)
            published, self.port = self.port, ports[0]
            # both workers ready first (a worker takes a while to import torch), and jobs long
            # enough to overlap
            self.wait(
                "two healthy CPU workers",
                lambda: (
                    [self.health(c) for c in self.container_ids("worker-cpu")]
                    == ["healthy", "healthy"]
                ),
                300,
            )
            jobs = [self.job(self.dataset, seed=s, epochs=12) for s in (11, 12)]
            self.wait(
                "two jobs running at once",
                lambda: all(self.get_job(j)["state"] == "running" for j in jobs),
                300,
                1,
            )
            models = [self.finished(j)["model_id"] for j in jobs]
            status, body = self.http(
                "POST", f"/v1/models/{models[1]}/activate", key=self.admin, port=ports[0]
            )
            self.expect(status, 200, body, "activate through replica 1")
            self.wait(
                "replica 2 to serve the model activated through replica 1",
                lambda: self.annotate(ports[1])["model"]["id"] == models[1],
                60,
                1,
            )
            r.update(api_ports=ports, jobs_at_once=2, served_by_both=models[1])
            self.http("POST", f"/v1/models/{self.model}/activate", key=self.admin, port=ports[0])
            self.port = published
            self.up("--scale", "api=1", "--scale", "worker-cpu=1")
            self.wait_healthy()
            self.wait(
                "the first model served again",
                lambda: self.annotate()["model"]["id"] == self.model,
                60,
                1,
            )

        with self.step("every container runs as non-root") as r:
            users = {}
            for cid in self.compose("ps", "-q").stdout.decode().split():
                name, running, user = (
                    self.run(
                        [
                            self.engine,
                            "inspect",
                            "--format",
                            "{{.Name}}|{{.State.Running}}|{{.Config.User}}",
                            cid,
                        ]
                    )
                    .stdout.decode()
                    .strip()
                    .split("|")
                )
                if running != "true":  # a one-shot service (migrate, bootstrap): its image's user
                    users[name.lstrip("/")] = [f"image user {user or 'root'}"]
                    continue
                if self.engine == "podman":
                    out = self.run(["podman", "top", cid, "user"]).stdout.decode()
                else:
                    out = self.run(["docker", "top", cid, "-o", "user"]).stdout.decode()
                procs = [line.split() for line in out.splitlines()[1:] if line.strip()]
                users[name.lstrip("/")] = sorted({p[0] for p in procs})
            r["users"] = users
            root = {
                n: u
                for n, u in users.items()
                if {"root", "0", "image user root", "image user 0"} & set(u)
                or any(x.startswith("image user 0:") for x in u)
            }
            if root:
                raise Failed(f"processes running as root: {root}")

        with self.step("air-gapped install: save, remove, load the images") as r:
            archive = self.work / "mslm-images.tar"
            self.run(["bash", str(REPO / "scripts/images.sh"), "save", str(archive)], timeout=1200)
            r["archive_mb"] = round(archive.stat().st_size / 2**20)
            self.compose("down", timeout=300)
            ours = [f"mslm-api:{self.version}", f"mslm-worker-cpu:{self.version}"]
            removed = [
                *ours,
                *(
                    self.images[n]
                    for n in ("redis", "postgres")
                    if "localhost/mslm-" in self.images[n]
                ),
            ]
            self.run([self.engine, "rmi", *removed], check=False)
            self.run(["bash", str(REPO / "scripts/images.sh"), "load", str(archive)], timeout=1200)
            self.up()
            self.wait_healthy()
            if self.annotate()["results"] != self.answer["results"]:
                raise Failed("other annotations after the images were loaded")
            r["images"] = removed
            archive.unlink()

        with self.step("backup, down -v, restore into fresh volumes") as r:
            backups = self.work / "backups"
            done = self.run(["bash", str(REPO / "scripts/backup.sh"), str(backups)], timeout=600)
            archive = Path(done.stdout.decode().strip().splitlines()[-1])
            r["archive_kb"] = round(archive.stat().st_size / 1024)
            self.compose("down", "-v", timeout=300)
            self.run(["bash", str(REPO / "scripts/restore.sh"), str(archive)], timeout=600)
            self.wait_healthy()
            again = self.wait(
                "the restored model to be served",
                lambda: (a := self.annotate())["model"]["id"] == self.model and a,
                120,
            )
            if again["results"] != self.answer["results"]:
                raise Failed("other annotations after the restore")
            if self.get_job(self.first_job)["state"] != "succeeded":
                raise Failed("the first job is not in the restored database")
            r["same_annotations"] = True

    # -- the whole run ------------------------------------------------------------------------
    def main(self) -> int:
        code = 0
        try:
            with self.step("one run at a time on this host"):
                self.take_lock()
            with self.step("container engine"):
                self.setup_engine()
            with self.step("base images") as r:
                self.base_images()
                r.update(self.images)
            with self.step("build the API image"):
                self.build(
                    "docker/api.Dockerfile",
                    f"mslm-api:{self.version}",
                    {"PYTHON_IMAGE": self.images["python"]},
                )
            with self.step("build the CPU worker image"):
                self.torch_cpu_wheel()
                self.build(
                    "docker/worker.Dockerfile",
                    f"mslm-worker-cpu:{self.version}",
                    {"PYTHON_IMAGE": self.images["python"], "VARIANT": "cpu"},
                )
            with self.step("the quick start: .env and secrets/"):
                self.quick_start()
                self.remove_leftovers()
            self.walk()
            self.report["status"] = "passed"
        except NoEngine as exc:
            self.report.update(status="no container engine", reason=str(exc))
            bar = "!" * 78
            print(
                f"\n{bar}\nNOTHING OF OURS WAS TESTED: {exc}\n{bar}\n", file=sys.stderr, flush=True
            )
            code = EXIT_NO_ENGINE
        except (Failed, OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            self.report.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:3000])
            code = EXIT_FAILED
            with contextlib.suppress(Exception):
                logs = self.compose("logs", "--no-color", "--tail", "200", check=False, timeout=120)
                self.full_log.write(logs.stdout.decode(errors="replace"))
        finally:
            if not self.keep and self.compose_cmd and self.stack.exists():
                with contextlib.suppress(Exception):
                    self.compose("down", "-v", check=False, timeout=300)
                with contextlib.suppress(Exception):
                    self.run(
                        [
                            self.engine,
                            "rmi",
                            f"mslm-api:{self.version}",
                            f"mslm-worker-cpu:{self.version}",
                        ],
                        check=False,
                    )
            self.stopping.set()
            if self.service is not None:
                self.service.terminate()
            self.report.update(
                seconds=round(time.monotonic() - self.t0, 1),
                image_mb={k: round(v / 1e6) for k, v in self.sizes.items()},
                steps=self.steps,
                command="bash scripts/compose-smoke.sh",
                machine={"cpus": os.cpu_count()},
            )
            self.write()
        return code

    def write(self) -> None:
        (self.out / "compose-smoke.json").write_text(json.dumps(self.report, indent=2) + "\n")
        (self.out / "compose-smoke.md").write_text(render_markdown(self.report))
        print(json.dumps({k: v for k, v in self.report.items() if k != "steps"}))


def render_markdown(report: dict[str, Any]) -> str:
    """The steps, timings, what each found and the image sizes, as a table."""
    lines = [
        f"# compose smoke: {report.get('status')} in {report['seconds']} s",
        "",
        f"command: `{report['command']}`; started {report['started']}; "
        f"{report['machine']['cpus']} CPUs",
        f"tools: {report.get('tools')}",
        "",
        "| step | ok | seconds | found |",
        "|---|---|---|---|",
    ]
    for s in report["steps"]:
        found = {k: v for k, v in s.items() if k not in ("step", "ok", "seconds")}
        text = json.dumps(found, ensure_ascii=False) if found else ""
        text = text if len(text) <= 400 else text[:400] + " …"
        lines.append(
            f"| {s['step']} | {'yes' if s['ok'] else 'NO'} | {s['seconds']} | "
            f"{text.replace('|', '/')} |"
        )
    lines += ["", "| image | MB |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in report["image_mb"].items()]
    if report.get("reason"):
        lines += ["", f"reason: {report['reason']}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--render"]:  # the table again from a run's JSON
        path = Path(sys.argv[2])
        path.with_suffix(".md").write_text(render_markdown(json.loads(path.read_text())))
        sys.exit(0)
    sys.exit(Smoke().main())
