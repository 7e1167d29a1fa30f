"""Datasets: a corpus uploaded as train (and dev, test) files, validated with the core
readers, stored in the artifact store and recorded; listed, looked up and deleted for the
keys that own them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mslm_core.bundle import sha256_file
from mslm_core.corpus import SUFFIXES, detect_format, scan_corpus
from mslm_core.errors import ConfigError, CorpusError, CorpusIssue
from mslm_core.typemap import WILDCARD, TypeMap
from mslm_settings import Settings

from . import documents as docs
from .access import get_owned, owned, owned_by, page
from .documents import Document
from .errors import Conflict, NotFound
from .files import record, shown_name, staged
from .paths import dataset_dir
from .tables import (
    QUEUED,
    RUNNING,
    Dataset,
    DatasetVersion,
    Evaluation,
    Job,
    JobDataset,
    new_id,
    utcnow,
)

__all__ = ["Document", "Upload", "add_documents", "create_dataset", "create_from_documents"]

SPLITS = ("train", "dev", "test")


@dataclass
class Upload:
    """One uploaded file, already spooled to ``path`` by the caller."""

    split: str
    filename: str  # as the client named it: shown, never used as a path
    path: Path

    def __post_init__(self) -> None:
        self.filename = shown_name(self.filename, self.split)


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
        issues: list[CorpusIssue] = []
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
    session.add(_version_row(dataset, created_by, {"source": "upload"}))
    record(session, dataset, target)
    return dataset


def _version_row(
    dataset: Dataset, created_by: str | None, change: dict[str, Any]
) -> DatasetVersion:
    return DatasetVersion(
        dataset_id=dataset.id,
        version=dataset.version or 1,
        created_by=created_by,
        created_at=utcnow(),
        files=dataset.files,
        stats=dataset.stats,
        types=dataset.types,
        pool=dataset.pool or {},
        change=change,
        kept=True,
    )


def create_from_documents(
    settings: Settings,
    session: Session,
    documents: list[Document],
    name: str | None,
    created_by: str | None,
    source: str,
) -> Dataset:
    """A dataset made of documents (a Label Studio project's, the first time one of its
    tasks is annotated): version 1, its train split the labelled ones, its pool the others."""
    docs.check(documents, ())
    dataset_id = new_id("ds")
    with staged(settings.artifacts / "datasets") as staging:
        dataset = Dataset(id=dataset_id, name=(name or dataset_id)[:200], created_by=created_by)
        dataset.version = 1
        counts = _write_version(staging, "v1", documents, dataset, set())
        target = dataset_dir(settings, dataset_id)
        os.replace(staging, target)
    change = {"source": source, "added": len(documents), "replaced": 0, "removed": 0, **counts}
    session.add(_version_row(dataset, created_by, change))
    record(session, dataset, target)
    return dataset


def _write_version(
    folder: Path, name: str, documents: list[Document], dataset: Dataset, fixed_types: set[str]
) -> dict[str, int]:
    """Write ``documents`` as the version ``name`` (a folder under ``folder``) and point
    ``dataset``'s train file, stats, types and pool at it; returns the labelled and unlabelled
    counts. ``fixed_types``: the types of its dev and test splits, which never change."""
    (folder / name).mkdir()
    labelled = [d for d in documents if d.entities is not None]
    pool = [d for d in documents if d.entities is None]
    train = folder / name / "train.jsonl"
    docs.write_lines(train, labelled)
    scanned = docs.summary(train, len(labelled))
    dataset.files = {
        **(dataset.files or {}),
        "train": {
            "file": f"{name}/train.jsonl",
            "filename": f"documents, version {dataset.version}",
            "format": "jsonl",
            "bytes": train.stat().st_size,
            "sha256": sha256_file(train),
            "documents": len(labelled),
        },
    }
    dataset.stats = {**(dataset.stats or {}), "train": scanned.stats}
    dataset.types = sorted(fixed_types | set(scanned.types))
    dataset.pool = {}
    if pool:
        pool_file = folder / name / "pool.jsonl"
        docs.write_lines(pool_file, pool)
        dataset.pool = {
            "file": f"{name}/pool.jsonl",
            "documents": len(pool),
            "bytes": pool_file.stat().st_size,
            "sha256": sha256_file(pool_file),
        }
    return {"documents": len(labelled), "unlabelled": len(pool)}


def current_documents(settings: Settings, dataset: Dataset) -> list[Document]:
    """The dataset's latest documents, labelled then unlabelled (version 1 as uploaded: its
    train split read as ``train-1``, ``train-2``, …)."""
    folder = dataset_dir(settings, dataset.id)
    train = dataset.files["train"]
    if "documents" not in train:  # as uploaded
        labelled = docs.from_upload(folder / train["file"])
    else:
        labelled = docs.read_lines(folder / train["file"])
    return labelled + pool_documents(settings, dataset)


def pool_documents(settings: Settings, dataset: Dataset) -> list[Document]:
    """The dataset's unlabelled documents (its latest version's)."""
    if not dataset.pool:
        return []
    return docs.read_lines(dataset_dir(settings, dataset.id) / dataset.pool["file"])


def add_documents(
    settings: Settings,
    session: Session,
    dataset_id: str,
    owner: str | None,
    documents: list[Document],
    remove: Sequence[str] = (),
    created_by: str | None = None,
    source: str = "api",
) -> DatasetVersion:
    """A new version of the dataset: ``documents`` added, or replacing the document with
    their id (an unlabelled one, ``entities=None``, goes to the pool — and takes a labelled
    document of that id back there); ``remove``: ids deleted (an unknown id is an error).
    Only the train split changes. Raises :class:`CorpusError` (``documents[3].entities[0]``)
    and stores nothing when anything is wrong. Versions no job trained on are pruned of
    their files when a newer one comes (their record stays)."""
    docs.check(documents, remove)
    # locked: a job created meanwhile records either this version or the one before
    dataset = session.get(Dataset, dataset_id, with_for_update=True)
    if dataset is None or not owned(dataset, owner):
        raise NotFound(f"dataset {dataset_id}")
    current = current_documents(settings, dataset)
    index = {d.id: k for k, d in enumerate(current)}
    unknown = [i for i, doc_id in enumerate(remove) if doc_id not in index]
    if unknown:
        raise CorpusError(
            [CorpusIssue(f"remove[{i}]", None, "no document has this id", None) for i in unknown]
        )
    replaced = 0
    for doc in documents:
        if doc.id in index:
            current[index[doc.id]] = doc
            replaced += 1
        else:
            index[doc.id] = len(current)
            current.append(doc)
    gone = set(remove)
    current = [d for d in current if d.id not in gone]
    fixed: set[str] = set()
    for split in ("dev", "test"):
        fixed.update((dataset.stats.get(split) or {}).get("mentions_per_type", {}))
    previous = dataset.version
    dataset.version = previous + 1
    folder = dataset_dir(settings, dataset.id)
    name = f"v{dataset.version}"
    with staged(settings.artifacts / "datasets") as staging:
        counts = _write_version(staging, name, current, dataset, fixed)
        # a folder of this name is an orphan (a process that died before its commit): the
        # version was never recorded, and the row's lock keeps anyone else from making it now
        shutil.rmtree(folder / name, ignore_errors=True)
        os.replace(staging / name, folder / name)
        staging.rmdir()
    change = {
        "source": source,
        "added": len(documents) - replaced,
        "replaced": replaced,
        "removed": len(gone),
        **counts,
    }
    row = _version_row(dataset, created_by, change)
    session.add(row)
    pruned = _prune(session, dataset.id, dataset.version)
    try:
        session.commit()
    except BaseException:
        shutil.rmtree(folder / name, ignore_errors=True)
        raise
    for version in pruned:
        shutil.rmtree(folder / f"v{version}", ignore_errors=True)
    return row


def _prune(session: Session, dataset_id: str, latest: int) -> list[int]:
    """Versions before ``latest`` whose files no job needs (version 1, as uploaded, stays):
    marked not kept; their folders go once the change is committed."""
    used = set(
        session.scalars(
            select(JobDataset.version).where(
                JobDataset.dataset_id == dataset_id, JobDataset.version.is_not(None)
            )
        )
    )
    stale = session.scalars(
        select(DatasetVersion).where(
            DatasetVersion.dataset_id == dataset_id,
            DatasetVersion.version > 1,
            DatasetVersion.version < latest,
            DatasetVersion.kept.is_(True),
        )
    ).all()
    pruned = []
    for row in stale:
        if row.version not in used:
            row.kept = False
            pruned.append(row.version)
    return pruned


def list_versions(
    session: Session, dataset_id: str, owner: str | None
) -> tuple[Dataset, list[DatasetVersion]]:
    """The dataset and its versions, newest first."""
    dataset = get_dataset(session, dataset_id, owner)
    rows = session.scalars(
        select(DatasetVersion)
        .where(DatasetVersion.dataset_id == dataset_id)
        .order_by(DatasetVersion.version.desc())
    ).all()
    return dataset, list(rows)


def version_of(session: Session, dataset_id: str, version: int | None) -> DatasetVersion | None:
    """One version of a dataset (None: version 1, what jobs made before versions trained
    on), or None when the dataset is gone."""
    return session.get(DatasetVersion, (dataset_id, version or 1))


def get_dataset(session: Session, dataset_id: str, owner: str | None) -> Dataset:
    """The dataset, or NotFound (also when it is another key's: see ``store.access``)."""
    return get_owned(session, Dataset, dataset_id, owner, "dataset")


def list_datasets(
    session: Session, owner: str | None, limit: int, offset: int
) -> tuple[list[Dataset], int]:
    """One page of the datasets ``owner`` sees (None: all), newest first, and their count."""
    return page(session, Dataset, limit, offset, owned_by(Dataset, owner))


def any_dataset(session: Session) -> bool:
    """Whether the store holds a dataset at all."""
    return bool(session.scalar(select(Dataset.id).limit(1)))


def delete_dataset(
    settings: Settings, session: Session, dataset_id: str, owner: str | None = None
) -> None:
    # locked: a job being created on it either went first (Conflict here) or waits and then
    # finds it gone (store.jobs.create_job)
    dataset = session.get(Dataset, dataset_id, with_for_update=True)
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


def checked_type_map(data: dict[str, Any], dataset: Dataset, where: str) -> dict[str, Any]:
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


def owned_ids(session: Session, owner: str | None, ids: list[str]) -> list[str]:
    """Those of ``ids`` that are datasets ``owner`` sees (``store.access.owned``)."""
    if not ids:
        return []
    query = select(Dataset.id).where(Dataset.id.in_(ids), *owned_by(Dataset, owner))
    return list(session.scalars(query))
