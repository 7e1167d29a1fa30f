"""What a task does, as plain functions of a row id (Celery-free, so tests can call them).

A training job: claim the row, train with the core library (resuming from the job's own
checkpoint when an earlier attempt died), evaluate on test when the dataset has one, export
ONNX (and int8 when asked), move the bundle into the model store in one rename, record the
model, finish the row. A heartbeat thread keeps the row alive, carries progress, and turns a
cancel request (or a lost claim) into a stop at the next training step.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from mslm_core.bundle import read_manifest, verify_bundle
from mslm_core.config import TrainConfig
from mslm_core.errors import BundleError, MSLMError
from mslm_core.sources import map_corpus
from mslm_core.train import Callback, Pace, Trainer, TrainingCancelled, TrainingRun
from mslm_core.train.checkpoint import save_checkpoint
from mslm_core.typemap import TypeMap
from mslm_settings import Settings
from store import transitions
from store.db import session_factory
from store.evaluations import claimed_evaluation
from store.jobs import allowed_encoder, claimed_job
from store.keys import is_admin
from store.models import add_model, model_row_from_manifest, set_active_model
from store.paths import dataset_dir, evaluation_dir, model_dir, work_dir
from store.tables import (
    CANCELLED,
    FAILED,
    SUCCEEDED,
    DatasetVersion,
    Evaluation,
    Job,
    JobDataset,
)

from .celery_app import STOPPING, worker_name

log = logging.getLogger(__name__)


class Stopping(Exception):
    """The worker is stopping: the job goes back to the queue, its checkpoint kept."""


class LostClaim(Exception):
    """The row is no longer this worker's (the reaper gave it to another attempt)."""


class Heartbeat:
    """A thread that refreshes the row's heartbeat every ``interval`` seconds with the latest
    progress, and notices cancel requests and lost claims."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        cls: transitions.TaskRow,
        row_id: str,
        worker: str,
        interval: float,
    ):
        self.factory, self.cls, self.row_id, self.worker = factory, cls, row_id, worker
        self.interval = interval
        self.fields: dict[str, Any] = {}
        # read at every beat: what changes between the updates (the time left of a job)
        self.live: Callable[[], dict[str, Any]] | None = None
        self.cancel_requested = False
        self.lost = False
        self._polled = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{row_id}", daemon=True)

    def update(self, **fields: Any) -> None:
        with self._lock:
            self.fields.update(fields)

    def poll_cancel(self, min_interval: float = 1.0) -> bool:
        """Read the cancel flag now (at most every ``min_interval`` seconds), so that a
        running job stops at its next step rather than at its next heartbeat."""
        now = time.monotonic()
        if now - self._polled >= min_interval:
            self._polled = now
            try:
                with self.factory() as session:
                    self.cancel_requested = transitions.cancel_requested(session, self.row_id)
            except Exception as exc:
                log.warning("cancel check of %s failed: %s", self.row_id, type(exc).__name__)
        return self.cancel_requested

    def beat(self) -> None:
        with self._lock:
            fields = dict(self.fields)
        if self.live is not None:
            fields["progress"] = {**fields.get("progress", {}), **self.live()}
        try:
            with self.factory() as session:
                result = transitions.heartbeat(
                    session, self.cls, self.row_id, self.worker, **fields
                )
        except Exception as exc:
            log.warning("heartbeat of %s failed: %s", self.row_id, type(exc).__name__)
            return
        self.cancel_requested = result.cancel_requested
        self.lost = not result.owner

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class JobProgress(Callback):
    """Progress into the heartbeat, and the time left and the pace, which ``pace`` (a callback
    ahead of this one) measures and every beat reads anew (``Heartbeat.live``); cancel and lost
    claims into the trainer's stop flag."""

    def __init__(self, heartbeat: Heartbeat, pace: Pace):
        self.heartbeat = heartbeat
        heartbeat.live = lambda: pace.estimate().to_json()

    def _progress(self, run: TrainingRun) -> dict[str, Any]:
        st = run.state
        last = st.history[-1] if st.history else {}
        return {
            "epoch": min(st.epoch + 1, run.config.total_epochs),
            "epochs": run.config.total_epochs,
            "step": st.global_step,
            "steps": st.total_steps,
            "loss": st.loss,
            "dev_f1": last.get("dev_f1"),
            "best_dev_f1": None if st.best_f1 < 0 else st.best_f1,
        }

    def on_train_begin(self, run: TrainingRun) -> None:
        self.heartbeat.update(progress=self._progress(run))

    def on_step_end(self, run: TrainingRun) -> None:
        self.heartbeat.update(progress=self._progress(run))
        if self.heartbeat.lost:
            run.state.should_stop, run.state.stop_reason = True, "lost_claim"
        elif self.heartbeat.poll_cancel():
            run.state.should_stop, run.state.stop_reason = True, "cancelled"
        elif STOPPING.is_set():
            run.state.should_stop, run.state.stop_reason = True, "worker_stopping"

    def on_epoch_end(self, run: TrainingRun) -> None:
        self.heartbeat.update(progress=self._progress(run), history=list(run.state.history))
        self.heartbeat.beat()  # an epoch's dev F1 shows at once


def _check_in(heartbeat: Heartbeat) -> None:
    """Beat now; raise LostClaim when the row is no longer this worker's, TrainingCancelled
    when a cancel was asked for."""
    heartbeat.beat()
    if heartbeat.lost:
        raise LostClaim()
    if heartbeat.cancel_requested:
        raise TrainingCancelled("cancelled")


def _disk_full(exc: BaseException) -> bool:
    """ENOSPC, also when a library re-raised it as another error (safetensors, torch)."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def _complete(bundle: Path) -> bool:
    try:
        verify_bundle(bundle)
    except BundleError:
        return False
    return True


def train_config(
    settings: Settings, job: Job, datasets: list[tuple[JobDataset, DatasetVersion]]
) -> TrainConfig:
    """The job's TrainConfig: its parameters, the encoder MSLM_BASE_MODELS allows under its
    name, and the files of the versions of its datasets it was made on — one dataset as
    train/dev/test (dev: train when it has none), several (or one with a type map or a
    weight) as ``sources``."""
    params = dict(job.params)
    params["base_model"] = allowed_encoder(
        settings, params.get("base_model") or settings.base_model
    )

    def split_files(dataset: DatasetVersion) -> dict[str, str | None]:
        files, folder = dataset.files, dataset_dir(settings, dataset.dataset_id)
        return {
            "train": str(folder / files["train"]["file"]),
            "dev": str(folder / files.get("dev", files["train"])["file"]),
            "test": str(folder / files["test"]["file"]) if "test" in files else None,
        }

    (first, dataset), *rest = datasets
    if not rest and not first.type_map and first.weight == 1.0:
        corpora: dict[str, Any] = split_files(dataset)
    else:
        corpora = {
            "sources": [
                {
                    "name": d.dataset_id,
                    **split_files(d),
                    "type_map": row.type_map,
                    "weight": row.weight,
                }
                for row, d in datasets
            ]
        }
    return TrainConfig.from_dict({**params, **corpora, "device": settings.device})


def run_training_job(job_id: str, settings: Settings) -> str:
    """Run job ``job_id`` if it can be claimed; returns the state it ended in (or
    ``skipped``)."""
    factory = session_factory(settings.sqlalchemy_url)
    worker = worker_name()
    with factory() as session:
        if not transitions.claim(session, Job, job_id, worker, settings.quota_running_jobs):
            log.info(
                "job %s not claimable (taken, cancelled or finished, or its key runs "
                "MSLM_QUOTA_RUNNING_JOBS jobs already); skipped",
                job_id,
            )
            return "skipped"
        job, datasets = claimed_job(session, job_id)
        export = dict(job.export or {})
        activate = bool(job.activate)
        replaces = job.replaces  # a job whose served model this one's replaces
        owner = job.created_by  # None: the first start's own job, or the CLI's
    work = work_dir(settings, job_id)
    heartbeat = Heartbeat(factory, Job, job_id, worker, settings.heartbeat_seconds)

    def end(state: str, **fields: Any) -> str:
        with factory() as session:
            transitions.finish(session, Job, job_id, worker, state, **fields)
        return state

    try:
        gone = [row.dataset_id or "(deleted)" for row, d in datasets if d is None]
        if gone or not datasets:
            raise MSLMError(f"dataset {', '.join(gone) or job.dataset_id} no longer exists")
        config = train_config(settings, job, [(row, d) for row, d in datasets if d is not None])
        bundle = work / "bundle"
        pace = Pace(export=export.get("onnx", True))
        with heartbeat:
            if not _complete(bundle):
                trainer = Trainer(
                    config,
                    bundle,
                    callbacks=[pace, JobProgress(heartbeat, pace)],
                    work_dir=work / "checkpoint",
                    overwrite=True,
                )
                try:
                    trainer.fit(resume=True)
                except TrainingCancelled:
                    if trainer.state.stop_reason == "lost_claim":
                        raise LostClaim() from None
                    if trainer.state.stop_reason == "worker_stopping":
                        save_checkpoint(trainer.resumable())
                        heartbeat.beat()  # the step it stopped at, in the row
                        raise Stopping(trainer.state.global_step) from None
                    raise
            warnings = list(read_manifest(bundle).get("warnings") or [])
            if warnings and config.below_floor == "fail":  # before an export it would not use
                raise MSLMError(
                    "the model is below the job's floor: " + "; ".join(warnings) + " (below_floor "
                    "fail: no model is kept; below_floor warn keeps it, served only by force)"
                )
            if export.get("onnx", True):
                from mslm_core.export import export_bundle

                pace.phase("exporting")

                # scratch in the job's folder: a worker killed mid-export leaves it there,
                # where the next attempt (or the sweep at worker start) finds it
                scratch = work / "export"
                shutil.rmtree(scratch, ignore_errors=True)
                export_bundle(bundle, quantize=export.get("quantize"), scratch=scratch)
            _check_in(heartbeat)  # a cancel asked for during the export is honoured
            manifest = read_manifest(bundle)
            model_id = manifest["id"]
            target = model_dir(settings, model_id)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(bundle, target)  # one rename: a half-written bundle is never listed
        with factory() as session:
            name = str(job.params.get("base_model") or settings.base_model)
            row = model_row_from_manifest(settings, manifest, target, job_id, name, job.created_by)
            row.warnings = warnings
            add_model(session, row)
            # the model row and the job's success in one transaction, unless a cancel came
            # in after the last check: then neither
            succeeded = transitions.finish(
                session,
                Job,
                job_id,
                worker,
                SUCCEEDED,
                unless_cancelled=True,
                model_id=model_id,
                metrics=manifest.get("metrics", {}),
                history=manifest.get("history", []),
                progress={
                    **heartbeat.fields.get("progress", {}),
                    **pace.estimate().to_json(),
                    "phase": "done",
                    "eta_s": 0.0,
                    "done": True,
                },
                warnings=warnings,
            )
            if succeeded and warnings:  # served only when an admin forces it
                log.warning(
                    "model %s is stored but not served: it is below its job's floor (%s); an "
                    "admin serves it with POST /v1/models/%s/activate?force=true",
                    model_id,
                    "; ".join(warnings),
                    model_id,
                )
            elif succeeded and activate:  # the job asked for it (a Label Studio project's)
                set_active_model(session, model_id)
                log.info("job %s asked to serve its model: %s is now active", job_id, model_id)
            elif succeeded and not (owner is None or is_admin(session, owner)):
                log.info(
                    "model %s is stored; its job's key is not an admin's, so it is served "
                    "only when an admin activates it",
                    model_id,
                )
            elif succeeded and transitions.activate_if_none(session, model_id, replaces):
                # a fresh install's first model (its own, or an admin key's): nothing was
                # served, or what was is the model of the job this one replaces
                log.info("model %s is now served (it replaces %s)", model_id, replaces or "none")
        if not succeeded:
            shutil.rmtree(target, ignore_errors=True)
            _check_in(heartbeat)
            raise LostClaim()  # neither cancelled nor ours: another attempt owns the row
        shutil.rmtree(work, ignore_errors=True)
        return SUCCEEDED
    except LostClaim:
        log.warning("job %s was taken from this worker (no heartbeat in time); stopping", job_id)
        return "lost"
    except Stopping as stopped:
        with factory() as session:
            released = transitions.release(session, Job, job_id, worker)
        log.warning(
            "worker stopping: job %s %s at step %d; the next worker resumes it",
            job_id,
            "goes back to the queue" if released else "was no longer this worker's",
            stopped.args[0],
        )
        return "released"
    except TrainingCancelled:
        shutil.rmtree(work, ignore_errors=True)
        return end(CANCELLED, error=None)
    except MSLMError as exc:
        shutil.rmtree(work, ignore_errors=True)
        return end(FAILED, error=str(exc))
    except Exception as exc:
        shutil.rmtree(work, ignore_errors=True)
        if _disk_full(exc):
            log.error("job %s failed: the artifact store is full", job_id)
            return end(
                FAILED,
                error="the artifact store is full (no space left on device); "
                "free space on MSLM_ARTIFACTS_DIR and submit the job again",
            )
        log.exception("job %s failed", job_id)
        return end(FAILED, error=f"internal error ({type(exc).__name__}); see the worker log")


def run_evaluation(evaluation_id: str, settings: Settings) -> str:
    """Score a model on a dataset split (honest: the engine on unmasked text)."""
    from mslm_core.calibration import CALIBRATION_PNG
    from mslm_core.corpus import read_corpus
    from mslm_core.evaluate import evaluate_bundle

    factory = session_factory(settings.sqlalchemy_url)
    worker = worker_name()
    with factory() as session:
        if not transitions.claim(session, Evaluation, evaluation_id, worker):
            return "skipped"
        ev, model, dataset = claimed_evaluation(session, evaluation_id)
    heartbeat = Heartbeat(factory, Evaluation, evaluation_id, worker, settings.heartbeat_seconds)

    def end(state: str, **fields: Any) -> str:
        with factory() as session:
            transitions.finish(session, Evaluation, evaluation_id, worker, state, **fields)
        return state

    try:
        if model is None or dataset is None:
            raise MSLMError("the model or the dataset of this evaluation no longer exists")
        if ev.split not in dataset.files:
            raise MSLMError(f"dataset {dataset.id} has no {ev.split} split")
        with heartbeat:
            folder = dataset_dir(settings, dataset.id)
            corpus = read_corpus(folder / dataset.files[ev.split]["file"])
            if ev.type_map:  # judged on the types the dataset annotates, as the model names them
                corpus = map_corpus(corpus, TypeMap.parse(ev.type_map))
            out_dir = evaluation_dir(settings, evaluation_id)
            out_dir.mkdir(parents=True, exist_ok=True)
            metrics = evaluate_bundle(
                settings.artifacts / model.path,
                corpus,
                device=settings.device,
                precision=settings.precision,
                diagram=out_dir / CALIBRATION_PNG,
                label=f"{dataset.name} {ev.split}",
            )
        return end(SUCCEEDED, metrics=metrics)
    except MSLMError as exc:
        return end(FAILED, error=str(exc))
    except Exception as exc:
        log.exception("evaluation %s failed", evaluation_id)
        return end(FAILED, error=f"internal error ({type(exc).__name__}); see the worker log")
