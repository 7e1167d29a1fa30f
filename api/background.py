"""Loops every API replica runs: follow the active model, and watch the store for jobs whose
worker died (re-queue or fail them), whose broker message went missing (re-publish), and for
what an upload or an import killed mid-way left in the artifact store (remove it)."""

from __future__ import annotations

import asyncio
import logging
import time

from store import bulk, transitions
from store.paths import sweep_orphans
from store.tables import AnnotationJob, Evaluation, Job
from worker.celery_app import (
    ANNOTATE_QUEUE,
    EVAL_QUEUE,
    EVAL_TASK,
    TRAIN_QUEUE,
    TRAIN_TASK,
    publish,
    publish_chunk,
    publish_plan,
    queue_depth,
)

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
    _sweep_annotation_jobs(state, out)
    for key in ("requeued", "republished"):
        if out[key]:
            log.warning("%s: %s", key, ", ".join(out[key]))
    return out


def _sweep_annotation_jobs(state: AppState, out: dict[str, list[str]]) -> None:
    """Annotation jobs: chunks (and planners) whose worker died are queued again and
    published; queued ones whose message went missing are published again; a running job
    with fewer chunks in flight than its window gets its next ones."""
    s = state.settings
    with state.factory() as session:
        reaped = bulk.reap(session, s.heartbeat_timeout_seconds, s.max_attempts)
        for job_id in reaped.plans:
            publish_plan(state.celery, job_id)
        for job_id, seq in reaped.chunks:
            publish_chunk(state.celery, job_id, seq)
        out["requeued"] += reaped.plans + [f"{j}#{n}" for j, n in reaped.chunks]
        out["failed"] += reaped.failed
        jobs, chunks = bulk.unpublished(session, s.requeue_after_seconds)
        if (jobs or chunks) and not queue_depth(state.celery, ANNOTATE_QUEUE):
            for job_id in jobs:
                publish_plan(state.celery, job_id)
            for job_id, seq in chunks:
                publish_chunk(state.celery, job_id, seq)
            bulk.mark_published(session, jobs, chunks)
            out["republished"] += jobs + [f"{j}#{n}" for j, n in chunks]
        # a worker that died between a chunk's end and the release of the next ones: their
        # job's next chunks are released here
        for job_id, seq in bulk.release(session):
            publish_chunk(state.celery, job_id, seq)
            out["republished"].append(f"{job_id}#{seq}")


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


#: What the store counts by state for /metrics: ``mslm_<name>{state}``.
COUNTED = (("jobs", Job), ("evaluations", Evaluation), ("annotation_jobs", AnnotationJob))


def counts(state: AppState) -> dict[str, dict[str, int]]:
    with state.factory() as session:
        return {name: transitions.count_by_state(session, cls) for name, cls in COUNTED}
