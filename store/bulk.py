"""Bulk annotation in the store: note files, annotation jobs, their chunks and every state
change of them, each one atomic SQL statement (several workers and reapers race):

    job    queued ──claim_plan──► running ──plan──► (chunks queued) ── last chunk final ──►
           succeeded | failed | cancelled
    chunk  queued ──claim──► running ──finish──► succeeded | failed      (cancel: cancelled)

A job while it is planned and each chunk are leases (``store.leases``: ``PLANNING``,
``CHUNK``): a worker that dies stops their heartbeat and the reaper queues them again (a
chunk's writes are idempotent) or fails them after MSLM_MAX_ATTEMPTS.

A chunk is the unit of commit: its notes are written in one transaction of the target (rows
of this job for these notes replaced) or as one part file renamed into place, then the chunk
is marked succeeded. Running it twice writes the same result once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, func, select, update
from sqlalchemy.orm import Session

from mslm_core.bundle import sha256_file
from mslm_core.errors import ConfigError
from mslm_core.notes import Note, NoteProblem, NotesSource, prepare_notes, read_notes
from mslm_core.render import OUTPUTS
from mslm_settings import Settings

from . import leases
from .access import get_owned, owned, owned_by, page
from .db import rowcount
from .errors import Conflict, NotFound
from .files import IdSet, record, shown_name, staged
from .leases import CHUNK, PLANNING
from .tables import (
    CANCELLED,
    FAILED,
    FINAL_STATES,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    AnnotationChunk,
    AnnotationJob,
    Model,
    NoteInput,
    new_id,
    utcnow,
)

#: Errors kept per chunk in the job's report (the count is always exact).
ERRORS_PER_CHUNK = 1000
#: The most chunks a job is cut into (a chunk_size of 1 made 20,000 chunks of 20,000 notes):
#: past it, consecutive chunks are merged.
MAX_CHUNKS = 1000
#: The chunks of one job waiting in the broker or running at once: the others are released
#: as these end, so that jobs share the workers in turns and a cancelled job leaves at most
#: this many messages behind.
WINDOW = 8
#: A notes file whose first this many entries cannot be read is refused then, unread further.
UNREADABLE_FIRST = 1000
#: The file outputs: mslm_core.render.OUTPUTS (the API's schema and the client follow it too)
OUTPUT_FORMATS = tuple(OUTPUTS)


# -- paths -------------------------------------------------------------------------------------
def input_dir(settings: Settings, input_id: str) -> Path:
    return settings.artifacts / "bulk" / "inputs" / input_id


def job_dir(settings: Settings, job_id: str) -> Path:
    return settings.artifacts / "bulk" / "jobs" / job_id


def part_path(settings: Settings, job_id: str, seq: int, fmt: str) -> Path:
    return job_dir(settings, job_id) / "parts" / f"{seq:07d}.{OUTPUTS[fmt].part_suffix}"


def part_paths(settings: Settings, job_id: str, fmt: str) -> list[Path]:
    """The part files a job has written, in chunk order."""
    parts = job_dir(settings, job_id) / "parts"
    return sorted(parts.glob(f"*.{OUTPUTS[fmt].part_suffix}"))


# -- note files --------------------------------------------------------------------------------
def create_note_input(
    settings: Settings,
    session: Session,
    spooled: Path,
    filename: str,
    owner: str | None,
    format: str | None = None,
    encoding: str | None = None,
) -> NoteInput:
    """Read an uploaded notes file (``mslm_core.notes``) into ``notes.jsonl`` (id, text; one
    note per line, in file order) and record it; notes that cannot be read are kept as its
    problems. A text file is read in ``encoding``, else in the one ``mslm_core.charsets``
    tells (recorded; a guess and each undecodable byte are warnings among the problems). A
    file with no readable note is refused (ConfigError)."""
    filename = shown_name(filename, "notes")
    parent = settings.artifacts / "bulk" / "inputs"
    input_id = new_id("notes")
    with staged(parent) as staging:
        notes = refused = 0
        ready = prepare_notes(spooled, staging / "utf8", filename, format, encoding)
        fmt, told = ready.format, ready.encoding
        # the first ERRORS_PER_CHUNK problems, the rest counted
        problems = _encoding_warnings(ready)
        seen = IdSet(staging / "ids.sqlite")
        with open(staging / "notes.jsonl", "w", encoding="utf-8") as out:
            for item in read_notes(ready.path, fmt, settings.max_text_chars):
                if isinstance(item, Note) and not seen.add(item.id):
                    item = NoteProblem(f"note {item.id}", "a second note with this id", item.id)
                if isinstance(item, Note):
                    out.write(json.dumps({"id": item.id, "text": item.text}, ensure_ascii=False))
                    out.write("\n")
                    notes += 1
                    continue
                refused += 1
                if len(problems) < ERRORS_PER_CHUNK:
                    problems.append({"where": item.where, "reason": item.reason, "id": item.id})
                if notes == 0 and refused >= UNREADABLE_FIRST:
                    break  # not a notes file of this format: said now, not after reading it all
        seen.close()
        (staging / "ids.sqlite").unlink(missing_ok=True)
        (staging / "utf8").unlink(missing_ok=True)
        if notes == 0:
            real = [p for p in problems if not p.get("warning")]
            first = f": {real[0]['where']}: {real[0]['reason']}" if real else ""
            many = f" (the first {refused:,} could not)" if refused >= UNREADABLE_FIRST else ""
            raise ConfigError(f"{filename}: no note could be read as {fmt}{many}{first}")
        target = input_dir(settings, input_id)
        row = NoteInput(
            id=input_id,
            filename=filename,
            format=fmt,
            path=str(target.relative_to(settings.artifacts)),
            bytes=spooled.stat().st_size,
            sha256=sha256_file(spooled),
            notes=notes,
            problems=problems[:ERRORS_PER_CHUNK],
            encoding=None if told is None else told.to_json(),
            created_by=owner,
        )
        staging.rename(target)
    record(session, row, target)
    return row


def _encoding_warnings(ready: NotesSource) -> list[dict[str, Any]]:
    """Warnings of how a file was decoded: a guessed encoding, each byte that did not decode
    (its note is kept, the byte read as U+FFFD)."""
    told, undecodable, count = ready.encoding, ready.undecodable, ready.undecodable_count
    out: list[dict[str, Any]] = []
    if told is None:
        return out
    if told.detected_by == "charset-normalizer":
        reason = (
            f"read as {told.name}, told by charset-normalizer (confidence {told.confidence}); "
            "upload it again with its encoding if it is another"
        )
        out.append({"where": "file", "reason": reason, "id": None, "warning": True})
    for u in undecodable:
        reason = f"byte {u.byte:,}: not {told.name} (read as U+FFFD)"
        out.append({"where": f"line {u.line}", "reason": reason, "id": None, "warning": True})
    if count > len(undecodable):
        more = f"{count - len(undecodable):,} more bytes that are not {told.name}"
        out.append({"where": "file", "reason": more, "id": None, "warning": True})
    return out


def notes_file(settings: Settings, row: NoteInput) -> Path:
    return settings.artifacts / row.path / "notes.jsonl"


def _open_jobs_on(session: Session, input_id: str) -> list[str]:
    rows = session.execute(
        select(AnnotationJob.id, AnnotationJob.source).where(
            AnnotationJob.state.in_((QUEUED, RUNNING))
        )
    ).all()
    return [
        j for j, source in rows if source.get("kind") == "file" and source.get("input") == input_id
    ]


def delete_note_input(
    settings: Settings, session: Session, input_id: str, owner: str | None
) -> None:
    """Delete a notes file (patient data: keep it no longer than its jobs need it) that no
    queued or running job reads; finished jobs keep their records and outputs."""
    row = session.get(NoteInput, input_id, with_for_update=True)  # see create_annotation_job
    if row is None or not owned(row, owner):
        raise NotFound(f"notes file {input_id}")
    busy = _open_jobs_on(session, input_id)
    if busy:
        raise Conflict(f"notes file {input_id} is read by annotation job {busy[0]}, still open")
    folder = settings.artifacts / row.path
    session.delete(row)
    session.commit()
    shutil.rmtree(folder, ignore_errors=True)


def delete_annotation_job(
    settings: Settings, session: Session, job_id: str, owner: str | None
) -> None:
    """Delete a finished annotation job, its chunks and its output files (rows it wrote to a
    warehouse stay: they are the warehouse's)."""
    job = get_job(session, job_id, owner)
    if job.state not in FINAL_STATES:
        raise Conflict(f"annotation job {job_id} is {job.state}: cancel it first")
    session.execute(delete(AnnotationChunk).where(AnnotationChunk.job_id == job_id))
    session.delete(job)
    session.commit()
    shutil.rmtree(job_dir(settings, job_id), ignore_errors=True)


# -- jobs --------------------------------------------------------------------------------------
def create_annotation_job(
    session: Session,
    *,
    model_id: str,
    source: dict[str, Any],
    output: dict[str, Any],
    params: dict[str, Any],
    chunk_size: int,
    owner: str | None,
) -> AnnotationJob:
    now = utcnow()
    if session.get(Model, model_id) is None:
        raise NotFound(f"model {model_id}")
    # a file's row is locked until the job is recorded: a delete of it waits, then sees the job
    if (
        source.get("kind") == "file"
        and session.get(NoteInput, source["input"], with_for_update=True) is None
    ):
        raise NotFound(f"notes file {source['input']}")
    job = AnnotationJob(
        id=new_id("ann"),
        model_id=model_id,
        source=source,
        output=output,
        params=params,
        chunk_size=chunk_size,
        created_by=owner,
        created_at=now,
        published_at=now,
    )
    session.add(job)
    session.commit()
    return job


def list_jobs(
    session: Session, owner: str | None, limit: int, offset: int, state: str | None = None
) -> tuple[list[AnnotationJob], int]:
    """One page of the annotation jobs ``owner`` sees (None: all), newest first, and how many
    there are; ``state`` narrows them to one state."""
    where: list[ColumnElement[bool]] = owned_by(AnnotationJob, owner)
    if state is not None:
        where.append(AnnotationJob.state == state)
    return page(session, AnnotationJob, limit, offset, where)


def list_inputs(
    session: Session, owner: str | None, limit: int, offset: int
) -> tuple[list[NoteInput], int]:
    """One page of the notes files ``owner`` sees (None: all), newest first, and how many
    there are."""
    return page(session, NoteInput, limit, offset, owned_by(NoteInput, owner))


def get_job(session: Session, job_id: str, owner: str | None) -> AnnotationJob:
    return get_owned(session, AnnotationJob, job_id, owner, "annotation job")


def cancel(session: Session, job_id: str, owner: str | None) -> AnnotationJob:
    """Cancel an annotation job ``owner`` sees (:func:`request_cancel`) and return it as it
    is now; Conflict when it had already succeeded or failed."""
    job = get_job(session, job_id, owner)
    if job.state in (SUCCEEDED, FAILED):
        raise Conflict(f"annotation job {job_id} already {job.state}")
    request_cancel(session, job_id)
    session.refresh(job)
    return job


def claim_plan(session: Session, job_id: str, worker: str) -> bool:
    """queued → running for the planner ``worker``; False when not queued (taken, cancelled)."""
    started = func.coalesce(AnnotationJob.started_at, utcnow())
    return leases.claim(session, PLANNING, job_id, worker, started_at=started)


def plan_beat(session: Session, job_id: str, worker: str) -> tuple[bool, bool]:
    """The planner's heartbeat: (it still holds the job, a cancel was asked for)."""
    ours = leases.beat(session, PLANNING, job_id, worker)
    cancelled = session.scalar(
        select(AnnotationJob.cancel_requested).where(AnnotationJob.id == job_id)
    )
    return ours, bool(cancelled)


def cancel_planning(session: Session, job_id: str, worker: str) -> None:
    """A job cancelled while it was planned: it ends ``cancelled``, with no chunk."""
    leases.finish(session, PLANNING, job_id, worker, CANCELLED)


def save_plan(
    session: Session,
    job_id: str,
    worker: str,
    ranges: list[tuple[int, int, int]],
    problems: list[dict[str, Any]] | None = None,
) -> bool:
    """Record the chunks ``(first, last, notes)`` of a job the planner ``worker`` holds, in one
    transaction with ``planned_at``; a job with no note succeeds at once. False (nothing
    written) when the claim was lost."""
    now = utcnow()
    ranges = bounded(ranges)
    total = sum(n for _, _, n in ranges)
    result = session.execute(
        update(AnnotationJob)
        .where(*PLANNING.held(job_id, worker))
        .values(
            planned_at=now,
            total=total,
            chunks=len(ranges),
            heartbeat_at=now,
            problems=(problems or [])[:ERRORS_PER_CHUNK],
        )
    )
    if rowcount(result) != 1:
        session.rollback()
        return False
    session.add_all(
        AnnotationChunk(
            job_id=job_id,
            seq=seq,
            first=first,
            last=last,
            notes=n,
            published_at=now if seq < WINDOW else None,  # the others: released in turn
        )
        for seq, (first, last, n) in enumerate(ranges)
    )
    session.commit()
    complete_if_done(session, job_id)
    return True


def released(session: Session, job_id: str) -> list[int]:
    """The chunks of a job released to the broker so far, in order."""
    return list(
        session.scalars(
            select(AnnotationChunk.seq)
            .where(AnnotationChunk.job_id == job_id, AnnotationChunk.published_at.is_not(None))
            .order_by(AnnotationChunk.seq)
        )
    )


def bounded(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The chunks ``(first, last, notes)``, consecutive ones merged so that there are at most
    :data:`MAX_CHUNKS`."""
    if len(ranges) <= MAX_CHUNKS:
        return ranges
    per = -(-len(ranges) // MAX_CHUNKS)
    groups = [ranges[i : i + per] for i in range(0, len(ranges), per)]
    return [(g[0][0], g[-1][1], sum(n for _, _, n in g)) for g in groups]


def release(session: Session, job_id: str | None = None) -> list[tuple[str, int]]:
    """Release the next chunks of ``job_id`` (None: of every running job) so that each has up
    to :data:`WINDOW` chunks published and not final: (job, seq) of each released, to be
    published. Safe to call from several workers at once (a chunk is released once)."""
    running = select(AnnotationJob.id).where(AnnotationJob.state == RUNNING)
    jobs = [job_id] if job_id is not None else list(session.scalars(running))
    out: list[tuple[str, int]] = []
    for job in jobs:
        in_flight = session.scalar(
            select(func.count())
            .select_from(AnnotationChunk)
            .where(
                AnnotationChunk.job_id == job,
                AnnotationChunk.state.in_((QUEUED, RUNNING)),
                AnnotationChunk.published_at.is_not(None),
            )
        )
        room = WINDOW - int(in_flight or 0)
        if room <= 0:
            continue
        waiting = session.scalars(
            select(AnnotationChunk.seq)
            .where(
                AnnotationChunk.job_id == job,
                AnnotationChunk.state == QUEUED,
                AnnotationChunk.published_at.is_(None),
            )
            .order_by(AnnotationChunk.seq)
            .limit(room)
        ).all()
        for seq in waiting:
            won = session.execute(
                update(AnnotationChunk)
                .where(
                    AnnotationChunk.job_id == job,
                    AnnotationChunk.seq == seq,
                    AnnotationChunk.published_at.is_(None),
                )
                .values(published_at=utcnow())
            )
            if rowcount(won) == 1:
                out.append((job, seq))
    session.commit()
    return out


def fail_job(session: Session, job_id: str, reason: str) -> None:
    """A job that cannot go on (its source unreadable, its model gone): failed, with every
    chunk not yet final cancelled."""
    now = utcnow()
    session.execute(
        update(AnnotationChunk)
        .where(AnnotationChunk.job_id == job_id, AnnotationChunk.state.in_((QUEUED, RUNNING)))
        .values(state=CANCELLED, finished_at=now)
    )
    session.execute(
        update(AnnotationJob)
        .where(AnnotationJob.id == job_id, AnnotationJob.state.in_((QUEUED, RUNNING)))
        .values(state=FAILED, finished_at=now, error=reason)
    )
    session.commit()


def request_cancel(session: Session, job_id: str) -> None:
    """Queued chunks are cancelled at once; running ones finish the chunk they are on (a
    chunk is committed whole or not at all); the job ends ``cancelled`` after them."""
    now = utcnow()
    session.execute(
        update(AnnotationJob)
        .where(AnnotationJob.id == job_id, AnnotationJob.state.in_((QUEUED, RUNNING)))
        .values(cancel_requested=True)
    )
    session.execute(
        update(AnnotationJob)
        .where(AnnotationJob.id == job_id, AnnotationJob.state == QUEUED)
        .values(state=CANCELLED, finished_at=now)
    )
    session.execute(
        update(AnnotationChunk)
        .where(AnnotationChunk.job_id == job_id, AnnotationChunk.state == QUEUED)
        .values(state=CANCELLED, finished_at=now)
    )
    session.commit()
    complete_if_done(session, job_id)


def complete_if_done(session: Session, job_id: str) -> str | None:
    """A planned, running job whose chunks are all final ends: ``cancelled`` when a cancel was
    asked for, ``failed`` when a chunk failed, else ``succeeded``. Returns the new state, or
    None when the job goes on (or another process ended it first)."""
    chunk = AnnotationChunk
    open_chunks = exists().where(chunk.job_id == job_id, chunk.state.in_((QUEUED, RUNNING)))
    failed_chunks = exists().where(chunk.job_id == job_id, chunk.state == FAILED)
    job = session.get(AnnotationJob, job_id)
    if job is None:
        return None
    session.refresh(job)
    state = CANCELLED if job.cancel_requested else SUCCEEDED
    if state == SUCCEEDED and session.scalar(select(failed_chunks)):
        state = FAILED
    result = session.execute(
        update(AnnotationJob)
        .where(
            AnnotationJob.id == job_id,
            AnnotationJob.state == RUNNING,
            AnnotationJob.planned_at.is_not(None),
            ~open_chunks,
        )
        .values(
            state=state,
            finished_at=utcnow(),
            error="a chunk failed: see its error" if state == FAILED else None,
        )
    )
    session.commit()
    return state if rowcount(result) == 1 else None


def claim_chunk(session: Session, job_id: str, seq: int, worker: str) -> bool:
    """queued → running for ``worker``, unless the job was cancelled or has ended."""
    live_job = exists().where(
        AnnotationJob.id == job_id,
        AnnotationJob.state == RUNNING,
        AnnotationJob.cancel_requested.is_(False),
    )
    return leases.claim(session, CHUNK, (job_id, seq), worker, live_job)


def chunk_beat(session: Session, job_id: str, seq: int, worker: str, done: int) -> bool:
    """Heartbeat with the notes done so far; False when the claim was lost."""
    return leases.beat(session, CHUNK, (job_id, seq), worker, done=done)


def finish_chunk(
    session: Session,
    job_id: str,
    seq: int,
    worker: str,
    *,
    state: str,
    done: int,
    entities: int,
    seconds: float,
    errors: list[dict[str, Any]],
    error: str | None = None,
) -> bool:
    """The chunk ends ``state`` (the job with it when it was its last); False when the claim
    was lost."""
    won = leases.finish(
        session,
        CHUNK,
        (job_id, seq),
        worker,
        state,
        done=done,
        entities=entities,
        seconds=seconds,
        errors=errors[:ERRORS_PER_CHUNK],
        error=error,
    )
    if won:
        complete_if_done(session, job_id)
    return won


# -- progress and reports ----------------------------------------------------------------------
def progress(session: Session, job: AnnotationJob) -> dict[str, Any]:
    """Notes done / total, chunks by state, entities, notes not annotated (unreadable, NULL,
    over-long, failed: the error report's notes), notes per second since the job started and
    the time left at that rate."""
    c = AnnotationChunk
    by_state = dict(
        session.execute(
            select(c.state, func.count()).where(c.job_id == job.id).group_by(c.state)
        ).all()
    )
    done, entities = session.execute(
        select(func.coalesce(func.sum(c.done), 0), func.coalesce(func.sum(c.entities), 0)).where(
            c.job_id == job.id, c.state.in_((SUCCEEDED, RUNNING))
        )
    ).one()
    committed = session.scalar(
        select(func.coalesce(func.sum(c.notes), 0)).where(c.job_id == job.id, c.state == SUCCEEDED)
    )
    errors = warnings = 0
    for listed in session.scalars(select(c.errors).where(c.job_id == job.id, c.state == SUCCEEDED)):
        for e in listed or []:  # a warning's note was annotated: its language, say
            warnings += bool(e.get("warning"))
            errors += not e.get("warning")
    errors += sum(not p.get("warning") for p in job.problems or [])  # what the plan could not read
    end = job.finished_at or utcnow()
    elapsed = (end - job.started_at).total_seconds() if job.started_at else 0.0
    rate = (int(committed or 0) / elapsed) if elapsed > 0 else 0.0
    remaining = (job.total or 0) - int(committed or 0)
    eta = None
    if job.state == RUNNING and rate > 0 and job.total is not None:
        eta = round(remaining / rate, 1)
    return {
        "total": job.total,
        "done": int(done or 0),
        "committed": int(committed or 0),
        "failed_notes": errors,
        "other_language_notes": warnings,
        "entities": int(entities or 0),
        "chunks": {s: int(by_state.get(s, 0)) for s in (QUEUED, RUNNING, *FINAL_STATES)},
        "notes_per_second": round(rate, 2),
        "elapsed_seconds": round(elapsed, 1),
        "eta_seconds": eta,
    }


def error_report(session: Session, settings: Settings, job: AnnotationJob) -> list[dict[str, Any]]:
    """Every note that was not annotated, with its id and why (what the plan could not read
    first: a file's unreadable notes, a query's rows without an id), then every chunk that
    failed as a whole; and the notes annotated with a warning (``warning``: written in another
    language than the model's)."""
    out: list[dict[str, Any]] = []
    out += list(job.problems or [])
    chunks = session.execute(
        select(AnnotationChunk.seq, AnnotationChunk.errors, AnnotationChunk.error)
        .where(AnnotationChunk.job_id == job.id)
        .order_by(AnnotationChunk.seq)
    ).all()
    for seq, errors, error in chunks:
        out += [{**e, "chunk": seq} for e in errors or []]
        if error:
            out.append({"note_id": None, "chunk": seq, "reason": error})
    return out


def claimed_job(session: Session, job_id: str) -> AnnotationJob:
    """The annotation job a worker has just claimed (its plan or one of its chunks)."""
    job = session.get(AnnotationJob, job_id)
    if job is None:
        raise NotFound(f"annotation job {job_id}")
    return job


def claimed_chunk(session: Session, job_id: str, seq: int) -> tuple[AnnotationJob, AnnotationChunk]:
    """The chunk a worker has just claimed, and its job."""
    chunk = session.get(AnnotationChunk, (job_id, seq))
    if chunk is None:
        raise NotFound(f"chunk {seq} of annotation job {job_id}")
    return claimed_job(session, job_id), chunk


def find_input(session: Session, input_id: str) -> NoteInput | None:
    """The notes file, whoever owns it (a job's source); None when it was deleted."""
    return session.get(NoteInput, input_id)


def input_of(session: Session, input_id: str, owner: str | None) -> NoteInput:
    try:
        return get_owned(session, NoteInput, input_id, owner, "notes file")
    except NotFound:
        raise NotFound(f"notes file {input_id}") from None
