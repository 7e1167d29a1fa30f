"""Datasets: upload (validated with the core readers; a bad file stores nothing), list,
stats, delete."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile, status

from mslm_core.active import rank
from store import datasets as store_datasets
from store.quotas import counting_refusals
from store.tables import Dataset, DatasetVersion

from ..admission import body
from ..deps import AppState, IdPath, SessionDep, StateDep, TrainKey
from ..problems import V1_PROBLEMS, Problem, problem_responses, refuse_long_texts
from ..schemas import (
    NO_CONTROL,
    DatasetList,
    DatasetOut,
    DatasetVersionList,
    DatasetVersionOut,
    DocumentsChange,
    SplitFile,
    Suggestion,
    SuggestRequest,
    SuggestResponse,
    VersionChange,
)

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], responses=V1_PROBLEMS)


def _out(d: Dataset) -> DatasetOut:
    files = {
        k: SplitFile(
            filename=v["filename"],
            format=v["format"],
            bytes=v["bytes"],
            sha256=v["sha256"],
            documents=v.get("documents"),
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
        version=d.version,
        unlabelled=(d.pool or {}).get("documents", 0),
    )


def _version_out(v: DatasetVersion) -> DatasetVersionOut:
    return DatasetVersionOut(
        dataset_id=v.dataset_id,
        version=v.version,
        created_by=v.created_by,
        created_at=v.created_at,
        change=VersionChange(**v.change),
        stats=v.stats,
        types=v.types,
        kept=v.kept,
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
        with counting_refusals(state.factory, key.key_id, "dataset"):
            dataset = store_datasets.create_dataset(
                state.settings, session, uploads, name, key.key_id
            )
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


@router.post(
    "/{dataset_id}/documents",
    openapi_extra=body("upload"),
    status_code=status.HTTP_201_CREATED,
    response_model=DatasetVersionOut,
    responses=problem_responses(404, 413),
)
def change_documents(
    dataset_id: IdPath, body: DocumentsChange, state: StateDep, session: SessionDep, key: TrainKey
) -> DatasetVersionOut:
    """A new version of the dataset's train split: each document added, or replacing the
    document with its id (``entities`` null: not labelled yet — it waits in the pool that
    ``suggest`` ranks, and a labelled document of that id goes back there); ``remove``:
    documents deleted by id. The dev and test splits never change. A job records the version
    it trained on; a bad document is refused with its field (``documents[3].entities[0].end``)
    and nothing is stored."""
    texts = [d.text for d in body.documents]
    refuse_long_texts(texts, state.settings.max_text_chars, "document", "body.documents.{i}.text")
    documents = [
        store_datasets.Document(
            d.id,
            d.text,
            None if d.entities is None else [(e.start, e.end, e.label) for e in d.entities],
            None
            if d.entities is None
            else {k: e.concept for k, e in enumerate(d.entities) if e.concept} or None,
        )
        for d in body.documents
    ]
    version = store_datasets.add_documents(
        state.settings, session, dataset_id, key.owner, documents, body.remove, key.key_id
    )
    return _version_out(version)


@router.get(
    "/{dataset_id}/versions", response_model=DatasetVersionList, responses=problem_responses(404)
)
def versions(dataset_id: IdPath, session: SessionDep, key: TrainKey) -> DatasetVersionList:
    """The dataset's versions, newest first: what each change added, replaced and removed,
    and the counts of the version it made."""
    _, rows = store_datasets.list_versions(session, dataset_id, key.owner)
    return DatasetVersionList(data=[_version_out(v) for v in rows], count=len(rows))


@router.post(
    "/{dataset_id}/suggest",
    response_model=SuggestResponse,
    responses=problem_responses(404, 503),
)
async def suggest(
    dataset_id: IdPath, body: SuggestRequest, state: StateDep, session: SessionDep, key: TrainKey
) -> SuggestResponse:
    """The unlabelled documents of the dataset to label next, most useful first: ranked by
    the served model's calibrated uncertainty (``strategy``) with ``diversity`` so that
    near-identical notes are not all suggested together (docs/active-learning.md)."""
    dataset = store_datasets.get_dataset(session, dataset_id, key.owner)
    pool = await asyncio.to_thread(store_datasets.pool_documents, state.settings, dataset)
    scored = pool[: body.max_documents]
    texts = [d.text for d in scored]
    try:
        loaded, scores = await state.models.uncertainties(body.model, texts, body.strategy)
    except KeyError:
        raise Problem(404, f"model {body.model} not found", slug="not-found") from None
    # off the event loop: thousands of documents take seconds to rank
    ranked = await asyncio.to_thread(rank, texts, scores, body.limit, body.diversity)
    return SuggestResponse(
        model=loaded.id,
        strategy=body.strategy,
        diversity=body.diversity,
        version=dataset.version,
        pool=len(pool),
        scored=len(scored),
        data=[
            Suggestion(
                id=scored[s.index].id,
                text=scored[s.index].text,
                uncertainty=s.uncertainty,
                score=s.score,
                similar_to=None if s.similar_to is None else scored[s.similar_to].id,
            )
            for s in ranked
        ],
    )
