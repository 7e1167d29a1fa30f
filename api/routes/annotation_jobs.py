"""Annotation jobs (bulk): notes from an uploaded file or a warehouse query, annotated in
chunks by the workers of the ``annotate`` queue, written to a file or an OMOP ``NOTE_NLP``
table. Submit (202), list, status with progress, cancel, the error report, the output."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, Response, UploadFile, status
from fastapi.responses import StreamingResponse

from mslm_core.bundle import check_style
from mslm_core.notes import NOTE_FORMATS, formats_help
from mslm_core.render import OUTPUTS
from store import bulk
from store import models as stored_models
from store.errors import Conflict, NotFound
from store.quotas import check_upload_quota, check_work_quota, counting_refusals
from store.serving import active_model_id
from store.tables import FINAL_STATES, AnnotationJob
from worker.celery_app import CeleryQueue

from ..deps import AnnotateKey, IdPath, SessionDep, StateDep
from ..problems import V1_PROBLEMS, Problem, problem_responses
from ..schemas import (
    AnnotationJobCreate,
    AnnotationJobList,
    AnnotationJobOut,
    JobState,
    NoteError,
    NoteErrorList,
    NoteInputList,
    NoteInputOut,
)

router = APIRouter(prefix="/v1/annotation-jobs", tags=["annotation jobs"], responses=V1_PROBLEMS)


def _out(session: SessionDep, job: AnnotationJob) -> AnnotationJobOut:
    return AnnotationJobOut.model_validate(
        {
            **{k: getattr(job, k) for k in AnnotationJobOut.model_fields if k != "progress"},
            "progress": bulk.progress(session, job),
        }
    )


@router.post(
    "/inputs",
    status_code=status.HTTP_201_CREATED,
    response_model=NoteInputOut,
    responses=problem_responses(413, 429),
)
def upload_notes(
    state: StateDep,
    session: SessionDep,
    key: AnnotateKey,
    file: Annotated[
        UploadFile,
        File(description="notes, in one of the formats of `format`"),
    ],
    format: Annotated[
        str | None,
        Form(
            pattern="^(" + "|".join(NOTE_FORMATS) + ")$",
            description="the file's format, told by its name or content when not given: "
            + formats_help(),
        ),
    ] = None,
    encoding: Annotated[
        str | None,
        Form(
            max_length=40,
            pattern="^[A-Za-z0-9_.:-]+$",
            description="the text's encoding (utf-8, latin-1, cp1252, utf-16, …); else told "
            "by its byte-order mark, as UTF-8, or guessed (charset-normalizer)",
        ),
    ] = None,
) -> NoteInputOut:
    """Upload a file of notes for annotation jobs. Each note is read once; one that cannot be
    read is listed in ``problems`` (where, why) and the others are kept; ``encoding`` says how
    the file's bytes were read as text (a guessed encoding and each byte that did not decode
    are warnings among the problems: their notes are kept). A file with no readable note is
    refused (422)."""
    check_upload_quota(state.settings, session, key.key_id)
    folder = state.settings.artifacts / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        path = Path(tmp) / "notes"  # never the client's file name
        with open(path, "wb") as out:
            shutil.copyfileobj(file.file, out, 1 << 20)
        with counting_refusals(state.factory, key.key_id, "notes"):
            row = bulk.create_note_input(
                state.settings,
                session,
                path,
                file.filename or "notes",
                key.key_id,
                format,
                encoding,
            )
    return NoteInputOut.model_validate(row)


@router.get("/inputs", response_model=NoteInputList)
def list_notes(
    session: SessionDep,
    key: AnnotateKey,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> NoteInputList:
    """The notes files this key uploaded (an admin key: all), newest first."""
    rows, count = bulk.list_inputs(session, key.owner, limit, offset)
    return NoteInputList(data=[NoteInputOut.model_validate(r) for r in rows], count=count)


@router.delete(
    "/inputs/{input_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409),
)
def delete_notes(input_id: IdPath, state: StateDep, session: SessionDep, key: AnnotateKey) -> None:
    """Delete a notes file (it is patient data) that no queued or running job reads."""
    bulk.delete_note_input(state.settings, session, input_id, key.owner)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=AnnotationJobOut,
    responses=problem_responses(404, 409),
)
def submit(
    body: AnnotationJobCreate,
    response: Response,
    state: StateDep,
    session: SessionDep,
    key: AnnotateKey,
) -> AnnotationJobOut:
    """Queue an annotation job. A warehouse source or an OMOP target runs queries with the
    deployment's credentials (MSLM_WAREHOUSES): it needs an admin key."""
    warehouses = [
        part.warehouse for part in (body.source, body.output) if hasattr(part, "warehouse")
    ]
    if warehouses and "admin" not in key.scopes:
        raise Problem(403, "a warehouse source or target needs an admin key", slug="forbidden")
    known = state.settings.warehouse_map()
    for name in warehouses:
        if name not in known:  # a named resource that is not there
            raise NotFound(f"warehouse {name!r} (MSLM_WAREHOUSES names {sorted(known)})")
    source = body.source.model_dump()
    if body.source.kind == "file":
        bulk.input_of(session, body.source.input, key.owner)
    check_work_quota(state.settings, session, key.key_id, AnnotationJob)
    model_id = body.model or active_model_id(session)
    if model_id is None:
        raise Conflict("no model is served yet: name one (model) or activate one")
    options = body.options()
    if options.style is not None:  # refused now, not when a worker loads the model
        model = stored_models.get_model(session, model_id)
        check_style(stored_models.model_manifest(state.settings, model), options.style)
    if getattr(body.output, "staging", None) is not None and not (
        options.context and state.settings.context
    ):
        raise Problem(
            422,
            "output.staging needs the clinical context (context on, and MSLM_CONTEXT on this "
            "deployment): without it a negated drug would be staged as given",
            slug="validation",
        )
    if getattr(body.output, "staging", None) is not None:
        model = stored_models.get_model(session, model_id)
        if "relations" not in stored_models.model_manifest(state.settings, model):
            raise Problem(
                422,
                f"output.staging needs a model with a relation scorer (model {model_id} has "
                "none: it was trained on no corpus with relations, docs/relations.md)",
                slug="validation",
            )
    linking = state.models.vocabularies.current  # what the job links to, whatever follows
    params = {
        **options.params(),
        "context": options.context and state.settings.context,  # as this deployment runs
        "max_text_chars": state.settings.max_text_chars,
        "vocabulary": linking.vocabulary_id,  # None: the deployment's own
        "vocabulary_name": linking.linker.vocabulary.name if linking.linker else None,
    }
    job = bulk.create_annotation_job(
        session,
        model_id=model_id,
        source=source,
        output=body.output.model_dump(by_alias=True),
        params=params,
        chunk_size=body.chunk_size or state.settings.bulk_chunk_notes,
        owner=key.key_id,
    )
    CeleryQueue(state.celery).annotate(job.id)
    response.headers["Location"] = f"/v1/annotation-jobs/{job.id}"
    return _out(session, job)


@router.get("", response_model=AnnotationJobList)
def list_annotation_jobs(
    session: SessionDep,
    key: AnnotateKey,
    state: Annotated[JobState | None, Query(description="only the jobs in this state")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> AnnotationJobList:
    """The annotation jobs this key submitted (an admin key: all), newest first."""
    rows, count = bulk.list_jobs(session, key.owner, limit, offset, state)
    return AnnotationJobList(data=[_out(session, j) for j in rows], count=count)


@router.get("/{job_id}", response_model=AnnotationJobOut, responses=problem_responses(404))
def get_annotation_job(job_id: IdPath, session: SessionDep, key: AnnotateKey) -> AnnotationJobOut:
    return _out(session, bulk.get_job(session, job_id, key.owner))


@router.post(
    "/{job_id}/cancel", response_model=AnnotationJobOut, responses=problem_responses(404, 409)
)
def cancel(job_id: IdPath, session: SessionDep, key: AnnotateKey) -> AnnotationJobOut:
    """Queued chunks are dropped at once; chunks being annotated finish and commit (a chunk
    is written whole or not at all), then the job is ``cancelled``. What was committed stays."""
    return _out(session, bulk.cancel(session, job_id, key.owner))


@router.delete(
    "/{job_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problem_responses(404, 409)
)
def delete_annotation_job(
    job_id: IdPath, state: StateDep, session: SessionDep, key: AnnotateKey
) -> None:
    """Delete a finished job with its output files (NOTE_NLP rows it wrote stay)."""
    bulk.delete_annotation_job(state.settings, session, job_id, key.owner)


@router.get("/{job_id}/errors", response_model=NoteErrorList, responses=problem_responses(404))
def errors(job_id: IdPath, state: StateDep, session: SessionDep, key: AnnotateKey) -> NoteErrorList:
    """Every note that was not annotated (unreadable, NULL, over-long, failed), with its id
    and the reason, and every chunk that failed as a whole."""
    job = bulk.get_job(session, job_id, key.owner)
    report = bulk.error_report(session, state.settings, job)
    return NoteErrorList(data=[NoteError.model_validate(e) for e in report], count=len(report))


@router.get(
    "/{job_id}/output",
    response_class=StreamingResponse,
    responses={
        **problem_responses(404, 409),
        200: {
            "description": "the annotations: JSONL (one note per line: id, entities), a BioC "
            "JSON collection, or PubTator text — the job's output format",
            "content": {
                m: {"schema": {"type": "string"}}
                for m in dict.fromkeys(o.media_type for o in OUTPUTS.values())
            },
        },
    },
)
def output(job_id: IdPath, state: StateDep, session: SessionDep, key: AnnotateKey) -> Response:
    """The job's file output, notes in input order, once the job has ended (a cancelled job:
    the chunks it committed)."""
    job = bulk.get_job(session, job_id, key.owner)
    if job.output.get("kind") != "file":
        raise Conflict(f"annotation job {job_id} writes to a table, not a file")
    if job.state not in FINAL_STATES:
        raise Conflict(f"annotation job {job_id} is {job.state}: its output is not complete")
    out = OUTPUTS[job.output.get("format", "jsonl")]
    parts = bulk.part_paths(state.settings, job.id, job.output.get("format", "jsonl"))
    headers = {"Content-Disposition": f'attachment; filename="{job.id}.{out.suffix}"'}
    return StreamingResponse(
        out.document(job.model_id, parts), media_type=out.media_type, headers=headers
    )
