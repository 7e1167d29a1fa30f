"""Datasets: upload (validated with the core readers; a bad file stores nothing), list,
stats, delete."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile, status

from store import datasets as store_datasets
from store.tables import Dataset

from ..deps import AppState, IdPath, SessionDep, StateDep, TrainKey
from ..problems import V1_PROBLEMS, problem_responses
from ..schemas import NO_CONTROL, DatasetList, DatasetOut, SplitFile

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], responses=V1_PROBLEMS)


def _out(d: Dataset) -> DatasetOut:
    files = {
        k: SplitFile(
            filename=v["filename"], format=v["format"], bytes=v["bytes"], sha256=v["sha256"]
        )
        for k, v in d.files.items()
    }
    return DatasetOut(
        id=d.id,
        name=d.name,
        created_by=d.created_by,
        created_at=d.created_at,
        files=files,
        stats=d.stats,
        types=d.types,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=DatasetOut,
    responses=problem_responses(413),
)
def upload(
    state: StateDep,
    session: SessionDep,
    key: TrainKey,
    train: Annotated[
        UploadFile, File(description="CoNLL-IOB, JSONL, Label Studio, BioC JSON or PubTator")
    ],
    dev: Annotated[UploadFile | None, File()] = None,
    test: Annotated[UploadFile | None, File()] = None,
    name: Annotated[str | None, Form(max_length=200, pattern=NO_CONTROL)] = None,
) -> DatasetOut:
    """Upload a corpus: a ``train`` file and optional ``dev`` and ``test`` files. Each is
    validated; a bad file is refused with the file and line of its first errors, and nothing
    is stored. Without ``dev``, training selects on the train split itself."""
    with tempfile.TemporaryDirectory(dir=_spool_dir(state)) as tmp:
        uploads = []
        for split, part in (("train", train), ("dev", dev), ("test", test)):
            if part is None:
                continue
            path = Path(tmp) / split  # never the client's file name
            with open(path, "wb") as out:
                shutil.copyfileobj(part.file, out, 1 << 20)
            uploads.append(store_datasets.Upload(split, Path(part.filename or split).name, path))
        dataset = store_datasets.create_dataset(state.settings, session, uploads, name, key.key_id)
    return _out(dataset)


def _spool_dir(state: AppState) -> str:
    folder = state.settings.artifacts / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


@router.get("", response_model=DatasetList)
def list_datasets(
    session: SessionDep,
    key: TrainKey,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> DatasetList:
    """The datasets this key uploaded (an admin key: all), newest first."""
    rows, count = store_datasets.list_datasets(session, key.owner, limit, offset)
    return DatasetList(data=[_out(d) for d in rows], count=count)


@router.get("/{dataset_id}", response_model=DatasetOut, responses=problem_responses(404))
def get_dataset(dataset_id: IdPath, session: SessionDep, key: TrainKey) -> DatasetOut:
    return _out(store_datasets.get_dataset(session, dataset_id, key.owner))


@router.delete(
    "/{dataset_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409),
)
def remove(dataset_id: IdPath, state: StateDep, session: SessionDep, key: TrainKey) -> None:
    """Delete a dataset no queued or running job uses (finished jobs keep their records).
    A train key deletes only its own datasets; another key's is 404, as if absent."""
    store_datasets.delete_dataset(state.settings, session, dataset_id, key.owner)
