"""Celery tasks: thin adapters from a message (a row id) to :mod:`worker.runner`. Safe to run
twice: the runner claims the row first and does nothing when it cannot."""

from __future__ import annotations

from celery import shared_task

from mslm_settings import get_settings

from .celery_app import EVAL_TASK, TRAIN_TASK
from .runner import run_evaluation, run_training_job


@shared_task(name=TRAIN_TASK, acks_late=True, reject_on_worker_lost=True)
def train(job_id: str) -> str:
    return run_training_job(job_id, get_settings())


@shared_task(name=EVAL_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate(evaluation_id: str) -> str:
    return run_evaluation(evaluation_id, get_settings())
