"""``mslm worker``'s processes: a worker that takes fine-tuning and evaluations runs the
evaluations in a process of its own (an evaluation never waits behind a training job), and
``--quiet`` (``mslm up``) starts Celery without its banner."""

from __future__ import annotations

import argparse
import logging
import warnings
from contextlib import contextmanager

import pytest

import store.jobs
import store.migrate
from worker import cli, processes


class FakeApp:
    def __init__(self) -> None:
        self.argv: list[str] = []

    def worker_main(self, argv: list[str]) -> None:
        self.argv = argv


@pytest.fixture()
def started(monkeypatch):
    app = FakeApp()
    spawned: list[processes.WorkerProcess] = []
    monkeypatch.setattr("worker.celery_app.celery_for", lambda settings: app)
    monkeypatch.setattr(store.migrate, "wait_for_schema", lambda url: None)
    monkeypatch.setattr(store.jobs, "sweep_worker_leftovers", lambda *a: None)

    @contextmanager
    def no_session():
        yield None

    monkeypatch.setattr("store.db.session_factory", lambda url: no_session)
    monkeypatch.setattr(processes.WorkerProcess, "start", lambda self: spawned.append(self))
    monkeypatch.setattr(processes.WorkerProcess, "stop", lambda self: None)

    def run(*flags: str) -> tuple[list[str], list[processes.WorkerProcess]]:
        parser = argparse.ArgumentParser()
        cli.worker(parser.add_subparsers())
        args = parser.parse_args(["worker", *flags])
        assert cli.run_worker(args) == 0
        return app.argv, spawned

    root = logging.getLogger()
    level = root.level
    with warnings.catch_warnings():  # --quiet's filter stays in this test
        yield run
    root.setLevel(level)  # --quiet lowers the process's logging to warnings


def queues_of(argv: list[str]) -> str:
    return argv[argv.index("-Q") + 1]


def test_evaluations_get_a_process_of_their_own(started):
    argv, spawned = started("--queues", "train,eval", "--name", "w1@host")
    assert queues_of(argv) == "train"
    (slot,) = spawned
    assert slot.queues == "eval" and slot.name == "w1-eval@host" and not slot.quiet
    assert "--quiet" not in argv and argv[argv.index("--loglevel") + 1] == "INFO"


def test_one_process_and_single_queues_spawn_nothing(started):
    argv, spawned = started("--queues", "train,eval", "--one-process")
    assert queues_of(argv) == "train,eval" and spawned == []
    argv, spawned = started("--queues", "annotate")
    assert queues_of(argv) == "annotate" and spawned == []


def test_quiet_starts_celery_without_its_banner(started):
    argv, spawned = started("--queues", "train,eval", "--quiet")
    assert argv[0] == "--quiet" and argv[1] == "worker"  # celery's own flag: no banner
    assert argv[argv.index("--loglevel") + 1] == "WARNING"
    assert spawned[0].quiet  # the evaluation process is quiet too


def test_every_task_is_routed_and_published_to_its_one_declared_queue(tmp_path):
    """Queue routing is declared once (celery_app.ROUTES): the app's routes and the tasks the
    workers register read it, and a message sent with publish() lands in its task's queue."""
    import worker.tasks  # noqa: F401  (registers the tasks)
    from mslm_settings import Settings
    from worker.celery_app import QUEUES, ROUTES, make_celery, publish

    app = make_celery(Settings(home=tmp_path, broker_url=""))  # the embedded broker in tmp
    ours = {name for name in app.tasks if name.startswith("mslm.")}
    assert ours == set(ROUTES) and set(ROUTES.values()) == set(QUEUES)
    for task in ROUTES:
        publish(app, task, "job", 3)
    with app.connection_for_write() as conn:
        waiting = {
            queue: conn.default_channel.queue_declare(queue=queue, passive=True).message_count
            for queue in QUEUES
        }
    routed = [ROUTES[task] for task in ROUTES]
    assert waiting == {queue: routed.count(queue) for queue in QUEUES}
