"""Celery tasks: thin adapters from a message (a row id) to :mod:`worker.runner` and
:mod:`worker.bulk`. Safe to run twice: the runner claims the row first and does nothing when
it cannot. The runners are imported when a task runs, so that a worker consuming only the
``annotate`` queue needs no PyTorch (the API's image runs it)."""

from __future__ import annotations

from celery import shared_task

from mslm_settings import get_settings

from .celery_app import CHUNK_TASK, EVAL_TASK, PLAN_TASK, TRAIN_TASK


@shared_task(name=TRAIN_TASK, acks_late=True, reject_on_worker_lost=True)
def train(job_id: str) -> str:
    from .runner import run_training_job

    return run_training_job(job_id, get_settings())


@shared_task(name=EVAL_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate(evaluation_id: str) -> str:
    from .runner import run_evaluation

    return run_evaluation(evaluation_id, get_settings())


@shared_task(name=PLAN_TASK, acks_late=True, reject_on_worker_lost=True)
def annotate_plan(job_id: str) -> str:
    from .bulk import run_plan
    from .celery_app import CHUNK_TASK, celery_for, publish

    settings = get_settings()
    app = celery_for(settings)
    return run_plan(job_id, settings, lambda j, s: publish(app, CHUNK_TASK, j, s))


@shared_task(name=CHUNK_TASK, acks_late=True, reject_on_worker_lost=True)
def annotate_chunk(job_id: str, seq: int) -> str:
    from .bulk import ChunkRetry, run_chunk
    from .celery_app import CHUNK_TASK, celery_for, publish

    settings = get_settings()
    app = celery_for(settings)
    try:
        return run_chunk(job_id, seq, settings, lambda j, s: publish(app, CHUNK_TASK, j, s))
    except ChunkRetry:
        # the chunk stays running with a stale heartbeat: the reaper queues it again after
        # MSLM_HEARTBEAT_TIMEOUT_SECONDS (and fails it after MSLM_MAX_ATTEMPTS)
        return "retry"
