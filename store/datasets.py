"""Datasets: a corpus uploaded as train (and dev, test) files, validated with the core
readers, stored in the artifact store and recorded; listed, looked up and deleted for the
keys that own them."""

from __future__ import annotations

import os
import shutil
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

from .access import get_owned, owned, owned_by, page
from .errors import Conflict, NotFound
from .files import record, shown_name, staged
from .paths import dataset_dir
from .tables import QUEUED, RUNNING, Dataset, Evaluation, Job, JobDataset, new_id

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
    record(session, dataset, target)
    return dataset


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
