"""``mslm serve`` (the API) and ``mslm up`` (API + one worker, no Redis, no PostgreSQL:
SQLite in MSLM_HOME and kombu's filesystem transport), registered through the
``mslm.commands`` entry points."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mslm_settings import Settings

log = logging.getLogger("mslm.api")


def _server_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 in containers)")
    p.add_argument("--port", type=int, default=8000)


def serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the HTTP API")
    _server_flags(p)
    p.add_argument("--workers", type=int, default=1, help="API processes")
    p.set_defaults(handler=run_serve)


def up(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="API + one worker in one command (embedded store/broker)")
    _server_flags(p)
    p.add_argument(
        "--bootstrap-data",
        help="on a fresh install, upload this corpus directory (train/dev/test files) and "
        "fine-tune a first model from it; it is served as soon as it is ready",
    )
    p.add_argument("--bootstrap-epochs", type=int, default=3)
    p.set_defaults(handler=run_up)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How uvicorn runs the API. X-Forwarded-For is believed only from the proxies that
    MSLM_FORWARDED_ALLOW_IPS names (by default none: a client rotating the header would
    otherwise pick its own address, and the bad-key throttle with it). The head of a request
    is limited to 16 KiB (:mod:`api.http`); a longer one is answered 431 and its connection
    closed. At SIGTERM, requests in flight get MSLM_SHUTDOWN_GRACE_SECONDS to finish, then
    are cancelled (their annotation work dropped with them)."""
    from .http import BoundedHttpToolsProtocol

    trusted = settings.forwarded_allow_ips.strip()
    return {
        "access_log": False,  # our middleware logs requests without bodies or query values
        "log_config": None,  # keep the mslm logging set-up
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted or None,
        # httptools with the head of a request (request line and headers) bounded at 16 KiB:
        # as it comes, it read a 100 MB Authorization header whole (issue 18 item 4)
        "http": BoundedHttpToolsProtocol,
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds,
    }


def _uvicorn(host: str, port: int, workers: int = 1) -> None:
    import uvicorn

    from mslm_settings import get_settings

    uvicorn.run(
        "api.main:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        **uvicorn_options(get_settings()),
    )


def run_serve(args: argparse.Namespace) -> int:
    _uvicorn(args.host, args.port, args.workers)
    return 0


def bootstrap(data_dir: str, epochs: int) -> str | None:
    """Upload ``data_dir`` and queue a first job when the store holds no dataset and no
    model; returns the job id, or None when there was nothing to do."""
    from sqlalchemy import select

    from mslm_core.corpus import split_paths
    from mslm_settings import get_settings
    from store.db import session_factory
    from store.models import Dataset, Model
    from store.service import Upload, create_dataset, create_job
    from worker.celery_app import CeleryQueue, celery_for

    settings = get_settings()
    with session_factory(settings.sqlalchemy_url)() as session:
        if session.scalar(select(Dataset.id).limit(1)) or session.scalar(select(Model.id).limit(1)):
            return None
        paths = split_paths(data_dir)
        uploads = [Upload(split, path.name, path) for split, path in paths.items()]
        dataset = create_dataset(settings, session, uploads, Path(data_dir).name)
        job, _ = create_job(
            settings,
            session,
            CeleryQueue(celery_for(settings)),
            dataset.id,
            {"epochs": epochs},
            {"onnx": True, "quantize": "int8"},
            idempotency_key=f"bootstrap-{dataset.id}",
        )
    log.info(
        "bootstrap: dataset %s uploaded, job %s queued (its model is served when ready)",
        dataset.id,
        job.id,
    )
    return job.id


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when ``mslm up`` goes away, however it goes (uvicorn
    re-raises the signal it stopped on, so no ``finally`` of ours would run)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class WorkerProcess:
    """A ``mslm worker`` child, restarted if it dies, stopped with the API."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._supervise, daemon=True, name="worker-sup")

    def _spawn(self) -> None:
        cmd = [sys.executable, "-m", "mslm_core.cli", "worker"]
        self.proc = subprocess.Popen(cmd, env=os.environ.copy(), preexec_fn=_die_with_parent)
        log.info("worker started (pid %d)", self.proc.pid)

    def _supervise(self) -> None:
        backoff = 1.0
        while not self.stopping:
            assert self.proc is not None
            code = self.proc.wait()
            if self.stopping:
                return
            log.error("worker exited with %s; restarting in %.0f s", code, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 60.0)
            self._spawn()

    def start(self) -> None:
        self._spawn()
        self.thread.start()

    def stop(self) -> None:
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def run_up(args: argparse.Namespace) -> int:
    from api.main import prepare_store
    from mslm_settings import get_settings

    settings = get_settings()
    prepare_store(settings)  # schema, keys (prints a new admin key once)
    log.info(
        "mslm up: store %s, broker %s, artifacts %s",
        settings.sqlalchemy_url.split("@")[-1],
        "filesystem (embedded)" if settings.embedded_broker else "configured",
        settings.artifacts,
    )
    if args.bootstrap_data:
        bootstrap(args.bootstrap_data, args.bootstrap_epochs)
    worker = WorkerProcess()
    worker.start()
    try:
        _uvicorn(args.host, args.port)
    finally:
        worker.stop()
    return 0
