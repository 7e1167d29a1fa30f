"""``mslm worker`` and ``mslm reaper`` (registered with the ``mslm`` command through the
``mslm.commands`` entry points, so that ``mslm_core`` never imports the service)."""

from __future__ import annotations

import argparse
import logging
import time

log = logging.getLogger("mslm.worker")


def worker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("worker", help="run a fine-tuning/evaluation worker (Celery)")
    p.add_argument(
        "--queues",
        default="train,eval",
        help="queues to consume: train, eval, annotate (annotation jobs; a worker of its own "
        "keeps bulk annotation and fine-tuning from waiting for each other) (default: "
        "train,eval)",
    )
    p.add_argument("--name", help="worker node name (default: mslm-PID@HOST)")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no Celery banner, no superuser warning, warnings and errors only (mslm up)",
    )
    p.add_argument(
        "--one-process",
        action="store_true",
        help="with train and other queues: take them all in this process, one task at a "
        "time (by default a second process takes the others, so that an evaluation never "
        "waits behind a training job)",
    )
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


def reaper(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reaper",
        help="watch the store: queue again (or fail) work whose worker died, publish again "
        "work whose broker message was lost, release annotation jobs' next chunks, remove "
        "orphaned uploads (one per deployment)",
    )
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument("--quiet", action="store_true", help="warnings and errors only (mslm up)")
    p.add_argument(
        "--alive-file",
        help="touch this file after every pass (a container health check reads its age)",
    )
    p.set_defaults(handler=run_reaper)


def run_reaper(args: argparse.Namespace) -> int:
    import signal
    import threading
    from pathlib import Path

    from mslm_settings import get_settings
    from store.db import session_factory
    from store.migrate import wait_for_schema

    from .celery_app import celery_for
    from .reaper import run

    settings = get_settings()
    if args.quiet:
        logging.getLogger().setLevel(logging.WARNING)
    wait_for_schema(settings.sqlalchemy_url)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info("reaper: every %.0f s", min(15.0, settings.heartbeat_timeout_seconds / 4))
    factory = session_factory(settings.sqlalchemy_url)
    alive = None
    if args.alive_file:
        alive = Path(args.alive_file)
        alive.parent.mkdir(parents=True, exist_ok=True)
    run(settings, factory, celery_for(settings), stop, once=args.once, alive=alive)
    return 0


def run_worker(args: argparse.Namespace) -> int:
    import os
    import socket

    from mslm_settings import get_settings

    from .celery_app import QUEUES, celery_for

    settings = get_settings()
    app = celery_for(settings)
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    unknown = sorted(set(queues) - set(QUEUES))
    if unknown:
        raise SystemExit(f"unknown queue(s) {unknown}; valid: {', '.join(QUEUES)}")
    name = args.name or f"mslm-{os.getpid()}@{socket.gethostname()}"
    if args.quiet:
        import warnings

        from celery.exceptions import SecurityWarning

        logging.getLogger().setLevel(logging.WARNING)
        # root in a trial (`mslm up`); the images run as a user of their own
        warnings.filterwarnings("ignore", category=SecurityWarning)
        # the encoder's loading bar, which Celery would log line by line
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.alive_file:
        _keep_touching(args.alive_file)
    slot = None
    if "train" in queues and len(queues) > 1 and not args.one_process:
        from .processes import WorkerProcess

        # evaluations (and whatever else it was given) in a process of their own: one task at
        # a time each, so that neither waits behind a training job
        base, _, host = name.partition("@")
        others = ",".join(q for q in queues if q != "train")
        slot = WorkerProcess(
            others, quiet=args.quiet, name=f"{base}-{others.replace(',', '-')}@{host}"
        )
        queues = ["train"]
    from store.db import session_factory
    from store.jobs import sweep_worker_leftovers
    from store.migrate import wait_for_schema

    wait_for_schema(settings.sqlalchemy_url)
    with session_factory(settings.sqlalchemy_url)() as session:
        sweep_worker_leftovers(settings, session, max(600.0, settings.heartbeat_timeout_seconds))
    log.info(
        "worker %s on queues %s (broker %s)",
        name,
        queues,
        "embedded filesystem" if settings.embedded_broker else "configured",
    )
    # one task at a time in this process: training owns the device, and a killed worker
    # takes exactly its own job down (the reaper re-queues it)
    if slot is not None:
        slot.start()
    argv = ["--quiet"] if args.quiet else []
    app.worker_main(
        [
            *argv,
            "worker",
            "-Q",
            ",".join(queues),
            "--pool",
            "solo",
            "-n",
            name,
            "--loglevel",
            "WARNING" if args.quiet else "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
    )
    if slot is not None:
        slot.stop()
    return 0
