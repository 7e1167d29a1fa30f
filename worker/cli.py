"""``mslm worker`` and ``mslm migrate`` (registered with the ``mslm`` command through the
``mslm.commands`` entry points, so that ``mslm_core`` never imports the service)."""

from __future__ import annotations

import argparse
import logging
import time

log = logging.getLogger("mslm.worker")


def worker(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run a fine-tuning/evaluation worker (Celery)")
    p.add_argument("--queues", default="train,eval", help="queues to consume (train,eval)")
    p.add_argument("--name", help="worker node name (default: celery@HOST-PID)")
    p.add_argument(
        "--alive-file",
        help="touch this file every 10 s while the process lives (a container health check "
        "reads its age; a worker busy training cannot answer Celery's ping)",
    )
    p.set_defaults(handler=run_worker)


def _keep_touching(path: str, every: float = 10.0) -> None:
    import threading
    from pathlib import Path

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)

    def loop() -> None:
        while True:
            target.touch()
            time.sleep(every)

    threading.Thread(target=loop, name="alive-file", daemon=True).start()


def run_worker(args: argparse.Namespace) -> int:
    import os
    import socket

    from .celery_app import celery_for
    from .settings import get_settings

    settings = get_settings()
    app = celery_for(settings)
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    unknown = sorted(set(queues) - {"train", "eval"})
    if unknown:
        raise SystemExit(f"unknown queue(s) {unknown}; valid: train, eval")
    name = args.name or f"mslm-{os.getpid()}@{socket.gethostname()}"
    if args.alive_file:
        _keep_touching(args.alive_file)
    log.info(
        "worker %s on queues %s (broker %s)",
        name,
        queues,
        "embedded filesystem" if settings.embedded_broker else "configured",
    )
    # one task at a time in this process: training owns the device, and a killed worker
    # takes exactly its own job down (the reaper re-queues it)
    app.worker_main(
        [
            "worker",
            "-Q",
            ",".join(queues),
            "--pool",
            "solo",
            "-n",
            name,
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    return 0


def migrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "migrate", help="upgrade the job store's schema (deployments run it before the API starts)"
    )
    p.add_argument("--revision", default="head")
    p.set_defaults(handler=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    from .migrate import current_revision, upgrade
    from .settings import get_settings

    url = get_settings().sqlalchemy_url
    upgrade(url, args.revision)
    log.info("database schema at %s", current_revision(url))
    return 0


def import_model(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-model", help="copy a model bundle into the store (verified)")
    p.add_argument(
        "path",
        help="bundle directory (mslm train output; mslm export first to "
        "serve it with ONNX Runtime)",
    )
    p.add_argument("--activate", action="store_true", help="serve it (every replica follows)")
    p.set_defaults(handler=run_import_model)


def run_import_model(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .db import session_factory
    from .migrate import upgrade
    from .service import import_bundle, set_active_model
    from .settings import get_settings

    settings = get_settings()
    if settings.auto_migrate:
        upgrade(settings.sqlalchemy_url)
    with session_factory(settings.sqlalchemy_url)() as session:
        model = import_bundle(settings, session, Path(args.path))
        if args.activate:
            set_active_model(session, model.id)
    print(model.id)
    return 0
