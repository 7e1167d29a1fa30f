"""A key's quotas (and the service's): jobs queued, uploads per hour. Checked before the
work is accepted; a quota used up is :class:`~store.errors.QuotaExceeded` (HTTP 429)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mslm_core.errors import ConfigError, CorpusError
from mslm_settings import Settings

from .errors import QuotaExceeded
from .tables import (
    QUEUED,
    RUNNING,
    AnnotationJob,
    Dataset,
    Evaluation,
    Job,
    NoteInput,
    RefusedUpload,
    StoredVocabulary,
    new_id,
    utcnow,
)


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


def check_work_quota(
    settings: Settings, session: Session, key_id: str | None, kind: type[AnnotationJob | Evaluation]
) -> None:
    """QuotaExceeded when ``key_id`` has MSLM_QUOTA_QUEUED_JOBS annotation jobs (or
    evaluations) queued or running: each kind of queued work has its own per-key quota."""
    if key_id is None or not settings.quota_queued_jobs:
        return
    open_work = select(func.count()).select_from(kind)
    open_work = open_work.where(kind.created_by == key_id, kind.state.in_((QUEUED, RUNNING)))
    mine = session.scalar(open_work) or 0
    if mine >= settings.quota_queued_jobs:
        what = "annotation jobs" if kind is AnnotationJob else "evaluations"
        raise QuotaExceeded(
            f"this API key has {mine} {what} queued or running, its quota "
            "(MSLM_QUOTA_QUEUED_JOBS); submit again when one has ended, or cancel one",
            60,
        )


def check_upload_quota(settings: Settings, session: Session, key_id: str | None) -> None:
    """QuotaExceeded when ``key_id`` uploaded MSLM_QUOTA_UPLOADS_PER_HOUR datasets,
    vocabularies and notes files in the last hour, those refused included; ``retry_after``:
    until the oldest of them is an hour old."""
    if key_id is None or not settings.quota_uploads_per_hour:
        return
    since = utcnow() - dt.timedelta(hours=1)
    times = [
        t
        for cls in (Dataset, StoredVocabulary, NoteInput, RefusedUpload)
        for t in session.scalars(
            select(cls.created_at).where(cls.created_by == key_id, cls.created_at > since)
        )
    ]
    if len(times) >= settings.quota_uploads_per_hour:
        wait = (min(times) - since).total_seconds()
        raise QuotaExceeded(
            f"this API key made {len(times)} uploads (datasets, vocabularies and notes files, "
            "refused ones included) in the last hour, its quota (MSLM_QUOTA_UPLOADS_PER_HOUR)",
            max(1, int(wait) + 1),
        )


@contextlib.contextmanager
def counting_refusals(
    factory: Callable[[], Session], key_id: str | None, kind: str
) -> Iterator[None]:
    """An upload read inside this block that is refused (its file cannot be read: a
    CorpusError or ConfigError) counts toward ``key_id``'s upload quota all the same; the
    refusal goes on to the caller."""
    try:
        yield
    except (CorpusError, ConfigError):
        if key_id is not None:
            with factory() as session:
                session.add(RefusedUpload(id=new_id("refused"), kind=kind, created_by=key_id))
                session.commit()
        raise
