"""The first start: on a fresh install (no dataset, no model) upload the corpora of a first
model and queue its job, then show its progress until it is served.

By default (``MSLM_BOOTSTRAP=auto``) the first model is the clinical one (Problem, Drug,
Dosage, Test, Result, Procedure, Anatomy; docs/clinical-schema.md): its four corpora come
from the corpus cache (``MSLM_CORPUS_CACHE``), fetched at their pinned commits when GitHub is
reachable. When neither is possible the first start falls back on ``MSLM_BOOTSTRAP_DATA``
(``scripts/run.sh``: BC5CDR, chemicals and diseases) and says why and how to get the clinical
corpora onto a machine without internet.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mslm_core.timeleft import left_text

if TYPE_CHECKING:
    from mslm_settings import Settings

log = logging.getLogger("mslm.bootstrap")

# The first start's clinical model on 2 CPU cores, from `mslm up` until it is served, rounded up:
# benchmarks/first_start.py's measurement (benchmarks/results/clinical/first-start.json,
# `minutes_to_served`; tests/test_docs.py holds this, the README and the file equal). Shown
# before training starts; the progress bar then estimates from its own pace.
FIRST_START_MINUTES_2CPU = 29
# The slowest of the 2-core machines it was measured on (benchmarks/results/clinical/
# first-start*.json, rounded up; tests/test_docs.py holds it to them): 2-core machines differ
# by half as much again, so the log gives both.
FIRST_START_MINUTES_2CPU_SLOWEST = 43
# The early model's (clinical.EARLY_SETTINGS), measured alike (`minutes_to_early`).
EARLY_MINUTES_2CPU = 2
CARRY_OVER = (
    "on a machine with internet: `mslm corpora fetch clinical --archive clinical-corpora.tar`;"
    " here: `mslm corpora unpack clinical-corpora.tar` (compose: docker compose run --rm -v "
    "$PWD/clinical-corpora.tar:/import.tar:ro bootstrap mslm corpora unpack /import.tar)"
)


def fresh_install(settings: Settings) -> bool:
    from store.datasets import any_dataset
    from store.db import session_factory
    from store.models import any_model

    with session_factory(settings.sqlalchemy_url)() as session:
        return not (any_dataset(session) or any_model(session))


def _upload(settings: Settings, session: Any, folder: Path, name: str) -> Any:
    from mslm_core.corpus import split_paths
    from store.datasets import Upload, create_dataset

    uploads = [Upload(split, path.name, path) for split, path in split_paths(folder).items()]
    return create_dataset(settings, session, uploads, name)


def _clinical_folders(settings: Settings, fetch_timeout: float) -> dict[str, Path]:
    """The recipe's dataset folders, from the cache or fetched (ConfigError when neither)."""
    from mslm_core.corpora import clinical

    return {
        corpus: clinical.prepare(corpus, settings.corpus_cache, timeout=fetch_timeout)
        for corpus in clinical.CORPORA
    }


def bootstrap(
    settings: Settings,
    mode: str | None = None,
    data_dir: str | Path | None = None,
    epochs: int | None = None,
    fetch_timeout: float = 20.0,
) -> list[str] | None:
    """Queue the first model's job on a fresh install — the clinical one's early job first,
    unless MSLM_BOOTSTRAP_EARLY is off — and return their ids in the order they run, or None
    when there is nothing to do (not a fresh install, ``none``, or no corpus at all — said in
    the log).
    ``mode``/``data_dir`` default to MSLM_BOOTSTRAP / MSLM_BOOTSTRAP_DATA."""
    from mslm_core.clinical_types import CLINICAL_TYPES
    from mslm_core.corpora import clinical
    from mslm_core.errors import ConfigError
    from store.datasets import delete_dataset
    from store.db import session_factory
    from store.jobs import JobSource, create_job
    from worker.celery_app import CeleryQueue, celery_for

    mode = mode or settings.bootstrap
    data_dir = data_dir or settings.bootstrap_data
    if mode == "none" or not fresh_install(settings):
        return None
    params: dict[str, Any] = {} if epochs is None else {"epochs": epochs}
    export = {"onnx": True, "quantize": "int8"}
    queue = CeleryQueue(celery_for(settings))
    why = ""
    if mode in ("auto", "clinical"):
        try:
            folders = _clinical_folders(settings, fetch_timeout)
        except (ConfigError, OSError) as exc:
            if mode == "clinical":
                raise ConfigError(
                    f"first start: the clinical corpora are not in the corpus cache and could "
                    f"not be fetched ({exc}); {CARRY_OVER}"
                ) from exc
            why = str(exc)
        else:
            with session_factory(settings.sqlalchemy_url)() as session:
                uploaded = []
                try:
                    for corpus, folder in folders.items():
                        uploaded.append(_upload(settings, session, folder, f"clinical: {corpus}"))
                    sources = [  # a type the dataset lacks cannot matter: the API refuses it
                        JobSource(
                            d.id, {k: v for k, v in s.type_map.items() if k in d.types}, s.weight
                        )
                        for d, s in zip(uploaded, clinical.RECIPE, strict=True)
                    ]
                    early = None
                    if settings.bootstrap_early:  # queued first: the worker takes it first
                        early, _ = create_job(
                            settings,
                            session,
                            queue,
                            sources,
                            {**clinical.SETTINGS, **clinical.EARLY_SETTINGS},
                            export,
                            idempotency_key="bootstrap-clinical-early",
                        )
                    job, _ = create_job(
                        settings,
                        session,
                        queue,
                        sources,
                        {**clinical.SETTINGS, **params},
                        export,
                        idempotency_key="bootstrap-clinical",
                        replaces=None if early is None else early.id,
                    )
                except BaseException:
                    for d in uploaded:  # nothing half-made: the next start tries again
                        delete_dataset(settings, session, d.id)
                    raise
            if early is not None:
                log.info(
                    "first start: an early clinical model (%s; one short epoch on a subset, "
                    "job %s) is served in about %d minutes on 2 CPU cores, then replaced by the "
                    "full one (job %s) — about %d to %d minutes",
                    ", ".join(CLINICAL_TYPES),
                    early.id,
                    EARLY_MINUTES_2CPU,
                    job.id,
                    FIRST_START_MINUTES_2CPU,
                    FIRST_START_MINUTES_2CPU_SLOWEST,
                )
                return [str(early.id), str(job.id)]
            log.info(
                "first start: the clinical model (%s) is being trained from %s (job %s); it is "
                "served as soon as it is ready — about %d to %d minutes on 2 CPU cores",
                ", ".join(CLINICAL_TYPES),
                ", ".join(clinical.CORPORA),
                job.id,
                FIRST_START_MINUTES_2CPU,
                FIRST_START_MINUTES_2CPU_SLOWEST,
            )
            return [str(job.id)]
    if mode == "auto" and not data_dir:
        log.warning(
            "first start: no first model — the clinical corpora are not in the corpus cache "
            "(%s) and could not be fetched (%s); %s",
            settings.corpus_cache or "~/.cache/mslm/corpora",
            why,
            CARRY_OVER,
        )
        return None
    if not data_dir:
        raise ConfigError("first start: MSLM_BOOTSTRAP=data needs MSLM_BOOTSTRAP_DATA (a folder)")
    if mode == "auto":
        log.warning(
            "first start: falling back to %s — the clinical corpora are not in the corpus cache "
            "(%s) and could not be fetched (%s). This model knows only that corpus's types. "
            "For the clinical model: %s; then start a job on them (docs/clinical-schema.md)",
            Path(data_dir).name,
            settings.corpus_cache or "~/.cache/mslm/corpora",
            why,
            CARRY_OVER,
        )
    with session_factory(settings.sqlalchemy_url)() as session:
        dataset = _upload(settings, session, Path(data_dir), Path(data_dir).name)
        job, _ = create_job(
            settings,
            session,
            queue,
            dataset.id,
            params,
            export,
            idempotency_key=f"bootstrap-{dataset.id}",
        )
    log.info(
        "first start: dataset %s uploaded, job %s queued (its model is served when ready)",
        dataset.id,
        job.id,
    )
    return [str(job.id)]


class FirstStartProgress:
    """Follows the first start's jobs in the store, one after the other (the early model's,
    then the full one's), and shows each: a progress bar with the job's own estimate of the
    time left on a terminal, a log line every 5 % otherwise; says what is served when each
    ends."""

    def __init__(self, settings: Settings, job_ids: list[str], interval: float = 2.0):
        self.settings, self.job_ids, self.interval = settings, list(job_ids), interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="first-start", daemon=True)
        self.started = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _job(self, job_id: str) -> Any:
        from store.db import session_factory
        from store.jobs import find_job

        with session_factory(self.settings.sqlalchemy_url)() as session:
            return find_job(session, job_id)  # detached when the session closes

    def _label(self, index: int) -> str:
        if len(self.job_ids) == 1:
            return "first model"
        return "early model" if index == 0 else "full model"

    def _run(self) -> None:
        for index, job_id in enumerate(self.job_ids):
            if not self._follow(job_id, self._label(index), index + 1 < len(self.job_ids)):
                return

    def _follow(self, job_id: str, label: str, more: bool) -> bool:
        """Show job ``job_id`` until it ends; False when the thread is stopped or the job is
        gone."""
        interactive = sys.stderr.isatty()
        bar: Any = None
        shown = -1
        while not self._stop.wait(self.interval):
            try:
                job = self._job(job_id)
            except Exception as exc:  # the store restarting: try again
                log.debug("first start: progress not read (%s)", type(exc).__name__)
                continue
            if job is None:
                return False
            progress = job.progress or {}
            steps, step = progress.get("steps"), progress.get("step", 0)
            eta = progress.get("eta_s")
            if steps and interactive:
                if bar is None:
                    from tqdm import tqdm

                    bar = tqdm(total=steps, unit="step", desc=label, file=sys.stderr)
                bar.update(step - bar.n)
                bar.set_postfix_str(
                    f"{progress.get('phase', '')}" + ("" if eta is None else f", {left_text(eta)}")
                )
            elif steps and step * 20 // steps > shown:
                shown = step * 20 // steps
                log.info(
                    "%s: step %d/%d (%d %%)%s",
                    label,
                    step,
                    steps,
                    100 * step // steps,
                    "" if eta is None else f", {left_text(eta)}",
                )
            if job.state in ("succeeded", "failed", "cancelled"):
                if bar is not None:
                    bar.close()
                minutes = (time.monotonic() - self.started) / 60
                if job.state == "succeeded" and job.warnings:
                    log.warning(
                        "%s: %s is below its floor and is not served (%s)",
                        label,
                        job.model_id,
                        "; ".join(job.warnings),
                    )
                elif job.state == "succeeded":
                    log.info(
                        "%s ready %.0f min after the start: %s is served%s",
                        label,
                        minutes,
                        job.model_id,
                        "; the full model replaces it when it is ready" if more else "",
                    )
                else:
                    log.error("%s: job %s %s: %s", label, job.id, job.state, job.error)
                return True
        return False


def run_bootstrap_command(args: Any) -> int:
    """``mslm bootstrap``: the compose stack's first start (a one-shot service)."""
    from mslm_settings import get_settings

    bootstrap(get_settings(), args.bootstrap, args.bootstrap_data, args.bootstrap_epochs)
    return 0
