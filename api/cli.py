"""``mslm serve`` (the API) and ``mslm up`` (API + a fine-tuning and a bulk annotation
worker, no Redis, no PostgreSQL:
SQLite in MSLM_HOME and kombu's filesystem transport), registered through the
``mslm.commands`` entry points."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mslm_settings import Settings

log = logging.getLogger("mslm.api")


def _server_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 in containers)")
    p.add_argument("--port", type=int, default=8000)


def serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the HTTP API")
    _server_flags(p)
    p.add_argument("--workers", type=int, default=1, help="API processes")
    p.set_defaults(handler=run_serve)


def _bootstrap_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        choices=["auto", "clinical", "data", "none"],
        help="the first model of a fresh install: clinical (its corpora from the corpus "
        "cache, fetched when reachable), data (--bootstrap-data), auto (clinical when "
        "possible, else --bootstrap-data, saying why), none (default: MSLM_BOOTSTRAP, auto)",
    )
    p.add_argument(
        "--bootstrap-data",
        help="a corpus directory (train/dev/test files) the first start falls back on "
        "(default: MSLM_BOOTSTRAP_DATA)",
    )
    p.add_argument("--bootstrap-epochs", type=int, help="(default: mslm train's)")


def up(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("up", help="API + workers in one command (embedded store/broker)")
    _server_flags(p)
    _bootstrap_flags(p)
    p.set_defaults(handler=run_up)


def bootstrap_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bootstrap",
        help="on a fresh install, queue the first model's job (the compose stack's first start)",
    )
    _bootstrap_flags(p)
    from .bootstrap import run_bootstrap_command

    p.set_defaults(handler=run_bootstrap_command)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How uvicorn runs the API. X-Forwarded-For is believed only from the proxies that
    MSLM_FORWARDED_ALLOW_IPS names (by default none: a client rotating the header would
    otherwise pick its own address, and the bad-key throttle with it). The head of a request
    is limited to 16 KiB (:mod:`api.http`); a longer one is answered 431 and its connection
    closed; one not complete after MSLM_HEADER_TIMEOUT_SECONDS is answered 408 and closed; a
    process holds MSLM_MAX_CONNECTIONS connections at most, and an idle kept-alive one for
    MSLM_KEEP_ALIVE_SECONDS. At SIGTERM, requests in flight get MSLM_SHUTDOWN_GRACE_SECONDS to
    finish, then are cancelled (their annotation work dropped with them)."""
    from .http import BoundedHttpToolsProtocol

    trusted = settings.forwarded_allow_ips.strip()
    return {
        "access_log": False,  # our middleware logs requests without bodies or query values
        "log_config": None,  # keep the mslm logging set-up
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted or None,
        # httptools with the head of a request (request line and headers) bounded at 16 KiB
        # (api/http.py) and in time (MSLM_HEADER_TIMEOUT_SECONDS), with MSLM_MAX_CONNECTIONS
        # per process
        "http": BoundedHttpToolsProtocol.configured(
            settings.header_timeout_seconds,
            settings.max_connections,
            settings.min_body_rate_kb * 1024,
        ),
        "timeout_keep_alive": settings.keep_alive_seconds,
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds,
    }


def open_files_for(max_connections: int) -> int:
    """Raise this process's open-files limit to its hard limit (a container's default soft
    limit is often 1,024) and return it; say so when MSLM_MAX_CONNECTIONS does not fit in it
    with room for the store, the broker and the models."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    if max_connections + 256 > soft:
        log.warning(
            "MSLM_MAX_CONNECTIONS %d leaves under 256 of the %d open files this process may "
            "have: raise the limit (ulimit -n) or lower MSLM_MAX_CONNECTIONS",
            max_connections,
            soft,
        )
    return soft


def _uvicorn(host: str, port: int, workers: int = 1) -> None:
    import uvicorn

    from mslm_settings import get_settings

    from .metrics import MULTIPROCESS_DIR

    settings = get_settings()
    open_files_for(settings.max_connections)
    options = uvicorn_options(settings)
    shared = None
    if workers > 1:  # processes are spawned with a pickled configuration: an import string
        options["http"] = "api.http:SettingsProtocol"
        # once, here: N processes upgrading the schema or adding MSLM_API_KEYS' keys at once
        # collide (a unique key digest added twice stops a process, and uvicorn the rest)
        from .main import prepare_store

        prepare_store(settings)
        os.environ["MSLM_AUTO_MIGRATE"] = "false"
        if not os.environ.get(MULTIPROCESS_DIR):  # /metrics reads every process's
            shared = tempfile.mkdtemp(prefix="mslm-metrics-")
            os.environ[MULTIPROCESS_DIR] = shared
    try:
        uvicorn.run(
            "api.main:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            **options,
        )
    finally:
        if shared is not None:
            shutil.rmtree(shared, ignore_errors=True)


def run_serve(args: argparse.Namespace) -> int:
    _uvicorn(args.host, args.port, args.workers)
    return 0


def run_up(args: argparse.Namespace) -> int:
    from api.main import prepare_store
    from mslm_settings import get_settings

    settings = get_settings()
    prepare_store(settings)  # schema, keys (prints a new admin key once)
    if not args.verbose:  # one line per phase, and the first start's progress
        logging.getLogger().setLevel(logging.WARNING)
        for phases in (log.name, "mslm.bootstrap", "api.main"):
            logging.getLogger(phases).setLevel(logging.INFO)
    log.info(
        "mslm up: store %s, broker %s, artifacts %s",
        settings.sqlalchemy_url.split("@")[-1],
        "filesystem (embedded)" if settings.embedded_broker else "configured",
        settings.artifacts,
    )
    from worker.processes import WorkerProcess, reaper_process

    from .bootstrap import FirstStartProgress, bootstrap

    job_ids = bootstrap(settings, args.bootstrap, args.bootstrap_data, args.bootstrap_epochs)
    progress = FirstStartProgress(settings, job_ids) if job_ids else None
    # fine-tuning and bulk annotation each have a worker: neither waits for the other
    # (the first spawns its own evaluation process: an evaluation never waits either)
    # and the reaper watches for work whose worker died
    workers = [
        WorkerProcess("train,eval", quiet=True),
        WorkerProcess("annotate", quiet=True),
        reaper_process(),
    ]
    for worker in workers:
        worker.start()
    if progress is not None:
        progress.start()
    log.info(
        "mslm up: the API and the web page at http://%s:%d/ — workers for fine-tuning, "
        "evaluations and bulk annotation; every request's line with mslm -v up",
        args.host,
        args.port,
    )
    try:
        _uvicorn(args.host, args.port)
    finally:
        if progress is not None:
            progress.stop()
        for worker in workers:
            worker.stop()
    return 0
