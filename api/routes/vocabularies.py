"""Vocabularies: import (checked and indexed; a bad file stores nothing), list, show, activate
(every replica follows), delete. Answers link to the active one, else to the deployment's own
(MSLM_VOCABULARY; the packaged MeSH vocabulary by default) — ``default`` activates that again."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile, status

from store import vocabularies as store_vocabularies
from store.quotas import counting_refusals
from store.serving import active_vocabulary_id
from store.tables import StoredVocabulary

from ..deps import AdminKey, AnnotateKey, IdPath, SessionDep, StateDep
from ..linking import DEFAULT
from ..problems import V1_PROBLEMS, problem_responses
from ..schemas import NO_CONTROL, LinkingOut, VocabularyList, VocabularyOut

router = APIRouter(prefix="/v1/vocabularies", tags=["vocabularies"], responses=V1_PROBLEMS)

#: An http(s) URL with {id} in it.
URL_PATTERN = r"^$|^https?://[^\s]*\{id\}[^\s]*$"


def _out(row: StoredVocabulary, active: str | None) -> VocabularyOut:
    return VocabularyOut.model_validate(row).model_copy(update={"active": row.id == active})


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=VocabularyOut,
    responses=problem_responses(413),
)
async def import_(
    state: StateDep,
    key: AdminKey,
    file: Annotated[
        UploadFile,
        File(
            description="TSV (id, name, synonym|synonym…; a first line '# NAME: provenance' "
            "names it) or OBO (a file name ending in .obo)"
        ),
    ],
    name: Annotated[
        str | None,
        Form(max_length=200, pattern=NO_CONTROL, description="default: the file's own name"),
    ] = None,
    url_pattern: Annotated[
        str, Form(max_length=400, pattern=URL_PATTERN, description="e.g. https://…/{id}")
    ] = "",
    activate: Annotated[bool, Form(description="link answers to it at once")] = False,
) -> VocabularyOut:
    """Import a vocabulary: it is checked (a bad file is refused with its line and field,
    and nothing is stored) and indexed, so that activating it is quick."""
    settings = state.settings
    spool = settings.artifacts / "uploads"
    spool.mkdir(parents=True, exist_ok=True)

    def store() -> StoredVocabulary:
        with tempfile.TemporaryDirectory(dir=spool) as tmp:
            path = Path(tmp) / "vocabulary"  # never the client's file name
            with open(path, "wb") as out:
                shutil.copyfileobj(file.file, out, 1 << 20)
            refused = counting_refusals(state.factory, key.key_id, "vocabulary")
            with refused, state.factory() as session:  # the row is detached when it closes
                return store_vocabularies.import_vocabulary(
                    settings,
                    session,
                    path,
                    file.filename or "vocabulary",
                    name,
                    url_pattern,
                    key.key_id,
                )

    row = await asyncio.to_thread(store)
    if activate:
        await state.models.activate_vocabulary(row.id)
    return _out(row, row.id if activate else None)


@router.get("", response_model=VocabularyList)
def list_vocabularies(
    state: StateDep,
    session: SessionDep,
    key: AnnotateKey,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> VocabularyList:
    """The imported vocabularies, newest first, and what answers link to now."""
    active = active_vocabulary_id(session)
    rows, count = store_vocabularies.list_vocabularies(session, limit, offset)
    linking = LinkingOut(**state.models.vocabularies.current.describe())
    return VocabularyList(data=[_out(r, active) for r in rows], count=count, linking=linking)


@router.get("/{vocabulary_id}", response_model=VocabularyOut, responses=problem_responses(404))
def get_vocabulary(vocabulary_id: IdPath, session: SessionDep, key: AnnotateKey) -> VocabularyOut:
    row = store_vocabularies.get_vocabulary(session, vocabulary_id)
    return _out(row, active_vocabulary_id(session))


@router.post(
    "/{vocabulary_id}/activate", response_model=LinkingOut, responses=problem_responses(404)
)
async def activate(vocabulary_id: IdPath, state: StateDep, key: AdminKey) -> LinkingOut:
    """Link answers to this vocabulary (``default``: the deployment's own, MSLM_VOCABULARY);
    its linker is built before the switch, and the other replicas follow."""
    wanted = None if vocabulary_id == DEFAULT else vocabulary_id
    linking = await state.models.activate_vocabulary(wanted)
    return LinkingOut(**linking.describe())


@router.delete(
    "/{vocabulary_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409),
)
def remove(vocabulary_id: IdPath, state: StateDep, session: SessionDep, key: AdminKey) -> None:
    """Delete an imported vocabulary that answers do not link to."""
    store_vocabularies.delete_vocabulary(state.settings, session, vocabulary_id)
