"""Processes a command supervises: ``mslm up``'s workers and reaper, and the evaluation slot of
a ``mslm worker`` that takes both fine-tuning and evaluations (so that an evaluation never
waits behind a training job)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

log = logging.getLogger("mslm.worker")


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when ``mslm up`` goes away, however it goes (uvicorn
    re-raises the signal it stopped on, so no ``finally`` of ours would run)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervised:
    """A ``mslm`` child (``argv``: its command and flags), restarted if it dies, stopped with
    its parent."""

    def __init__(self, argv: list[str], label: str) -> None:
        self.argv, self.label = argv, label
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._supervise, daemon=True, name=f"{label}-sup")

    def _spawn(self) -> None:
        cmd = [sys.executable, "-m", "mslm_core.cli", *self.argv]
        self.proc = subprocess.Popen(cmd, env=os.environ.copy(), preexec_fn=_die_with_parent)
        log.info("%s started (pid %d)", self.label, self.proc.pid)

    def _supervise(self) -> None:
        backoff = 1.0
        while not self.stopping:
            assert self.proc is not None
            code = self.proc.wait()
            if self.stopping or code == 0:  # 0: it was asked to stop (a signal to the group)
                return
            log.error("%s exited with %s; restarting in %.0f s", self.label, code, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 60.0)
            self._spawn()

    def start(self) -> None:
        self._spawn()
        self.thread.start()

    def stop(self) -> None:
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class WorkerProcess(Supervised):
    """A ``mslm worker`` child for ``queues``. ``quiet``: no Celery banner, warnings and errors
    only (``mslm up``'s console)."""

    def __init__(self, queues: str, quiet: bool = False, name: str | None = None) -> None:
        argv = ["worker", "--queues", queues, *(["--quiet"] if quiet else [])]
        super().__init__(argv + (["--name", name] if name else []), f"worker for {queues}")
        self.queues, self.quiet, self.name = queues, quiet, name


def reaper_process() -> Supervised:
    """``mslm up``'s reaper (``worker.reaper``)."""
    return Supervised(["reaper", "--quiet"], "reaper")
