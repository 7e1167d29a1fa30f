"""The Celery application, built from the same settings as everything else.

Queues are declared explicitly (``train``, ``eval``, and ``annotate`` for annotation jobs'
plans and chunks, so that bulk annotation and fine-tuning never wait for each other); tasks
acknowledge late and take one message at a time, and every task is safe to run twice (it
claims its row first). With no
``MSLM_BROKER_URL`` the broker is kombu's *filesystem* transport under ``MSLM_HOME/broker``:
no server, several processes on one machine (``mslm up``).

    celery -A worker.celery_app worker -Q train,eval      (or: mslm worker)
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from celery import Celery
from celery.signals import worker_shutting_down
from kombu.entity import Queue

from mslm_settings import Settings, get_settings

log = logging.getLogger(__name__)

TRAIN_QUEUE, EVAL_QUEUE, ANNOTATE_QUEUE = "train", "eval", "annotate"
QUEUES = (TRAIN_QUEUE, EVAL_QUEUE, ANNOTATE_QUEUE)
TRAIN_TASK, EVAL_TASK = "mslm.train", "mslm.evaluate"
PLAN_TASK, CHUNK_TASK = "mslm.annotate_plan", "mslm.annotate_chunk"
# Each task's queue, declared once: the app's routes and every publish read it.
ROUTES = {
    TRAIN_TASK: TRAIN_QUEUE,
    EVAL_TASK: EVAL_QUEUE,
    PLAN_TASK: ANNOTATE_QUEUE,
    CHUNK_TASK: ANNOTATE_QUEUE,
}


# Set when this worker is asked to stop (Celery's warm shutdown: SIGTERM, `mslm up` stopped or
# killed). A running training job then stops at its next step, keeps a checkpoint and goes
# back to the queue for the next worker to resume; else the warm shutdown would wait for it
# to finish (an hour on a CPU), training on in a process nobody runs any more.
STOPPING = threading.Event()


@worker_shutting_down.connect  # type: ignore[untyped-decorator]
def _stopping(**_: Any) -> None:
    STOPPING.set()


def worker_name() -> str:
    """This process as a row's owner: host and pid (the claims and heartbeats of every task)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def broker_config(settings: Settings) -> tuple[str, dict[str, Any]]:
    if settings.broker_url:
        return settings.broker_url, {}
    folder = settings.home / "broker"
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return "filesystem://localhost/", {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),  # else ./control in the working directory
        "store_processed": False,
    }


def make_celery(settings: Settings) -> Celery:
    url, transport_options = broker_config(settings)
    app = Celery("mslm", broker=url, include=["worker.tasks"])
    app.conf.update(
        task_queues=tuple(Queue(q) for q in QUEUES),
        task_default_queue=TRAIN_QUEUE,
        task_create_missing_queues=False,
        task_routes={task: {"queue": queue} for task, queue in ROUTES.items()},
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,  # the job store holds every result
        task_serializer="json",
        accept_content=["json"],
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app


_APPS: dict[tuple[str, str], Celery] = {}


def celery_for(settings: Settings) -> Celery:
    """One app per broker configuration per process."""
    url, options = broker_config(settings)
    key = (url, repr(sorted(options.items())))
    if key not in _APPS:
        _APPS[key] = make_celery(settings)
    return _APPS[key]


def publish(app: Celery, task: str, *key: Any) -> None:
    """Send a task message carrying only the row's key; Celery routes it to the task's queue
    (the app's ``task_routes``, from :data:`ROUTES`)."""
    app.send_task(task, args=list(key))


class CeleryQueue:
    """The store's :class:`~store.queue.TaskQueue` over Celery: a message per new row."""

    def __init__(self, app: Celery):
        self.app = app

    def train(self, job_id: str) -> None:
        publish(self.app, TRAIN_TASK, job_id)

    def evaluate(self, evaluation_id: str) -> None:
        publish(self.app, EVAL_TASK, evaluation_id)

    def annotate(self, job_id: str) -> None:
        publish(self.app, PLAN_TASK, job_id)


def queue_depth(app: Celery, queue: str) -> int | None:
    """Messages waiting in ``queue``, or None when the broker cannot tell."""
    try:
        with app.connection_for_write() as conn:
            return int(conn.default_channel.queue_declare(queue=queue, passive=True).message_count)
    except Exception as exc:
        log.debug("queue depth of %s unavailable: %s", queue, exc)
        return None


def ping_broker(app: Celery, timeout: float = 2.0) -> str | None:
    """None when the broker answers, else the reason."""
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        return f"broker unreachable: {type(exc).__name__}"
    return None


def __getattr__(name: str) -> Any:
    """``celery -A worker.celery_app worker`` finds ``app``: the process's settings' app."""
    if name == "app":
        return celery_for(get_settings())
    raise AttributeError(name)
