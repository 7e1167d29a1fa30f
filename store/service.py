"""Creating datasets, jobs and evaluations — one code path for the HTTP API and for the
first-start bootstrap of ``mslm up``. No web framework here."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mslm_core.bundle import sha256_file, verify_bundle
from mslm_core.config import TrainConfig
from mslm_core.corpus import SUFFIXES, detect_format, scan_corpus
from mslm_core.errors import ConfigError, CorpusError, MSLMError
from mslm_core.sources import MAX_SOURCES, MAX_WEIGHT
from mslm_core.typemap import WILDCARD, TypeMap
from mslm_settings import Settings

from .models import (
    QUEUED,
    RUNNING,
    Dataset,
    Evaluation,
    Job,
    JobDataset,
    Model,
    NoteInput,
    ServingState,
    StoredVocabulary,
    new_id,
    utcnow,
)
from .paths import dataset_dir, model_dir, vocabulary_dir

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
# Job parameters a client may set (docs/design.md), beyond which TrainConfig's defaults apply.
JOB_FIELDS = (
    "base_model",
    "strategy",
    "elm_rate",
    "blm_rate",
    "epochs",
    "batch_size",
    "learning_rate",
    "max_length",
    "seed",
    "patience",
)


class TaskQueue(Protocol):
    """Where new work is announced (a message carrying only the row id; the row is the
    truth): ``worker.celery_app.CeleryQueue`` in the service."""

    def train(self, job_id: str) -> None: ...
    def evaluate(self, evaluation_id: str) -> None: ...
    def annotate(self, annotation_job_id: str) -> None: ...


class Conflict(MSLMError):
    """The request conflicts with the store's state (HTTP 409)."""

    code = "E101"


class NotFound(MSLMError):
    """No such row (HTTP 404)."""

    code = "E102"


class QuotaExceeded(MSLMError):
    """A key's quota (or the service's) is used up (HTTP 429 with ``retry_after`` seconds)."""

    code = "E103"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


def check_job_quota(settings: Settings, session: Session, key_id: str | None) -> None:
    """QuotaExceeded when ``key_id`` has MSLM_QUOTA_QUEUED_JOBS jobs queued, or the service
    MSLM_MAX_QUEUED_JOBS (the service's own jobs, key None, count only towards the latter)."""
    queued = select(func.count()).select_from(Job).where(Job.state == QUEUED)
    if settings.max_queued_jobs and (session.scalar(queued) or 0) >= settings.max_queued_jobs:
        raise QuotaExceeded(
            f"the service has {settings.max_queued_jobs} jobs queued (MSLM_MAX_QUEUED_JOBS); "
            "submit again when some have started",
            60,
        )
    if key_id is None or not settings.quota_queued_jobs:
        return
    mine = session.scalar(queued.where(Job.created_by == key_id)) or 0
    if mine >= settings.quota_queued_jobs:
        raise QuotaExceeded(
            f"this API key has {mine} jobs queued, its quota (MSLM_QUOTA_QUEUED_JOBS); "
            "submit again when one has started, or cancel one",
            60,
        )


def check_upload_quota(settings: Settings, session: Session, key_id: str | None) -> None:
    """QuotaExceeded when ``key_id`` uploaded MSLM_QUOTA_UPLOADS_PER_HOUR datasets and
    vocabularies in the last hour; ``retry_after``: until the oldest of them is an hour old."""
    if key_id is None or not settings.quota_uploads_per_hour:
        return
    since = utcnow() - dt.timedelta(hours=1)
    times = [
        t
        for cls in (Dataset, StoredVocabulary, NoteInput)
        for t in session.scalars(
            select(cls.created_at).where(cls.created_by == key_id, cls.created_at > since)
        )
    ]
    if len(times) >= settings.quota_uploads_per_hour:
        wait = (min(times) - since).total_seconds()
        raise QuotaExceeded(
            f"this API key uploaded {len(times)} datasets and vocabularies in the last hour, "
            "its quota (MSLM_QUOTA_UPLOADS_PER_HOUR)",
            max(1, int(wait) + 1),
        )


def shown_name(filename: str, default: str) -> str:
    """A client's file name as the store keeps and shows it: its last part, without control
    characters (a NUL in a multipart file name was a 500: PostgreSQL refuses it), at most 200
    characters; ``default`` when nothing is left."""
    name = "".join(c for c in Path(filename).name if c.isprintable())
    return name[:200] or default


@dataclass
class Upload:
    """One uploaded file, already spooled to ``path`` by the caller."""

    split: str
    filename: str  # as the client named it: shown, never used as a path
    path: Path

    def __post_init__(self) -> None:
        self.filename = shown_name(self.filename, self.split)


@contextlib.contextmanager
def staged(parent: Path) -> Iterator[Path]:
    """A new staging folder under ``parent`` (swept as an orphan if the process dies), removed
    when the block raises; the block moves it into place when it succeeds."""
    staging = parent / f".staging-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _record(session: Session, row: Any, folder: Path) -> None:
    """Commit ``row``; when that fails, the folder stored for it goes too."""
    session.add(row)
    try:
        session.commit()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _format_of(upload: Upload) -> str:
    """By the client's file name, and the content where that leaves a choice (.json, .txt)."""
    return detect_format(upload.path, name=upload.filename)


def create_dataset(
    settings: Settings,
    session: Session,
    uploads: list[Upload],
    name: str | None = None,
    created_by: str | None = None,
) -> Dataset:
    """Validate every file with the core readers and store the dataset; on any error raise
    :class:`CorpusError` (issues name the split's file and line) and store nothing.
    ``created_by``: the API key id that owns it."""
    by_split = {u.split: u for u in uploads}
    if "train" not in by_split:
        raise CorpusError.single("train", None, "a train file is required")
    dataset_id = new_id("ds")
    with staged(settings.artifacts / "datasets") as staging:
        files: dict[str, Any] = {}
        stats: dict[str, Any] = {}
        issues = []
        types: set[str] = set()
        for split in SPLITS:
            upload = by_split.get(split)
            if upload is None:
                continue
            fmt = _format_of(upload)
            stored = staging / f"{split}{SUFFIXES[fmt]}"  # detected as fmt when read again
            shutil.copyfile(upload.path, stored)
            try:
                summary = scan_corpus(stored, fmt)  # bounded memory, whatever the size
            except CorpusError as exc:
                # name the file as the client knows it, never our storage path
                for issue in exc.issues:
                    issues.append(
                        type(issue)(
                            f"{split} ({upload.filename})", issue.line, issue.message, issue.field
                        )
                    )
                continue
            files[split] = {
                "file": stored.name,
                "filename": upload.filename[:200],
                "format": fmt,
                "bytes": stored.stat().st_size,
                "sha256": sha256_file(stored),
            }
            stats[split] = summary.stats
            types.update(summary.types)
        if issues:
            raise CorpusError(issues)
        target = dataset_dir(settings, dataset_id)
        os.replace(staging, target)
    dataset = Dataset(
        id=dataset_id,
        name=(name or by_split["train"].filename or dataset_id)[:200],
        created_by=created_by,
        files=files,
        stats=stats,
        types=sorted(types),
    )
    _record(session, dataset, target)
    return dataset


def owned(row: Any, owner: str | None) -> bool:
    """Whether ``row`` (a dataset, job or evaluation) is visible to ``owner``: the API key id
    of a train key, which sees only what it created, or None (an admin key, or the service
    itself), which sees everything."""
    return row is not None and (owner is None or row.created_by == owner)


def visible_to(query: Any, cls: Any, owner: str | None) -> Any:
    """``query`` restricted to the rows of ``cls`` that ``owner`` sees (see :func:`owned`)."""
    return query if owner is None else query.where(cls.created_by == owner)


def get_owned(session: Session, cls: Any, row_id: str, owner: str | None, what: str) -> Any:
    """The row, or NotFound — also when it exists but is not ``owner``'s (its existence is
    not disclosed)."""
    row = session.get(cls, row_id)
    if not owned(row, owner):
        raise NotFound(f"{what} {row_id}")
    return row


def delete_dataset(
    settings: Settings, session: Session, dataset_id: str, owner: str | None = None
) -> None:
    dataset = session.get(Dataset, dataset_id, with_for_update=True)  # see create_job
    if not owned(dataset, owner):
        raise NotFound(f"dataset {dataset_id}")
    busy = session.scalar(
        select(JobDataset.job_id)
        .join(Job, Job.id == JobDataset.job_id)
        .where(JobDataset.dataset_id == dataset_id, Job.state.in_((QUEUED, RUNNING)))
    )
    if busy:
        raise Conflict(f"dataset {dataset_id} is used by job {busy}, which has not finished")
    # finished jobs and evaluations keep their records (ON DELETE SET NULL, also done here
    # for databases that do not enforce foreign keys)
    for cls in (Job, JobDataset, Evaluation):
        session.execute(update(cls).where(cls.dataset_id == dataset_id).values(dataset_id=None))
    session.delete(dataset)
    session.commit()
    shutil.rmtree(dataset_dir(settings, dataset_id), ignore_errors=True)


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
        type_map = _checked_type_map(source.type_map, rows[source.dataset_id], f"{where}.type_map")
        clean.append(JobSource(source.dataset_id, type_map, float(source.weight)))
    return clean


def _checked_type_map(data: dict[str, Any], dataset: Dataset, where: str) -> dict[str, Any]:
    """A type map for ``dataset``, validated (ConfigError naming ``where``'s field): every
    type it names is one the dataset has, and it leaves at least one. Returns it as stored."""
    type_map = TypeMap.parse(data, where)
    types = dataset.types or []
    for name, _ in type_map.mapping:
        if name != WILDCARD and name not in types:
            raise ConfigError(
                f"{where}.{name}: dataset {dataset.id} has no type {name!r} "
                f"(its types: {', '.join(types) or 'none'})"
            )
    if type_map and types and not type_map.targets(types):
        raise ConfigError(f"{where}: drops every type of dataset {dataset.id}")
    return type_map.to_json()


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
) -> tuple[Job, bool]:
    """A queued job and its message; returns (job, created). ``datasets``: a dataset id, or
    the datasets of a job on several corpora (:class:`JobSource`). The same idempotency key
    from the same key (``created_by``) with the same request returns the first job; with
    another request it is a Conflict; another key's jobs are never looked at. ``owner``: whose
    datasets the caller sees (:func:`owned`)."""
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
        published_at=utcnow(),
        datasets=[
            JobDataset(position=i, dataset_id=s.dataset_id, type_map=s.type_map, weight=s.weight)
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


def _same_request(job: Job, sources: list[JobSource], params: dict[str, Any], export: dict) -> Job:
    had = [JobSource(d.dataset_id or "", d.type_map, d.weight) for d in job.datasets]
    if had != sources or job.params != params or job.export != export:
        raise Conflict(f"idempotency key already used by job {job.id} with a different request")
    return job


def create_evaluation(
    session: Session,
    queue: TaskQueue,
    model_id: str,
    dataset_id: str,
    split: str,
    created_by: str | None = None,
    owner: str | None = None,
    type_map: dict[str, Any] | None = None,
) -> Evaluation:
    """A queued evaluation of a model (every key sees every model) on a dataset ``owner``
    sees (:func:`owned`); ``type_map``: the dataset's types mapped onto the model's."""
    if session.get(Model, model_id) is None:
        raise NotFound(f"model {model_id}")
    dataset = get_owned(session, Dataset, dataset_id, owner, "dataset")
    if split not in dataset.files:
        raise ConfigError(
            f"split: dataset {dataset_id} has no {split!r} split (has {', '.join(dataset.files)})"
        )
    checked = _checked_type_map(type_map or {}, dataset, "type_map")
    ev = Evaluation(
        id=new_id("ev"),
        model_id=model_id,
        dataset_id=dataset_id,
        split=split,
        type_map=checked,
        created_by=created_by,
        published_at=utcnow(),
    )
    session.add(ev)
    session.commit()
    queue.evaluate(ev.id)
    return ev


def active_model_id(session: Session) -> str | None:
    state = session.get(ServingState, 1)
    return state.active_model_id if state else None


def _lock_state(session: Session) -> ServingState:
    """The serving state's row, locked (created first in a fresh store, once, whoever wins)."""
    state = session.get(ServingState, 1, with_for_update=True)
    if state is None:
        try:
            with session.begin_nested():
                session.add(ServingState(id=1, active_model_id=None, updated_at=utcnow()))
        except IntegrityError:
            pass
        state = session.get(ServingState, 1, with_for_update=True, populate_existing=True)
    if state is None:  # a store that refuses to create it is broken
        raise RuntimeError("the serving state's row could not be created")
    return state


def _lock_serving(session: Session, model_id: str | None) -> tuple[ServingState, Model | None]:
    """Lock the serving state's row, then the model's (always in this order, so activating
    and deleting the same model run one after the other and never deadlock)."""
    state = _lock_state(session)
    model = session.get(Model, model_id, with_for_update=True) if model_id else None
    return state, model


def set_active_model(session: Session, model_id: str | None) -> None:
    """Make ``model_id`` the served model (None: none). A model deleted meanwhile is
    NotFound: the store never points at a model that is gone."""
    state, model = _lock_serving(session, model_id)
    if model_id is not None and model is None:
        session.rollback()
        raise NotFound(f"model {model_id}")
    state.active_model_id, state.updated_at = model_id, utcnow()
    session.commit()


def delete_model(settings: Settings, session: Session, model_id: str) -> None:
    """Delete a model that is not being served (checked under the lock that activation
    takes: a concurrent activation either went first — Conflict — or finds it gone)."""
    state, model = _lock_serving(session, model_id)
    if model is None:
        raise NotFound(f"model {model_id}")
    if state.active_model_id == model_id:
        raise Conflict(f"model {model_id} is being served; activate another one first")
    session.delete(model)
    session.commit()
    shutil.rmtree(settings.artifacts / model.path, ignore_errors=True)


def model_row_from_manifest(
    settings: Settings,
    manifest: dict[str, Any],
    path: Path,
    job_id: str | None = None,
    base_model: str | None = None,
    created_by: str | None = None,
) -> Model:
    """The store's row for the bundle at ``path`` (inside the artifact store), from its
    manifest: one definition for a job's model and an imported one. ``base_model``: the
    name the job asked for (MSLM_BASE_MODELS), else the manifest's encoder."""
    return Model(
        id=manifest["id"],
        job_id=job_id,
        created_by=created_by,
        path=str(path.relative_to(settings.artifacts)),
        base_model=base_model or str(manifest.get("base_model", "")),
        strategy=str(manifest.get("strategy", "")),
        types=manifest["types"],
        metrics=manifest.get("metrics", {}),
        precisions=sorted((manifest.get("onnx") or {}).get("precisions", {})),
    )


def import_bundle(settings: Settings, session: Session, source: Path) -> Model:
    """Copy a bundle (``mslm train`` output, exported or not) into the model store and
    record it; every checksum is verified first. A bundle already imported is a Conflict."""
    manifest = verify_bundle(source)
    model_id = manifest["id"]
    if session.get(Model, model_id) is not None:
        raise Conflict(f"model {model_id} is already in the store")
    target = model_dir(settings, model_id)
    staging = target.with_name(f".staging-{uuid.uuid4().hex}")
    shutil.copytree(source, staging)
    try:
        verify_bundle(staging)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    model = model_row_from_manifest(settings, manifest, target)
    session.add(model)
    session.commit()
    return model


# -- vocabularies ----------------------------------------------------------------------------
def active_vocabulary_id(session: Session) -> str | None:
    """The stored vocabulary answers link to; None: the deployment's own (MSLM_VOCABULARY)."""
    state = session.get(ServingState, 1)
    return state.active_vocabulary_id if state else None


def import_vocabulary(
    settings: Settings,
    session: Session,
    path: Path,
    filename: str,
    name: str | None = None,
    url_pattern: str = "",
    created_by: str | None = None,
    rerank_encoder: str | None = None,
) -> StoredVocabulary:
    """Check a vocabulary file (TSV, or OBO by its name ``*.obo``), index it, and store both;
    a bad file raises :class:`CorpusError` naming ``filename``'s line and field, and stores
    nothing. ``url_pattern``: a concept's page, ``{id}`` standing for its id.
    ``rerank_encoder``: also prepare the re-rank of candidates by this encoder's embeddings
    (``minilm``; needs torch, so the command line of an install with torch, not the API)."""
    from mslm_core.linking import Linker
    from mslm_core.linking.builtin import cached_index
    from mslm_core.linking.vocabulary import is_obo, read_vocabulary

    shown = shown_name(filename, "vocabulary").removesuffix(".gz") or "vocabulary"
    fmt = "obo" if is_obo(shown) else "tsv"
    vocabulary_id = new_id("voc")
    with staged(settings.artifacts / "vocabularies") as staging:
        stored = staging / f"vocabulary.{fmt}"
        if path.suffix == ".gz":  # a local file (the packaged one); uploads are spooled plain
            with gzip.open(path, "rb") as src, open(stored, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        else:
            shutil.copyfile(path, stored)
        try:
            # named by the form, else by the file's first line, else by the client's file
            vocabulary = read_vocabulary(stored, name or None)
            if not name and vocabulary.source == os.fspath(stored):
                vocabulary.name = Path(shown).stem or vocabulary.name
            # the index is built now, so that activating it later is quick and cannot fail
            # on a vocabulary with no usable name
            index = cached_index(stored, staging / "index", vocabulary)
            Linker(vocabulary, url_pattern=url_pattern, index=index)
            if rerank_encoder:
                _prepare_rerank(vocabulary, index, staging / "rerank", rerank_encoder)
        except CorpusError as exc:  # name the file as the client knows it
            raise CorpusError(
                [type(i)(shown, i.line, i.message, i.field) for i in exc.issues]
            ) from None
        except ValueError as exc:
            raise CorpusError.single(shown, None, str(exc)) from None
        target = vocabulary_dir(settings, vocabulary_id)
        os.replace(staging, target)
    row = StoredVocabulary(
        id=vocabulary_id,
        name=vocabulary.name[:200],
        filename=shown,
        format=fmt,
        path=str(target.relative_to(settings.artifacts)),
        sha256=sha256_file(target / stored.name),
        bytes=(target / stored.name).stat().st_size,
        concepts=len(vocabulary),
        names=len(vocabulary.names()),
        url_pattern=url_pattern,
        source="" if vocabulary.source == os.fspath(stored) else vocabulary.source[:2000],
        created_by=created_by,
    )
    _record(session, row, target)
    return row


def _prepare_rerank(vocabulary: Any, index: Any, folder: Path, encoder: str) -> None:
    try:
        from mslm_core.linking.rerank import prepare
    except ImportError as exc:  # pragma: no cover - the API image has no torch
        raise ConfigError(f"the re-rank needs torch and transformers ({exc})") from None
    try:
        prepare(vocabulary, index, folder, encoder)
    except ImportError as exc:
        raise ConfigError(
            f"the re-rank needs torch and transformers: run mslm vocab import --rerank where "
            f"they are installed, such as the worker image ({exc})"
        ) from None
    except OSError as exc:
        raise ConfigError(f"encoder {encoder!r} for the re-rank: {exc}") from None


def vocabulary_file(settings: Settings, row: StoredVocabulary) -> Path:
    return settings.artifacts / row.path / f"vocabulary.{row.format}"


def set_active_vocabulary(session: Session, vocabulary_id: str | None) -> None:
    """Link answers to ``vocabulary_id`` (None: the deployment's own). One deleted meanwhile
    is NotFound (the serving state's row is locked first, then the vocabulary's)."""
    state = _lock_state(session)
    if (
        vocabulary_id is not None
        and session.get(StoredVocabulary, vocabulary_id, with_for_update=True) is None
    ):
        session.rollback()
        raise NotFound(f"vocabulary {vocabulary_id}")
    state.active_vocabulary_id, state.updated_at = vocabulary_id, utcnow()
    session.commit()


def delete_vocabulary(settings: Settings, session: Session, vocabulary_id: str) -> None:
    """Delete a stored vocabulary answers do not link to (the same locks as activation)."""
    state = _lock_state(session)
    row = session.get(StoredVocabulary, vocabulary_id, with_for_update=True)
    if row is None:
        session.rollback()
        raise NotFound(f"vocabulary {vocabulary_id}")
    if state.active_vocabulary_id == vocabulary_id:
        session.rollback()
        raise Conflict(
            f"vocabulary {vocabulary_id} is in use; activate another one (or 'default') first"
        )
    session.delete(row)
    session.commit()
    shutil.rmtree(settings.artifacts / row.path, ignore_errors=True)


# -- what killed workers leave ------------------------------------------------------------------
def sweep_worker_leftovers(
    settings: Settings, session: Session, older_than_s: float = 3600.0
) -> dict[str, int]:
    """At worker start (issue 29 item 5): remove what a worker killed mid-job leaves for good
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
