"""The job store: datasets, jobs, models, evaluations, API keys and the serving state.

The job row is the source of truth; a broker message carries only its id. Times are UTC.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator, TypeEngine

JSONType = JSON().with_variant(JSONB(), "postgresql")


# The states of leased work (jobs, evaluations, annotation jobs and chunks); the last three are
# final.
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
)
FINAL_STATES = (SUCCEEDED, FAILED, CANCELLED)
STATES = (QUEUED, RUNNING, *FINAL_STATES)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware UTC in and out, on every database (SQLite stores no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: use store.tables.utcnow()")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Base(DeclarativeBase):
    # annotation (a type, or a generic alias such as dict[str, Any]) → the column type
    type_annotation_map: ClassVar[dict[object, TypeEngine[Any]]] = {
        dict[str, Any]: JSONType,
        list[Any]: JSONType,
        dt.datetime: UTCDateTime(),
    }


class Leased:
    """The columns of work a worker claims, holds and finishes (a mixin; ``store.leases``)."""

    state: Mapped[str] = mapped_column(String(16), index=True, default=QUEUED)
    worker: Mapped[str | None] = mapped_column(String(200))  # the holder, while running
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # claims so far
    published_at: Mapped[dt.datetime | None] = mapped_column()  # its last broker message
    started_at: Mapped[dt.datetime | None] = mapped_column()
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column()
    finished_at: Mapped[dt.datetime | None] = mapped_column()


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex
    prefix: Mapped[str] = mapped_column(String(12))  # first characters, to tell keys apart
    scopes: Mapped[str] = mapped_column(String(64))  # "annotate+train"
    source: Mapped[str] = mapped_column(String(16))  # env | bootstrap
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column()


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)  # API key id
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # split → {"file": stored name, "filename": as uploaded, "format", "bytes", "sha256"}
    files: Mapped[dict[str, Any]] = mapped_column(default=dict)
    stats: Mapped[dict[str, Any]] = mapped_column(default=dict)  # split → corpus stats
    types: Mapped[list[Any]] = mapped_column(default=list)
    # the latest version (``DatasetVersion``): ``files``/``stats``/``types`` are its; 1: as
    # uploaded. ``pool``: its unlabelled documents {"file", "documents", "bytes", "sha256"}
    # (empty: none), what ``suggest`` ranks
    version: Mapped[int] = mapped_column(Integer, default=1)
    pool: Mapped[dict[str, Any]] = mapped_column(default=dict)


class DatasetVersion(Base):
    """One version of a dataset: version 1 as uploaded, then one per change of its train
    documents (added, replaced by id, removed; ``change`` counts them and names the source).
    The dev and test splits never change, so scores stay comparable across versions. A
    version's files are kept while it is the latest or a job trained on it (``kept``)."""

    __tablename__ = "dataset_versions"

    dataset_id: Mapped[str] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_by: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    files: Mapped[dict[str, Any]] = mapped_column(default=dict)
    stats: Mapped[dict[str, Any]] = mapped_column(default=dict)
    types: Mapped[list[Any]] = mapped_column(default=list)
    pool: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # {"source": upload | api | labelstudio, "added", "replaced", "removed", "unlabelled"}
    change: Mapped[dict[str, Any]] = mapped_column(default=dict)
    kept: Mapped[bool] = mapped_column(Boolean, default=True)


class Job(Leased, Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("created_by", "idempotency_key", name="uq_jobs_owner_idempotency_key"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # the first of its datasets (all of them: ``datasets``); kept when the dataset is deleted
    # later (the job's record stays)
    dataset_id: Mapped[str | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the TrainConfig fields
    export: Mapped[dict[str, Any]] = mapped_column(default=dict)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))  # unique per owner
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    progress: Mapped[dict[str, Any]] = mapped_column(default=dict)
    history: Mapped[list[Any]] = mapped_column(default=list)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    model_id: Mapped[str | None] = mapped_column(String(80))
    error: Mapped[str | None] = mapped_column(Text)
    # serve the model it makes once it succeeds (a Label Studio project's jobs ask for it)
    activate: Mapped[bool] = mapped_column(Boolean, default=False)
    # why its model is below the job's floor (TrainConfig.min_dev_f1); empty: it is not
    warnings: Mapped[list[Any]] = mapped_column(default=list)
    # the job whose served model this job's replaces when it succeeds (the first start's
    # full model replacing its early one); never another model an admin chose meanwhile
    replaces: Mapped[str | None] = mapped_column(String(40))
    datasets: Mapped[list[JobDataset]] = relationship(
        order_by="JobDataset.position",
        lazy="selectin",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )


class JobDataset(Base):
    """A dataset a job trains on, with its type map onto the job's schema and its sampling
    weight (``mslm_core.sources``); a job on one dataset as uploaded has one row with an
    empty map and weight 1."""

    __tablename__ = "job_datasets"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[str | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    type_map: Mapped[dict[str, Any]] = mapped_column(default=dict)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    version: Mapped[int | None] = mapped_column(Integer)  # of the dataset, when the job was made


class Model(Base):
    __tablename__ = "models"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)  # the bundle's manifest id
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    job_id: Mapped[str | None] = mapped_column(String(40))
    path: Mapped[str] = mapped_column(String(400))  # relative to the artifacts directory
    base_model: Mapped[str] = mapped_column(String(200))
    strategy: Mapped[str] = mapped_column(String(40))
    types: Mapped[list[Any]] = mapped_column(default=list)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    precisions: Mapped[list[Any]] = mapped_column(default=list)
    # below its job's floor (Job.warnings): served only when an admin forces it
    warnings: Mapped[list[Any]] = mapped_column(default=list)


class Evaluation(Leased, Base):
    __tablename__ = "evaluations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(80), index=True)
    dataset_id: Mapped[str | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    split: Mapped[str] = mapped_column(String(16))
    # the dataset's types mapped onto the model's (mslm_core.typemap); empty: as uploaded
    type_map: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    error: Mapped[str | None] = mapped_column(Text)


class StoredVocabulary(Base):
    """A concept vocabulary a site imported (``mslm vocab import``, ``POST /v1/vocabularies``):
    the file, as checked, and its linker index live in ``path`` under the artifacts."""

    __tablename__ = "vocabularies"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))  # the name concepts carry in answers
    filename: Mapped[str] = mapped_column(String(200))  # as uploaded: shown, never a path
    format: Mapped[str] = mapped_column(String(8))  # tsv | obo
    path: Mapped[str] = mapped_column(String(400))  # the folder, relative to the artifacts
    sha256: Mapped[str] = mapped_column(String(64))
    bytes: Mapped[int] = mapped_column(BigInteger)
    concepts: Mapped[int] = mapped_column(Integer)
    names: Mapped[int] = mapped_column(Integer)
    url_pattern: Mapped[str] = mapped_column(String(400), default="")
    source: Mapped[str] = mapped_column(Text, default="")  # provenance, from the file
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class ServingState(Base):
    """One row: the model every API replica serves, and the vocabulary it links to (None:
    the deployment's own, MSLM_VOCABULARY)."""

    __tablename__ = "serving_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, default=1)
    active_model_id: Mapped[str | None] = mapped_column(String(80))
    active_vocabulary_id: Mapped[str | None] = mapped_column(String(40))
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class NoteInput(Base):
    """A file of notes uploaded for annotation jobs (``POST /v1/annotation-jobs/inputs``),
    read once into ``notes.jsonl`` under ``path``; the notes that could not be read are its
    ``problems`` (the jobs on it report them)."""

    __tablename__ = "note_inputs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    filename: Mapped[str] = mapped_column(String(200))  # as uploaded: shown, never a path
    format: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(400))  # the folder, relative to the artifacts
    bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    notes: Mapped[int] = mapped_column(Integer)
    problems: Mapped[list[Any]] = mapped_column(default=list)  # [{where, reason, id, warning?}]
    # how its bytes were read as text (mslm_core.charsets.Encoding); None: Parquet
    encoding: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class RefusedUpload(Base):
    """An upload (a dataset, a vocabulary, a notes file) that was read and refused: it counts
    toward its key's upload quota as a stored one does. Its kind only, never its content."""

    __tablename__ = "refused_uploads"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # dataset | vocabulary | notes
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class AnnotationJob(Leased, Base):
    """A bulk annotation job: notes from an uploaded file or a warehouse query, annotated in
    chunks by the workers, written to files or to a warehouse table (OMOP ``NOTE_NLP``).

    queued ──plan──► running (chunks planned: ``planned_at``) ──last chunk──► final."""

    __tablename__ = "annotation_jobs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(80))
    # {"kind": "file", "input": id} | {"kind": "sql", "warehouse": name, "query": …}
    source: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # {"kind": "file", "format": …} | {"kind": "omop", "warehouse": name, "table": …}
    output: Mapped[dict[str, Any]] = mapped_column(default=dict)
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)  # thresholds, context, linking
    chunk_size: Mapped[int] = mapped_column(Integer)
    total: Mapped[int | None] = mapped_column(Integer)  # notes, once planned
    chunks: Mapped[int | None] = mapped_column(Integer)
    created_by: Mapped[str | None] = mapped_column(String(40), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    planned_at: Mapped[dt.datetime | None] = mapped_column()
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    problems: Mapped[list[Any]] = mapped_column(default=list)  # rows the plan could not use
    error: Mapped[str | None] = mapped_column(Text)


class AnnotationChunk(Leased, Base):
    """Notes ``first``..``last`` of a job (note ids for a warehouse source, positions in the
    file for an uploaded one): the unit a worker claims, writes and commits."""

    __tablename__ = "annotation_chunks"

    job_id: Mapped[str] = mapped_column(
        ForeignKey("annotation_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    first: Mapped[int] = mapped_column(BigInteger)
    last: Mapped[int] = mapped_column(BigInteger)
    notes: Mapped[int] = mapped_column(Integer)
    done: Mapped[int] = mapped_column(Integer, default=0)  # notes annotated and written
    entities: Mapped[int] = mapped_column(Integer, default=0)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)  # of the last attempt
    errors: Mapped[list[Any]] = mapped_column(default=list)  # [{note_id, reason}]
    error: Mapped[str | None] = mapped_column(Text)  # the chunk as a whole failed


class LabelStudioProject(Base):
    """A Label Studio project that uses this service as its ML backend (``store.labelstudio``),
    per API key: what ``/labelstudio/setup`` read from its labelling config, the dataset its
    annotations make (None until the first one), and when it trains next — every
    ``train_every`` new annotations, or when asked. ``annotations``: Label Studio's
    annotation id → its task id (a deletion names only the annotation)."""

    __tablename__ = "labelstudio_projects"
    __table_args__ = (
        UniqueConstraint("project", "key_id", name="uq_labelstudio_projects_project_key"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project: Mapped[str] = mapped_column(String(100))  # Label Studio's project id
    key_id: Mapped[str] = mapped_column(String(40), index=True)  # the API key it connects with
    dataset_id: Mapped[str | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    from_name: Mapped[str] = mapped_column(String(200))
    to_name: Mapped[str] = mapped_column(String(200))
    text_key: Mapped[str] = mapped_column(String(200))
    labels: Mapped[list[Any]] = mapped_column(default=list)
    train_every: Mapped[int] = mapped_column(Integer, default=10)
    since_job: Mapped[int] = mapped_column(Integer, default=0)  # new annotations since then
    last_job_id: Mapped[str | None] = mapped_column(String(40))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the jobs' options
    serve: Mapped[bool] = mapped_column(Boolean, default=True)  # activate what a job makes
    # the task order of Label Studio's uncertainty sampling (mslm_core.active)
    strategy: Mapped[str] = mapped_column(String(32), default="least_confidence")
    diversity: Mapped[float] = mapped_column(Float, default=0.5)
    annotations: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
