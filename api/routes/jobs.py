"""Fine-tuning jobs: submit (202), list, status with progress and history, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from store import jobs as store_jobs
from worker.celery_app import CeleryQueue

from ..deps import IdPath, SessionDep, StateDep, TrainKey
from ..problems import V1_PROBLEMS, problem_responses
from ..schemas import JobCreate, JobList, JobOut, JobState

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=V1_PROBLEMS)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobOut,
    responses={
        200: {"description": "the job this idempotency key already created"},
        **problem_responses(404, 409),
    },
)
def submit(
    body: JobCreate,
    response: Response,
    state: StateDep,
    session: SessionDep,
    key: TrainKey,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JobOut:
    """Queue a fine-tuning job on a dataset this key sees (``dataset_id``), or on several
    mapped onto one schema (``datasets``: each with a type map and a weight). The same
    ``idempotency_key`` (body or ``Idempotency-Key`` header) from the same API key with the
    same request returns the job it created (200); with another request it is refused (409).
    Idempotency keys are per API key: another key's never matches."""
    given = body.idempotency_key or idempotency_key
    datasets = (
        [store_jobs.JobSource(d.id, d.type_map, d.weight) for d in body.datasets]
        if body.datasets is not None
        else str(body.dataset_id)
    )
    job, created = store_jobs.create_job(
        state.settings,
        session,
        CeleryQueue(state.celery),
        datasets,
        body.params(),
        body.export.model_dump(),
        given,
        key.key_id,
        key.owner,
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobOut.model_validate(job)


@router.get("", response_model=JobList)
def list_jobs(
    session: SessionDep,
    key: TrainKey,
    state: Annotated[JobState | None, Query(description="only the jobs in this state")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> JobList:
    """The jobs this key submitted (an admin key: all), newest first."""
    rows, count = store_jobs.list_jobs(session, key.owner, limit, offset, state)
    return JobList(data=[JobOut.model_validate(j) for j in rows], count=count)


@router.get("/{job_id}", response_model=JobOut, responses=problem_responses(404))
def get_job(job_id: IdPath, session: SessionDep, key: TrainKey) -> JobOut:
    return JobOut.model_validate(store_jobs.get_job(session, job_id, key.owner))


@router.post("/{job_id}/cancel", response_model=JobOut, responses=problem_responses(404, 409))
def cancel(job_id: IdPath, session: SessionDep, key: TrainKey) -> JobOut:
    """A queued job is cancelled at once; a running one stops at its next training step
    (its state turns ``cancelled`` then). A finished job cannot be cancelled (409). A train
    key cancels only its own jobs."""
    return JobOut.model_validate(store_jobs.cancel_job(session, job_id, key.owner))
