"""Annotation jobs on the workers (Celery-free, so tests call these directly).

``run_plan``: claim the job, list its notes' ids (a warehouse query, paged by id) or the
byte ranges of its uploaded file, cut them into chunks, record them with the plan in one
transaction, publish a message per chunk. ``run_chunk``: claim one chunk, read its notes,
annotate them with the job's model (loaded once per worker process), write the chunk's
output in one transaction of the target (OMOP ``NOTE_NLP``: this job's rows for these notes
replaced, so a chunk run twice leaves its rows once) or as one part file renamed into place,
then mark the chunk done. A note that cannot be read or annotated is recorded with its id
and reason, and the chunk goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from mslm_core import __version__, omop
from mslm_core.errors import MSLMError
from mslm_core.facts import facts_of
from mslm_core.language import other_language
from mslm_core.pipeline import AnnotateOptions, AnnotationPipeline
from mslm_core.text import character_problem
from mslm_core.types import Entity
from mslm_settings import Settings
from store import bulk
from store.db import session_factory
from store.pipeline import context_engine, load_pipeline
from store.tables import (
    FAILED,
    SUCCEEDED,
    AnnotationJob,
    utcnow,
)

from .celery_app import worker_name

log = logging.getLogger(__name__)

#: Notes annotated per engine call inside a chunk; the heartbeat and the cancel check run
#: between calls.
BATCH_NOTES = 32

Publish = Callable[[str, int], None]


# -- sources -----------------------------------------------------------------------------------
@dataclass
class Row:
    """A note as read: ``text`` None with ``problem`` when it cannot be annotated."""

    note_id: str
    text: str | None
    problem: str | None = None


class FileSource:
    """An uploaded notes file: chunks are byte ranges of its ``notes.jsonl``; the notes it
    could not read when it was uploaded go to the job's error report."""

    def __init__(self, path: Path, problems: list[dict[str, Any]] | None = None):
        self.path = path
        self.problems = [
            {"note_id": p.get("id"), "where": p["where"], "reason": p["reason"]}
            | ({"warning": True} if p.get("warning") else {})
            for p in problems or []
        ]

    def plan(self, chunk_size: int) -> tuple[list[tuple[int, int, int]], list[dict[str, Any]]]:
        ranges: list[tuple[int, int, int]] = []
        with open(self.path, "rb") as handle:
            start = pos = 0
            n = 0
            for line in handle:
                pos += len(line)
                n += 1
                if n == chunk_size:
                    ranges.append((start, pos, n))
                    start, n = pos, 0
            if n:
                ranges.append((start, pos, n))
        return ranges, self.problems

    def cancel(self) -> None:
        """Counting a file's lines takes seconds: it is not cut short."""

    def read(self, first: int, last: int) -> Iterator[Row]:
        with open(self.path, "rb") as handle:
            handle.seek(first)
            data = handle.read(last - first)
        for line in data.decode("utf-8").splitlines():
            note = json.loads(line)  # written by the store: one valid object per line
            yield Row(str(note["id"]), note["text"])


def _read_only(conn: Any, timeout_s: float = 0) -> None:
    """A read-only transaction; with ``timeout_s``, a statement in it is cancelled by the
    server after that long (MSLM_WAREHOUSE_STATEMENT_TIMEOUT_SECONDS)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SET TRANSACTION READ ONLY"))
        if timeout_s:
            conn.execute(text(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}"))


class SqlSource:
    """A warehouse query returning ``note_id, note_text``; chunks are ranges of note ids, read
    in read-only transactions."""

    def __init__(self, engine: Engine, query: str, timeout_s: float = 0, max_chars: int = 0):
        """``timeout_s``: the statements' timeout (0: none); ``max_chars``: a longer note is
        not fetched, only its length (0: no limit)."""
        self.engine, self.query = engine, query.strip().rstrip(";")
        self.timeout_s, self.max_chars = timeout_s, max_chars
        self._running: Any = None  # the DBAPI connection of the query being planned

    def cancel(self) -> None:
        """Cancel the query the plan is running (a cancel of its job), from another thread."""
        running = self._running
        if running is not None and hasattr(running, "cancel"):
            with contextlib.suppress(Exception):
                running.cancel()

    def plan(self, chunk_size: int) -> tuple[list[tuple[int, int, int]], list[dict[str, Any]]]:
        ranges: list[tuple[int, int, int]] = []
        problems: list[dict[str, Any]] = []
        sql = text(f"SELECT q.note_id FROM ({self.query}) AS q ORDER BY q.note_id")
        with self.engine.connect() as conn:
            _read_only(conn, self.timeout_s)
            self._running = conn.connection.dbapi_connection
            result = conn.execution_options(stream_results=True, yield_per=10_000).execute(sql)
            first = last = None
            n = 0
            previous = None
            for (note_id,) in result:
                if note_id is None:
                    if len(problems) < bulk.ERRORS_PER_CHUNK:
                        problems.append({"note_id": None, "reason": "a row with no note_id"})
                    continue
                if isinstance(note_id, bool) or not isinstance(note_id, int):
                    raise MSLMError(
                        f"the query's note_id is {type(note_id).__name__}, not an integer "
                        "(NOTE.note_id): cast it in the query"
                    )
                if note_id == previous:
                    if len(problems) < bulk.ERRORS_PER_CHUNK:
                        problems.append(
                            {"note_id": str(note_id), "reason": "note_id repeated: annotated once"}
                        )
                    continue
                previous = note_id
                if first is None:
                    first = note_id
                last = note_id
                n += 1
                if n == chunk_size:
                    ranges.append((first, last, n))
                    first, n = None, 0
            if n and first is not None and last is not None:
                ranges.append((first, last, n))
        return ranges, problems

    def read(self, first: int, last: int) -> Iterator[Row]:
        # a note over the limit is not sent by the server: its length says it is over
        sql = text(
            "SELECT q.note_id, CASE WHEN length(q.note_text) <= :limit THEN q.note_text END, "
            f"length(q.note_text) FROM ({self.query}) AS q "
            "WHERE q.note_id BETWEEN :first AND :last ORDER BY q.note_id"
        )
        limit = self.max_chars or 2**31 - 1
        with self.engine.connect() as conn:
            _read_only(conn, self.timeout_s)
            rows = conn.execute(sql, {"first": first, "last": last, "limit": limit}).all()
        previous = None
        for note_id, note_text, length in rows:
            if note_id == previous:
                continue
            previous = note_id
            if length is not None and length > limit:
                yield Row(
                    str(note_id), None, f"note_text has {length} characters; the limit is {limit}"
                )
            elif note_text is None:
                yield Row(str(note_id), None, "note_text is NULL")
            elif isinstance(note_text, bytes | memoryview):
                try:
                    yield Row(str(note_id), bytes(note_text).decode("utf-8"))
                except UnicodeDecodeError as exc:
                    yield Row(str(note_id), None, f"note_text is not UTF-8 (byte {exc.start})")
            elif not isinstance(note_text, str):
                yield Row(str(note_id), None, f"note_text is {type(note_text).__name__}")
            else:
                yield Row(str(note_id), note_text)


# -- sinks -------------------------------------------------------------------------------------
class FileSink:
    """One part file per chunk (written aside, renamed into place: a chunk run twice leaves
    one part)."""

    def __init__(self, settings: Settings, job: AnnotationJob):
        self.settings, self.job = settings, job
        self.format = job.output.get("format", "jsonl")

    def write(self, seq: int, notes: list[tuple[str, str, list[Entity]]]) -> None:
        from mslm_core.render import OUTPUTS

        path = bulk.part_path(self.settings, self.job.id, seq, self.format)
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = [n for n, _, _ in notes]
        texts = [t for _, t, _ in notes]
        entities = [e for _, _, e in notes]
        body = OUTPUTS[self.format].part(ids, texts, entities, self.job.model_id, self.job.id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, path)


class OmopSink:
    """Rows of an OMOP CDM v5.4 ``NOTE_NLP`` table (PostgreSQL). Per chunk, one transaction:
    an advisory lock on the table (writers take turns for ``note_nlp_id``), this job's rows
    for the chunk's notes deleted, the new rows inserted with ids after the table's largest.

    With ``staging`` (a schema holding the CDM's ``DRUG_EXPOSURE`` and ``MEASUREMENT``
    tables), the facts too (:func:`mslm_core.omop.drug_exposure_row`,
    :func:`~mslm_core.omop.measurement_row`): the person, date and visit from the note's
    ``NOTE`` row (beside ``NOTE_NLP``), and each staged row's ``NOTE_NLP`` rows in the
    schema's ``nlp_fact_source`` table (made when missing) — which also tells this job's staged
    rows apart when a chunk is written again."""

    def __init__(
        self,
        engine: Engine,
        table: str,
        system: str,
        staging: dict[str, Any] | None = None,
    ):
        if engine.dialect.name != "postgresql":
            raise MSLMError(
                f"an OMOP target must be PostgreSQL (this warehouse is {engine.dialect.name})"
            )
        self.engine, self.table, self.system = engine, _qualified(table), system
        schema = self.table.rpartition(".")[0]
        self.vocab = f"{schema}." if schema else ""
        self._concepts: dict[tuple[str, str], tuple[int, int]] = {}
        self.section_ids = self._section_ids()
        self.staging = staging
        if staging is not None:
            self.stage = f"{_qualified(staging['schema'])}."
            self.all_drugs = staging.get("drugs") == "all"
            self._check_staging()

    def _has_table(self, conn: Any, name: str) -> bool:
        return conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None

    def _check_staging(self) -> None:
        with self.engine.begin() as conn:
            wanted = [f"{self.vocab}note", *(f"{self.stage}{t}" for t in STAGED)]
            missing = [name for name in wanted if not self._has_table(conn, name)]
            if missing:
                raise MSLMError(
                    f"staging: no table {', '.join(missing)} in the warehouse (the CDM v5.4 "
                    "DDL's DRUG_EXPOSURE and MEASUREMENT, and the NOTE table beside NOTE_NLP)"
                )
            conn.execute(
                text(omop.PROVENANCE_DDL.format(table=f"{self.stage}{omop.PROVENANCE_TABLE}"))
            )

    def _section_ids(self) -> dict[str, int]:
        codes = omop.SECTION_LOINC
        with self.engine.connect() as conn:
            if not self._has_table(conn, f"{self.vocab}concept"):
                return {}
            rows = conn.execute(
                text(
                    f"SELECT concept_code, concept_id FROM {self.vocab}concept "
                    "WHERE vocabulary_id = 'LOINC' AND concept_code = ANY(:codes)"
                ),
                {"codes": list(codes.values())},
            ).all()
        by_code = {code: int(cid) for code, cid in rows}
        return {section: by_code[code] for section, code in codes.items() if code in by_code}

    def _lookup(self, conn: Any, pairs: set[tuple[str, str]]) -> None:
        wanted = sorted(pairs - self._concepts.keys())
        if not wanted:
            return
        for pair in wanted:
            self._concepts[pair] = (0, 0)
        if not self._has_table(conn, f"{self.vocab}concept"):
            return
        relationship = self._has_table(conn, f"{self.vocab}concept_relationship")
        maps_to = (
            f"(SELECT r.concept_id_2 FROM {self.vocab}concept_relationship r "
            "WHERE r.concept_id_1 = c.concept_id AND r.relationship_id = 'Maps to' "
            "AND r.invalid_reason IS NULL ORDER BY r.concept_id_2 LIMIT 1)"
            if relationship
            else "NULL"
        )
        rows = conn.execute(
            text(
                f"SELECT c.vocabulary_id, c.concept_code, c.concept_id, c.standard_concept, "
                f"{maps_to} FROM {self.vocab}concept c "
                "WHERE c.vocabulary_id = ANY(:vocabularies) AND c.concept_code = ANY(:codes)"
            ),
            {
                "vocabularies": sorted({v for v, _ in wanted}),
                "codes": sorted({c for _, c in wanted}),
            },
        ).all()
        for vocabulary, code, concept_id, standard, mapped in rows:
            if (vocabulary, code) in self._concepts:
                standard_id = concept_id if standard == "S" else (mapped or 0)
                self._concepts[(vocabulary, code)] = (int(concept_id), int(standard_id))

    def _concept(self, vocabulary: str, code: str) -> tuple[int, int]:
        return self._concepts.get((vocabulary, code), (0, 0))

    def write(self, seq: int, notes: list[tuple[str, str, list[Entity]]]) -> None:
        del seq
        when = utcnow()
        ids = [int(n) for n, _, _ in notes]
        pairs = {
            (e.concept.vocabulary, e.concept.id) for _, _, ents in notes for e in ents if e.concept
        }
        facts = [facts_of(ents) for _, _, ents in notes] if self.staging is not None else []
        for f in facts:
            pairs |= omop.fact_codes(f)
        with self.engine.begin() as conn:
            self._lookup(conn, pairs)
            rows = [
                [
                    omop.note_nlp_row(
                        int(note_id),
                        note_text,
                        e,
                        system=self.system,
                        when=when,
                        concepts=self._concept,
                        section_ids=self.section_ids,
                    )
                    for e in ents
                ]
                for note_id, note_text, ents in notes
            ]
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": self.table})
            if self.staging is not None:
                self._unstage(conn, ids)
            conn.execute(
                text(
                    f"DELETE FROM {self.table} WHERE nlp_system = :system AND note_id = ANY(:ids)"
                ),
                {"system": self.system, "ids": ids},
            )
            if not any(rows):
                return
            start = conn.execute(
                text(f"SELECT COALESCE(MAX(note_nlp_id), 0) FROM {self.table}")
            ).scalar_one()
            note_nlp_ids, k = [], start
            for note_rows in rows:
                note_nlp_ids.append(list(range(k + 1, k + 1 + len(note_rows))))
                k += len(note_rows)
            _copy(
                conn,
                self.table,
                omop.NOTE_NLP_COLUMNS,
                [
                    [i, *(row[c] for c in omop.NOTE_NLP_COLUMNS[1:])]
                    for note_rows, note_ids in zip(rows, note_nlp_ids, strict=True)
                    for i, row in zip(note_ids, note_rows, strict=True)
                ],
            )
            if self.staging is not None:
                self._stage(conn, ids, facts, rows, note_nlp_ids)

    def _unstage(self, conn: Any, ids: list[int]) -> None:
        """This job's staged rows of the notes ``ids``, and their provenance, deleted."""
        source = f"{self.stage}{omop.PROVENANCE_TABLE}"
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": self.stage})
        mine = "nlp_system = :system AND note_id = ANY(:ids)"
        for table, columns in STAGED.items():
            key = columns[0]
            conn.execute(
                text(
                    f"DELETE FROM {self.stage}{table} WHERE {key} IN (SELECT fact_id FROM "
                    f"{source} WHERE fact_table = '{table}' AND {mine})"
                ),
                {"system": self.system, "ids": ids},
            )
        conn.execute(
            text(f"DELETE FROM {source} WHERE {mine}"), {"system": self.system, "ids": ids}
        )

    def _stage(
        self,
        conn: Any,
        ids: list[int],
        facts: list[dict[str, list[dict[str, Any]]]],
        rows: list[list[dict[str, Any]]],
        note_nlp_ids: list[list[int]],
    ) -> None:
        """The staged rows of the chunk's facts, with ids after each table's largest."""
        found = conn.execute(
            text(
                "SELECT note_id, person_id, note_date, note_datetime, provider_id, "
                f"visit_occurrence_id, visit_detail_id FROM {self.vocab}note "
                "WHERE note_id = ANY(:ids)"
            ),
            {"ids": ids},
        ).all()
        notes = {int(r[0]): omop.NoteRow(*r[1:]) for r in found}
        staged: dict[str, list[dict[str, Any]]] = {t: [] for t in STAGED}
        provenance: list[list[Any]] = []
        for note_id, f, note_rows, nlp_ids in zip(ids, facts, rows, note_nlp_ids, strict=True):
            note = notes.get(note_id)
            if note is None:  # no NOTE row: no person, no date
                continue

            made: list[tuple[str, dict[str, Any], list[tuple[str, int]]]] = []
            for med in f["medications"]:
                if omop.staged(med) and (self.all_drugs or omop.has_regimen(med)):
                    row = omop.drug_exposure_row(
                        med, note, _concept_of(note_rows, med["drug"]), self._concept
                    )
                    made.append(("drug_exposure", row, _parts(med, omop.DRUG_PARTS)))
            for m in f["measurements"]:
                if omop.staged(m):
                    row = omop.measurement_row(
                        m, note, _concept_of(note_rows, m["test"]), self._concept
                    )
                    made.append(("measurement", row, _parts(m, omop.MEASUREMENT_PARTS)))
            for table, row, parts in made:
                staged[table].append(row)
                provenance += [
                    [table, len(staged[table]), note_id, nlp_ids[i], role, self.system]
                    for role, i in parts
                ]
        starts = {}
        for table, columns in STAGED.items():
            starts[table] = conn.execute(
                text(f"SELECT COALESCE(MAX({columns[0]}), 0) FROM {self.stage}{table}")
            ).scalar_one()
            _copy(
                conn,
                f"{self.stage}{table}",
                columns,
                [
                    [starts[table] + k, *(row[c] for c in columns[1:])]
                    for k, row in enumerate(staged[table], 1)
                ],
            )
        for p in provenance:
            p[1] += starts[p[0]]
        source = f"{self.stage}{omop.PROVENANCE_TABLE}"
        _copy(conn, source, omop.PROVENANCE_COLUMNS, provenance)


#: The staged tables and their columns (the key first).
STAGED = {"drug_exposure": omop.DRUG_EXPOSURE_COLUMNS, "measurement": omop.MEASUREMENT_COLUMNS}


def _concept_of(rows: list[dict[str, Any]], part: dict[str, Any]) -> tuple[int, int]:
    """The (standard, source) concept ids of a fact's part, as its ``NOTE_NLP`` row has them."""
    row = rows[part["entity"]]
    return row["note_nlp_concept_id"], row["note_nlp_source_concept_id"]


def _parts(fact: dict[str, Any], roles: tuple[str, ...]) -> list[tuple[str, int]]:
    """(role, entity index) of each part a fact has."""
    return [(role, fact[role]["entity"]) for role in roles if fact.get(role)]


def _copy(conn: Any, table: str, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
    """``rows`` into ``table`` with COPY, in the connection's transaction."""
    if not rows:
        return
    raw: Any = conn.connection.dbapi_connection  # psycopg's: COPY, in this transaction
    assert raw is not None
    names = ", ".join(f'"{c}"' for c in columns)
    with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _qualified(table: str) -> str:
    """``schema.table`` checked to be plain identifiers (it is put into SQL)."""
    import re

    if not re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}", table):
        raise MSLMError(f"table {table!r}: give schema.table, letters, digits and _ only")
    return table


# -- the model ---------------------------------------------------------------------------------
_PIPELINES: dict[tuple[str, str | None], AnnotationPipeline] = {}


def pipeline_for(
    settings: Settings, factory: sessionmaker[Session], job: AnnotationJob
) -> AnnotationPipeline:
    """The job's model with the deployment's context and the linker of the vocabulary that
    was active when the job was submitted (a job from before that was recorded: the active
    one), as an API replica serves it; loaded once per worker process and vocabulary."""
    from store.linking import build_linker
    from store.serving import active_vocabulary_id

    if "vocabulary" in job.params:
        vocabulary_id = job.params["vocabulary"]
    else:
        with factory() as session:
            vocabulary_id = active_vocabulary_id(session)
    key = (job.model_id, vocabulary_id)
    if key in _PIPELINES:
        return _PIPELINES[key]
    try:
        linker, _ = build_linker(settings, factory, vocabulary_id)
    except KeyError:
        raise MSLMError(f"vocabulary {vocabulary_id} of this job is not in the store") from None
    try:
        pipeline = load_pipeline(
            settings, factory, job.model_id, context=context_engine(settings), linker=linker
        )
    except KeyError:
        raise MSLMError(f"model {job.model_id} is not in the store (deleted?)") from None
    _PIPELINES.clear()  # one model at a time in a worker's memory
    _PIPELINES[key] = pipeline
    return pipeline


# -- the runners -------------------------------------------------------------------------------
def _engine(settings: Settings, name: str) -> Engine:
    urls = settings.warehouse_map()
    if name not in urls:
        raise MSLMError(f"warehouse {name!r} is not in MSLM_WAREHOUSES")
    return _ENGINES.setdefault(urls[name], create_engine(urls[name], pool_pre_ping=True))


_ENGINES: dict[str, Engine] = {}


def source_of(settings: Settings, session: Session, job: AnnotationJob) -> FileSource | SqlSource:
    if job.source["kind"] == "file":
        row = bulk.find_input(session, job.source["input"])
        if row is None:
            raise MSLMError(f"notes file {job.source['input']} is gone")
        return FileSource(bulk.notes_file(settings, row), row.problems)
    engine = _engine(settings, job.source["warehouse"])
    limit = int(job.params.get("max_text_chars") or settings.max_text_chars)
    timeout = settings.warehouse_statement_timeout_seconds
    return SqlSource(engine, job.source["query"], timeout, limit)


_SINKS: dict[str, FileSink | OmopSink] = {}


def sink_of(settings: Settings, job: AnnotationJob) -> FileSink | OmopSink:
    """The job's output, kept for the job's next chunks in this process (an OMOP sink's
    section and concept ids are looked up once)."""
    if job.id in _SINKS:
        return _SINKS[job.id]
    sink: FileSink | OmopSink
    if job.output["kind"] == "file":
        sink = FileSink(settings, job)
    else:
        system = omop.nlp_system(__version__, job.model_id, job.id)
        sink = OmopSink(
            _engine(settings, job.output["warehouse"]),
            job.output["table"],
            system,
            job.output.get("staging"),
        )
    _SINKS.clear()  # one job's at a time
    _SINKS[job.id] = sink
    return sink


class PlanBeat:
    """A thread that keeps a planning job's heartbeat while its notes are counted (a warehouse
    query can take minutes), and notices a cancel, or the claim lost: then it calls ``stop``
    (the source's running query is cancelled)."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        job_id: str,
        worker: str,
        interval: float,
        stop: Callable[[], None],
    ):
        self.factory, self.job_id, self.worker = factory, job_id, worker
        self.interval, self.stop = interval, stop
        self.cancelled = self.lost = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"plan-{job_id}", daemon=True)

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                with self.factory() as session:
                    ours, cancelled = bulk.plan_beat(session, self.job_id, self.worker)
            except Exception as exc:
                log.warning("planning heartbeat of %s failed: %s", self.job_id, _reason(exc))
                continue
            if cancelled or not ours:
                self.cancelled, self.lost = cancelled, not ours
                self.stop()
                return

    def __enter__(self) -> PlanBeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def run_plan(job_id: str, settings: Settings, publish: Publish) -> str:
    factory = session_factory(settings.sqlalchemy_url)
    worker = worker_name()
    with factory() as session:
        if not bulk.claim_plan(session, job_id, worker):
            return "skipped"
        job = bulk.claimed_job(session, job_id)
        beat = None
        try:
            source = source_of(settings, session, job)
            with PlanBeat(
                factory, job_id, worker, settings.heartbeat_seconds, source.cancel
            ) as beat:
                ranges, problems = source.plan(job.chunk_size)
        except Exception as exc:  # the source cannot be read at all: the job cannot run
            if beat is not None and beat.cancelled:
                bulk.cancel_planning(session, job_id, worker)
                log.info("annotation job %s: cancelled while its notes were counted", job_id)
                return "cancelled"
            if beat is not None and beat.lost:
                return "lost"
            reason = _reason(exc)
            log.error("annotation job %s: planning failed: %s", job_id, reason)
            bulk.fail_job(session, job_id, f"reading the notes failed: {reason}")
            return "failed"
        if beat.cancelled:
            bulk.cancel_planning(session, job_id, worker)
            return "cancelled"
        if not bulk.save_plan(session, job_id, worker, ranges, problems):
            return "lost"
        released = bulk.released(session, job_id)
    log.info("annotation job %s: %d chunks", job_id, len(ranges))
    for seq in released:  # the first of them; the others as these end (bulk.release)
        publish(job_id, seq)
    return "planned"


#: SQLSTATE classes whose messages name objects, settings or the server's state, never a
#: value of the data: syntax and access (42), a feature not supported (0A), the transaction's
#: state such as read only (25), connection (08), authorisation (28), resources (53),
#: operator intervention such as a statement timeout (57). The others — a data exception (22)
#: says "invalid input syntax for type integer: <the note's text>" — are reported by their
#: class and code only.
SAFE_SQLSTATE_CLASSES = ("42", "0A", "25", "08", "28", "53", "57")


def _reason(exc: BaseException) -> str:
    """What failed, without the data: the exception's type, and its first line unless it
    may quote a value (a database error of another SQLSTATE class than
    :data:`SAFE_SQLSTATE_CLASSES`, whose message can hold a note's text)."""
    orig = getattr(exc, "orig", exc)  # SQLAlchemy wraps the driver's error
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate is not None and not str(sqlstate).startswith(SAFE_SQLSTATE_CLASSES):
        return f"{type(orig).__name__} (SQLSTATE {sqlstate}; its message may hold data: not shown)"
    text = str(orig).strip()
    if isinstance(orig, UnicodeError) or not text:
        return type(orig).__name__  # a decoding error quotes the bytes it could not read
    return f"{type(orig).__name__}: {text.splitlines()[0][:300]}"


def _annotate(
    pipeline: AnnotationPipeline, options: AnnotateOptions, rows: list[Row]
) -> tuple[list[tuple[str, str, list[Entity]]], list[dict[str, Any]]]:
    """The rows' entities under the job's options; a batch that fails is retried note by note
    so that only the note that fails is lost (recorded with its reason)."""
    texts = [r.text or "" for r in rows]
    try:
        found = pipeline(texts, options)
        return [(r.note_id, t, e) for r, t, e in zip(rows, texts, found, strict=True)], []
    except Exception:
        if len(rows) == 1:
            raise
    done: list[tuple[str, str, list[Entity]]] = []
    errors: list[dict[str, Any]] = []
    for row, t in zip(rows, texts, strict=True):
        try:
            done.append((row.note_id, t, pipeline([t], options)[0]))
        except Exception as exc:
            errors.append({"note_id": row.note_id, "reason": f"annotation failed: {_reason(exc)}"})
    return done, errors


def run_chunk(job_id: str, seq: int, settings: Settings, publish: Publish | None = None) -> str:
    """Annotate one chunk; then release the job's next chunks and ``publish`` them."""
    done = _run_chunk(job_id, seq, settings)
    if publish is not None and done in ("done", "failed"):
        factory = session_factory(settings.sqlalchemy_url)
        with factory() as session:
            for job, next_seq in bulk.release(session, job_id):
                publish(job, next_seq)
    return done


def _run_chunk(job_id: str, seq: int, settings: Settings) -> str:
    factory = session_factory(settings.sqlalchemy_url)
    worker = worker_name()
    started = time.perf_counter()
    with factory() as session:
        if not bulk.claim_chunk(session, job_id, seq, worker):
            return "skipped"
        job, chunk = bulk.claimed_chunk(session, job_id, seq)
        try:
            source = source_of(settings, session, job)
            sink = sink_of(settings, job)
            options = AnnotateOptions.from_params(job.params)
            pipeline = pipeline_for(settings, factory, job)
            rows = list(source.read(chunk.first, chunk.last))
            read_s = time.perf_counter() - started
        except Exception as exc:
            reason = _reason(exc)
            log.error("annotation job %s chunk %d failed: %s", job_id, seq, reason)
            bulk.finish_chunk(
                session,
                job_id,
                seq,
                worker,
                state=FAILED,
                done=0,
                entities=0,
                seconds=time.perf_counter() - started,
                errors=[],
                error=reason,
            )
            return "failed"
        errors, warnings = _check(job, settings, rows, pipeline.language)
        annotated: list[tuple[str, str, list[Entity]]] = []
        todo = [r for r in rows if r.problem is None]
        beat = time.monotonic()
        for i in range(0, len(todo), BATCH_NOTES):
            done, failed = _annotate(pipeline, options, todo[i : i + BATCH_NOTES])
            annotated += done
            errors += failed
            if time.monotonic() - beat < settings.heartbeat_seconds:
                continue  # a store commit per batch cost a fifth of a chunk's time
            beat = time.monotonic()
            if not bulk.chunk_beat(session, job_id, seq, worker, len(annotated)):
                log.warning("annotation job %s chunk %d: claim lost; stopping", job_id, seq)
                return "lost"
        if job.output["kind"] == "omop" or _integer_ids_wanted(job.output):
            annotated, bad = _integer_ids(annotated)
            errors += bad
        annotate_s = time.perf_counter() - started - read_s
        try:
            sink.write(seq, annotated)
        except Exception as exc:
            reason = f"writing failed: {_reason(exc)}"
            log.error("annotation job %s chunk %d: %s", job_id, seq, reason)
            # not final: the reaper gives the chunk another attempt (the write is idempotent)
            raise ChunkRetry(reason) from exc
        write_s = time.perf_counter() - started - read_s - annotate_s
        bulk.finish_chunk(
            session,
            job_id,
            seq,
            worker,
            state=SUCCEEDED,
            done=len(annotated),
            entities=sum(len(e) for _, _, e in annotated),
            seconds=time.perf_counter() - started,
            errors=errors + warnings,  # warnings last: a chunk keeps its first errors
        )
    log.info(
        "annotation job %s chunk %d: %d notes; read %.3f s, annotate %.3f s, write %.3f s, "
        "store %.3f s",
        job_id,
        seq,
        len(rows),
        read_s,
        annotate_s,
        write_s,
        time.perf_counter() - started - read_s - annotate_s - write_s,
    )
    return "done"


class ChunkRetry(Exception):
    """A chunk's write failed in a way another attempt may get past (the target database
    restarting); the task retries it."""


def _check(
    job: AnnotationJob, settings: Settings, rows: list[Row], language: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Mark the notes that cannot be annotated (NULL, over-long, holding a NUL or a lone
    surrogate; written in another language than the model's ``language`` where
    MSLM_REFUSE_OTHER_LANGUAGES is on) and list them; and the warnings of those annotated
    all the same (another language)."""
    limit = int(job.params.get("max_text_chars") or settings.max_text_chars)
    errors: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    for row in rows:
        if row.problem is None and row.text is not None and len(row.text) > limit:
            row.problem = f"note_text has {len(row.text)} characters; the limit is {limit}"
        if row.problem is None and row.text is not None:
            found = character_problem(row.text)
            row.problem = None if found is None else f"note_text holds {found}"
        if row.problem is None and row.text is not None:
            other = other_language(row.text, language)
            if other is not None and settings.refuse_other_languages:
                row.problem = f"{other.warning(language)} (MSLM_REFUSE_OTHER_LANGUAGES)"
            elif other is not None:
                reason = other.warning(language)
                warnings.append({"note_id": row.note_id, "reason": reason, "warning": True})
        if row.problem is not None:
            errors.append({"note_id": row.note_id, "reason": row.problem})
    return errors, warnings


def _integer_ids_wanted(output: dict[str, Any]) -> bool:
    from mslm_core.render import OUTPUTS

    return output["kind"] == "file" and OUTPUTS[output.get("format", "jsonl")].integer_ids


def _integer_ids(
    notes: list[tuple[str, str, list[Entity]]],
) -> tuple[list[tuple[str, str, list[Entity]]], list[dict[str, Any]]]:
    ok, bad = [], []
    for note in notes:
        try:
            int(note[0])
            ok.append(note)
        except ValueError:
            bad.append({"note_id": note[0], "reason": "NOTE_NLP.note_id is an integer"})
    return ok, bad
