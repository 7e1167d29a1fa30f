"""Fine-tuning jobs: their parameters checked against the deployment's allow-lists, created
(idempotently) and announced on the queue, listed, looked up and cancelled for the keys that
own them; and what killed workers leave behind. Their state changes are
``store.transitions``."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mslm_core.config import JOB_OPTIONS, TrainConfig
from mslm_core.errors import ConfigError
from mslm_core.sources import MAX_SOURCES, MAX_WEIGHT
from mslm_settings import Settings

from .access import get_owned, owned, owned_by, page
from .datasets import checked_type_map, version_of
from .errors import Conflict, NotFound
from .queue import TaskQueue
from .quotas import check_job_quota
from .tables import (
    QUEUED,
    RUNNING,
    Dataset,
    DatasetVersion,
    Job,
    JobDataset,
    Model,
    new_id,
    utcnow,
)
from .transitions import request_cancel

log = logging.getLogger(__name__)

# Job parameters a client may set (docs/design.md), beyond which TrainConfig's defaults apply:
# the fields TrainConfig marks as job options.
JOB_FIELDS = JOB_OPTIONS


def allowed_encoder(settings: Settings, name: str) -> str:
    """The encoder (alias, path or hub id) that ``MSLM_BASE_MODELS`` allows under ``name``;
    a name it does not list is a ConfigError naming the field and the allowed ones."""
    encoders = settings.base_model_map()
    if name not in encoders:
        raise ConfigError(
            f"base_model: {name!r} is not allowed here (MSLM_BASE_MODELS allows: "
            f"{', '.join(encoders)})"
        )
    return encoders[name]


def job_config(settings: Settings, params: dict[str, Any]) -> dict[str, Any]:
    """Validated job parameters (raises ConfigError naming the field)."""
    unknown = sorted(set(params) - set(JOB_FIELDS))
    if unknown:
        raise ConfigError(f"unknown job field(s): {', '.join(unknown)}")
    clean = {k: v for k, v in params.items() if v is not None}
    name = clean.get("base_model", settings.base_model)
    allowed_encoder(settings, name)
    clean["base_model"] = name
    TrainConfig.from_dict({k: v for k, v in clean.items() if k != "base_model"})  # validates
    return clean


@dataclass(frozen=True)
class JobSource:
    """A dataset a job trains on: its type map onto the job's schema (``mslm_core.typemap``;
    empty: its types as uploaded) and its sampling weight per epoch."""

    dataset_id: str
    type_map: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    # the dataset's version the job trains on: its latest when the job is made
    version: int | None = field(default=None, compare=False)


def _job_sources(session: Session, sources: list[JobSource], owner: str | None) -> list[JobSource]:
    """The job's datasets checked (each one ``owner`` sees, its type map against the types
    it has, its weight) and locked until the job is committed — a concurrent delete either
    went first (NotFound here) or waits and then sees this job (Conflict there). Errors name
    the field: ``datasets[1].type_map.Sign``."""
    if not 1 <= len(sources) <= MAX_SOURCES:
        raise ConfigError(f"datasets: between 1 and {MAX_SOURCES} datasets, got {len(sources)}")
    ids = [s.dataset_id for s in sources]
    rows: dict[str, Dataset] = {}
    for dataset_id in sorted(set(ids)):  # one lock order for every request: no deadlock
        row = session.get(Dataset, dataset_id, with_for_update=True)
        if row is None or not owned(row, owner):
            raise NotFound(f"dataset {dataset_id}")  # first: an unknown id is 404, listed
        rows[dataset_id] = row  # twice or not
    for i, dataset_id in enumerate(ids):
        if dataset_id in ids[:i]:
            raise ConfigError(f"datasets[{i}].id: dataset {dataset_id} is listed twice")
    clean = []
    for i, source in enumerate(sources):
        where = f"datasets[{i}]"
        if not 0 < source.weight <= MAX_WEIGHT:
            raise ConfigError(f"{where}.weight: must be in (0, {MAX_WEIGHT:g}]")
        row = rows[source.dataset_id]
        if not (row.stats.get("train") or {}).get("sentences"):
            raise ConfigError(
                f"{where}.id: dataset {row.id} (version {row.version}) has no labelled document yet"
            )
        type_map = checked_type_map(source.type_map, row, f"{where}.type_map")
        clean.append(JobSource(source.dataset_id, type_map, float(source.weight), row.version))
    return clean


def create_job(
    settings: Settings,
    session: Session,
    queue: TaskQueue,
    datasets: str | list[JobSource],
    params: dict[str, Any],
    export: dict[str, Any],
    idempotency_key: str | None = None,
    created_by: str | None = None,
    owner: str | None = None,
    activate: bool = False,
    replaces: str | None = None,
) -> tuple[Job, bool]:
    """A queued job and its message; returns (job, created). ``datasets``: a dataset id, or
    the datasets of a job on several corpora (:class:`JobSource`). The same idempotency key
    from the same key (``created_by``) with the same request returns the first job; with
    another request it is a Conflict; another key's jobs are never looked at. ``owner``: whose
    datasets the caller sees (``store.access.owned``). ``activate``: serve the model the job
    makes once it succeeds (the worker does). ``replaces``: a job whose model, when it is the
    one served, this job's model replaces once it succeeds (the first start's full model)."""
    clean = job_config(settings, params)
    check_job_quota(settings, session, created_by)
    sources = _job_sources(
        session, [JobSource(datasets)] if isinstance(datasets, str) else datasets, owner
    )
    same_key = select(Job).where(
        Job.idempotency_key == idempotency_key,
        Job.created_by.is_(None) if created_by is None else Job.created_by == created_by,
    )
    if idempotency_key:
        existing = session.scalar(same_key)
        if existing is not None:
            return _same_request(existing, sources, clean, export), False
    job = Job(
        id=new_id("job"),
        dataset_id=sources[0].dataset_id,
        params=clean,
        export=export,
        idempotency_key=idempotency_key,
        created_by=created_by,
        activate=activate,
        replaces=replaces,
        published_at=utcnow(),
        datasets=[
            JobDataset(
                position=i,
                dataset_id=s.dataset_id,
                type_map=s.type_map,
                weight=s.weight,
                version=s.version,
            )
            for i, s in enumerate(sources)
        ],
    )
    session.add(job)
    try:
        session.commit()
    except IntegrityError:  # a concurrent request with the same key won the race
        session.rollback()
        existing = session.scalar(same_key)
        if existing is None:
            raise
        return _same_request(existing, sources, clean, export), False
    queue.train(job.id)
    return job, True


def _same_request(
    job: Job, sources: list[JobSource], params: dict[str, Any], export: dict[str, Any]
) -> Job:
    had = [JobSource(d.dataset_id or "", d.type_map, d.weight) for d in job.datasets]
    if had != sources or job.params != params or job.export != export:
        raise Conflict(f"idempotency key already used by job {job.id} with a different request")
    return job


def get_job(session: Session, job_id: str, owner: str | None) -> Job:
    """The job, or NotFound (also when it is another key's: see ``store.access``)."""
    return get_owned(session, Job, job_id, owner, "job")


def find_job(session: Session, job_id: str) -> Job | None:
    """The job, whoever owns it (the service's own view: the first start's progress)."""
    return session.get(Job, job_id)


def claimed_job(
    session: Session, job_id: str
) -> tuple[Job, list[tuple[JobDataset, DatasetVersion | None]]]:
    """The job a worker has just claimed, with the version of each of its datasets it was
    made on (None: the dataset was deleted since)."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound(f"job {job_id}")
    return job, [
        (row, version_of(session, row.dataset_id or "", row.version)) for row in job.datasets
    ]


def list_jobs(
    session: Session, owner: str | None, limit: int, offset: int, state: str | None = None
) -> tuple[list[Job], int]:
    """One page of the jobs ``owner`` sees (None: all), newest first, and their count;
    ``state`` narrows them to one state."""
    where: list[ColumnElement[bool]] = owned_by(Job, owner)
    if state is not None:
        where.append(Job.state == state)
    return page(session, Job, limit, offset, where)


def cancel_job(session: Session, job_id: str, owner: str | None) -> Job:
    """Cancel a queued job at once; ask a running one to stop at its next step (its state
    turns ``cancelled`` then). Returns the job as it is now; NotFound when ``owner`` does
    not see it, Conflict when it had already succeeded or failed."""
    job = get_job(session, job_id, owner)
    after = request_cancel(session, job_id)
    if after is None:
        raise NotFound(f"job {job_id}")
    session.refresh(job)  # the row request_cancel changed
    if after in ("succeeded", "failed"):
        raise Conflict(f"job {job_id} already {after}")
    return job


# -- what killed workers leave ------------------------------------------------------------------
def sweep_worker_leftovers(
    settings: Settings, session: Session, older_than_s: float = 3600.0
) -> dict[str, int]:
    """At worker start: remove what a worker killed mid-job leaves for good
    — the work folder of a job that is finished or gone (its checkpoints, bundle, export
    scratch), a model bundle the store has no row for (moved into place, the row never
    committed), and export scratch folders in the system's temporary folder — each last
    touched more than ``older_than_s`` ago, so that nothing another worker uses now goes.
    A running or queued job's folder stays: its next attempt resumes from it. Logs counts
    only."""
    import tempfile
    import time

    from mslm_core.export import EXPORT_PREFIX

    cutoff = time.time() - older_than_s

    def old(path: Path) -> bool:
        try:
            return path.lstat().st_mtime < cutoff
        except FileNotFoundError:
            return False

    live = set(session.scalars(select(Job.id).where(Job.state.in_((QUEUED, RUNNING)))))
    models = set(session.scalars(select(Model.id)))
    found = {
        "job work folders": [
            p for p in (settings.artifacts / "work").glob("*") if p.name not in live and old(p)
        ],
        "bundles without a row": [
            p
            for p in (settings.artifacts / "models").glob("*")
            if not p.name.startswith(".") and p.name not in models and old(p)
        ],
        "export scratch folders": [
            p for p in Path(tempfile.gettempdir()).glob(EXPORT_PREFIX + "*") if old(p)
        ],
    }
    removed = {}
    for what, paths in found.items():
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)
        if paths:
            removed[what] = len(paths)
    if removed:
        log.info(
            "swept what killed workers left: %s",
            ", ".join(f"{n} {what}" for what, n in removed.items()),
        )
    return removed
