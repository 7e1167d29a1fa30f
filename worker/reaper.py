"""The reaper (``mslm reaper``): one process that watches the store for work whose worker died
(queued again and published, or failed after MSLM_MAX_ATTEMPTS), for queued work whose
broker message went missing (published again), for the next chunks of annotation jobs, and
for what a killed upload or import left in the artifact store (removed).

Every change it makes is a conditional ``UPDATE`` (``store.leases``), so a second reaper is
harmless; one per deployment is enough (the compose file's ``reaper``, ``mslm up``'s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery
from sqlalchemy.orm import Session

from mslm_settings import Settings
from store import bulk, leases
from store.leases import CHUNK, EVALUATION, PLANNING, TRAINING, Lease
from store.paths import sweep_orphans

from .celery_app import CHUNK_TASK, EVAL_TASK, PLAN_TASK, ROUTES, TRAIN_TASK, publish, queue_depth

log = logging.getLogger("mslm.reaper")

#: Each kind of leased work and the task that does it (a message carries the row's key).
SWEPT: tuple[tuple[Lease, str], ...] = (
    (TRAINING, TRAIN_TASK),
    (EVALUATION, EVAL_TASK),
    (PLANNING, PLAN_TASK),
    (CHUNK, CHUNK_TASK),
)
#: How often the artifact store is swept for orphaned uploads and stagings.
ORPHAN_SWEEP_EVERY_S = 600.0


def _args(key: Any) -> tuple[Any, ...]:
    return key if isinstance(key, tuple) else (key,)


def _name(key: Any) -> str:
    return "#".join(str(part) for part in _args(key))


def sweep(settings: Settings, session: Session, app: Celery) -> dict[str, list[str]]:
    """One pass: reap, re-publish what waited too long with its queue empty, release the next
    chunks of running annotation jobs. Returns the names of the rows it moved."""
    out: dict[str, list[str]] = {"requeued": [], "failed": [], "republished": []}
    waiting: list[list[Any]] = []
    for lease, task in SWEPT:
        reaped = leases.reap(
            session, lease, settings.heartbeat_timeout_seconds, settings.max_attempts
        )
        for key in reaped.requeued:
            publish(app, task, *_args(key))
        for key in reaped.failed:
            log.error("%s %s failed: its %s was lost too often", task, _name(key), lease.holder)
            if lease is CHUNK:
                bulk.complete_if_done(session, key[0])
        out["requeued"] += [_name(k) for k in reaped.requeued]
        out["failed"] += [_name(k) for k in reaped.failed]
        waiting.append(leases.unpublished(session, lease, settings.requeue_after_seconds))
    # queued long ago and nothing in the broker: the message was lost (a broker restart
    # without persistence); a duplicate would be harmless. Each queue is asked before any
    # message is sent again, so that the plans re-published do not hide the chunks.
    quiet = {
        queue: not queue_depth(app, queue)
        for queue in {ROUTES[task] for (_, task), keys in zip(SWEPT, waiting, strict=True) if keys}
    }
    for (lease, task), keys in zip(SWEPT, waiting, strict=True):
        if keys and quiet[ROUTES[task]]:
            for key in keys:
                publish(app, task, *_args(key))
            leases.mark_published(session, lease, keys)
            out["republished"] += [_name(k) for k in keys]
    # a worker that died between a chunk's end and the release of the next ones
    for job_id, seq in bulk.release(session):
        publish(app, CHUNK_TASK, job_id, seq)
        out["republished"].append(f"{job_id}#{seq}")
    for key in ("requeued", "republished"):
        if out[key]:
            log.warning("%s: %s", key, ", ".join(out[key]))
    return out


def run(
    settings: Settings,
    factory: Callable[[], Session],
    app: Celery,
    stop: threading.Event,
    once: bool = False,
    alive: Path | None = None,
) -> None:
    """Sweep every quarter of the heartbeat timeout (at most 15 s) until ``stop``, and the
    artifact store every :data:`ORPHAN_SWEEP_EVERY_S`; a pass that fails is logged and the
    next one tries again. ``alive`` is touched after each pass (a container health check reads
    its age)."""
    interval = min(15.0, settings.heartbeat_timeout_seconds / 4)
    swept_at = -ORPHAN_SWEEP_EVERY_S
    while True:
        try:
            with factory() as session:
                sweep(settings, session, app)
            if time.monotonic() - swept_at >= ORPHAN_SWEEP_EVERY_S:
                swept_at = time.monotonic()
                sweep_orphans(settings)
        except Exception as exc:
            log.warning("reaper pass failed: %s", type(exc).__name__)
        if alive is not None:
            alive.touch()
        if once or stop.wait(interval):
            return
