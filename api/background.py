"""Loops every API replica runs: follow the active model, and watch the store for jobs whose
worker died (re-queue or fail them), whose broker message went missing (re-publish), and for
what an upload or an import killed mid-way left in the artifact store (remove it)."""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy import func, select

from store import transitions
from store.models import Evaluation, Job
from store.paths import sweep_orphans
from worker.celery_app import EVAL_QUEUE, EVAL_TASK, TRAIN_QUEUE, TRAIN_TASK, publish, queue_depth

from .deps import AppState

log = logging.getLogger(__name__)

#: How often the reaper looks for orphaned uploads and stagings, besides at start: an API
#: killed mid-upload leaves its spooled copy, and a replica may run for months.
ORPHAN_SWEEP_EVERY_S = 600.0


async def follow_active_model(state: AppState) -> None:
    while True:
        try:
            await state.models.refresh()
        except Exception as exc:
            log.warning("model refresh failed: %s", type(exc).__name__)
        await asyncio.sleep(state.settings.model_poll_seconds)


def sweep(state: AppState) -> dict[str, list[str]]:
    """One pass of the reaper (synchronous; also called by tests)."""
    s = state.settings
    out: dict[str, list[str]] = {"requeued": [], "failed": [], "republished": []}
    for cls, task, queue in ((Job, TRAIN_TASK, TRAIN_QUEUE), (Evaluation, EVAL_TASK, EVAL_QUEUE)):
        with state.factory() as session:
            reaped = transitions.reap(session, cls, s.heartbeat_timeout_seconds, s.max_attempts)
            for row_id in reaped.requeued:
                publish(state.celery, task, row_id)
            for row_id in reaped.failed:
                log.error("%s %s failed: its worker was lost too often", cls.__tablename__, row_id)
            out["requeued"] += reaped.requeued
            out["failed"] += reaped.failed
            waiting = transitions.unclaimed(session, cls, s.requeue_after_seconds)
            if waiting and not queue_depth(state.celery, queue):
                # queued long ago and nothing in the broker: the message was lost (a broker
                # restart without persistence); a duplicate would be harmless
                for row_id in waiting:
                    publish(state.celery, task, row_id)
                transitions.mark_published(session, cls, waiting)
                out["republished"] += waiting
    for key in ("requeued", "republished"):
        if out[key]:
            log.warning("%s: %s", key, ", ".join(out[key]))
    return out


async def reaper(state: AppState) -> None:
    interval = min(15.0, state.settings.heartbeat_timeout_seconds / 4)
    swept_at = time.monotonic()  # the start swept once already
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(sweep, state)
            if time.monotonic() - swept_at >= ORPHAN_SWEEP_EVERY_S:
                swept_at = time.monotonic()
                await asyncio.to_thread(sweep_orphans, state.settings)
        except Exception as exc:
            log.warning("reaper pass failed: %s", type(exc).__name__)


def counts(state: AppState) -> dict[str, dict[str, int]]:
    with state.factory() as session:
        return {
            name: dict(session.execute(select(cls.state, func.count()).group_by(cls.state)).all())
            for name, cls in (("jobs", Job), ("evaluations", Evaluation))
        }
