"""The queue the store announces new work on (jobs, evaluations, annotation jobs)."""

from __future__ import annotations

from typing import Protocol


class TaskQueue(Protocol):
    """Where new work is announced (a message carrying only the row id; the row is the
    truth): ``worker.celery_app.CeleryQueue`` in the service."""

    def train(self, job_id: str) -> None: ...
    def evaluate(self, evaluation_id: str) -> None: ...
    def annotate(self, annotation_job_id: str) -> None: ...
