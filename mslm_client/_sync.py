"""The synchronous client: a thin driver of the shared protocol over ``httpx.Client``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, overload

import httpx

from . import _endpoints as ep
from ._core import Call, FileInput, Protocol, RetryPolicy, Send
from ._endpoints import AnnotateOptions, AnnotationJobOptions, JobParams
from ._helpers import RunT, Watch, batches, check_batching, series_result, series_texts
from .results import (
    AnnotateResponse,
    AnnotationJob,
    Dataset,
    DatasetVersion,
    Document,
    Entity,
    Evaluation,
    Job,
    JobDataset,
    Linking,
    Model,
    NoteFile,
    Page,
    Readiness,
    Suggestions,
    Vocabulary,
)

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")


class Client:
    """Talks to an mslm service.

    ``base_url`` and ``api_key`` default to ``MSLM_URL`` (else http://127.0.0.1:8000) and
    ``MSLM_API_KEY``. Connection errors, 429 and 502/503/504 are retried ``max_retries``
    times with exponential back-off and jitter (``Retry-After`` honoured) — for requests
    that are safe to repeat; uploads and new evaluations only when the connection never
    opened. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        headers: dict[str, str] | None = None,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_backoff=max_backoff)
        self.protocol = Protocol(base_url, api_key, timeout=timeout, retry=retry, headers=headers)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(transport=transport)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"<Client {self.protocol.base_url}>"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def _request(self, call: Call[T]) -> T:
        """Run one :class:`Call` (every method goes through here): send what the shared
        protocol asks for, sleep when it asks to, until it returns or raises."""
        exchange = self.protocol.exchange(call)
        step = next(exchange)
        while True:
            outcome: Any = None
            if isinstance(step, Send):
                try:
                    outcome = self._http.send(step.request)
                except httpx.TransportError as exc:
                    outcome = exc
            else:
                self._sleep(step.seconds)
            try:
                step = exchange.send(outcome)
            except StopIteration as stop:
                result: T = stop.value
                return result

    # -- annotate -----------------------------------------------------------------------------
    @overload
    def annotate(
        self,
        texts: Sequence[str],
        *,
        format: Literal["json"] | None = None,
        **options: Unpack[AnnotateOptions],
    ) -> AnnotateResponse: ...

    @overload
    def annotate(
        self,
        texts: Sequence[str],
        *,
        format: Literal["pubtator"],
        **options: Unpack[AnnotateOptions],
    ) -> str: ...

    @overload
    def annotate(
        self, texts: Sequence[str], *, format: str, **options: Unpack[AnnotateOptions]
    ) -> Any: ...

    def annotate(
        self, texts: Sequence[str], *, format: str | None = None, **options: Unpack[AnnotateOptions]
    ) -> Any:
        """Entities in each text (``model``, ``style``, ``min_confidence``,
        ``min_confidence_per_type``, ``context``, ``linking`` as the API takes them). With a
        ``format`` other than json (``bioc``, ``labelstudio``: decoded JSON; ``pubtator``:
        text), the service's answer in that format."""
        return self._request(ep.annotate(texts, options, format))

    def annotate_iter(
        self, texts: Iterable[str], *, batch_size: int = 32, **options: Unpack[AnnotateOptions]
    ) -> Iterator[list[Entity]]:
        """The entities of each text, in order, annotating ``batch_size`` texts per request
        as the iterator is consumed. Every batch uses the model that answered the first one
        (an activation meanwhile does not mix models)."""
        check_batching(batch_size)  # now, not at the first next()
        ep.check_annotate_options(options)
        return self._annotate_batches(batches(texts, batch_size), options)

    def _annotate_batches(
        self, chunks: Iterator[list[str]], options: AnnotateOptions
    ) -> Iterator[list[Entity]]:
        for batch in chunks:
            answer = self.annotate(batch, **options)
            options["model"] = answer.model.id
            for result in answer.results:
                yield result.entities

    def annotate_series(
        self, series: pd.Series, *, batch_size: int = 32, **options: Unpack[AnnotateOptions]
    ) -> pd.Series:
        """A Series of entity lists with the index (and name) of ``series``; missing values
        get an empty list."""
        texts, positions = series_texts(series)
        found = self.annotate_iter(texts, batch_size=batch_size, **options)
        return series_result(series, positions, found)

    # -- datasets -----------------------------------------------------------------------------
    def upload_dataset(
        self,
        name: str | None = None,
        *,
        train: FileInput,
        dev: FileInput | None = None,
        test: FileInput | None = None,
    ) -> Dataset:
        """Upload a corpus (CoNLL-IOB or JSONL; paths, bytes or binary files); the service
        validates it and refuses a bad file with its line (:class:`ValidationError`)."""
        return self._request(ep.upload_dataset(name, train, dev, test))

    def list_datasets(self, *, limit: int = 100, offset: int = 0) -> Page[Dataset]:
        return self._request(ep.list_datasets(limit, offset))

    def get_dataset(self, dataset_id: str) -> Dataset:
        return self._request(ep.get_dataset(dataset_id))

    def delete_dataset(self, dataset_id: str) -> None:
        self._request(ep.delete_dataset(dataset_id))

    def add_documents(
        self,
        dataset_id: str,
        documents: Sequence[Document] = (),
        *,
        remove: Sequence[str] = (),
    ) -> DatasetVersion:
        """A new version of the dataset: ``documents`` added (or replacing the one with their
        id; ``entities=None``: not labelled yet, into the pool), ``remove``: ids deleted."""
        return self._request(ep.add_documents(dataset_id, documents, remove))

    def list_dataset_versions(self, dataset_id: str) -> Page[DatasetVersion]:
        """The dataset's versions, newest first."""
        return self._request(ep.list_dataset_versions(dataset_id))

    def suggest(
        self,
        dataset_id: str,
        *,
        limit: int = 10,
        strategy: str = "least_confidence",
        diversity: float = 0.5,
        model: str | None = None,
        max_documents: int = 1000,
    ) -> Suggestions:
        """The dataset's unlabelled documents to label next, most useful first (the served
        model's calibrated uncertainty, with diversity)."""
        return self._request(
            ep.suggest(dataset_id, limit, strategy, diversity, model, max_documents)
        )

    # -- jobs ---------------------------------------------------------------------------------
    def create_job(
        self,
        dataset_id: str | Sequence[JobDataset],
        *,
        idempotency_key: str | None = None,
        **params: Unpack[JobParams],
    ) -> Job:
        """Queue a fine-tuning job (state ``queued``) on a dataset, or on several mapped onto
        one schema: ``[JobDataset(id, type_map, weight), …]``."""
        return self._request(ep.create_job(dataset_id, params, idempotency_key))

    def get_job(self, job_id: str) -> Job:
        return self._request(ep.get_job(job_id))

    def list_jobs(
        self, *, state: str | None = None, limit: int = 100, offset: int = 0
    ) -> Page[Job]:
        return self._request(ep.list_jobs(state, limit, offset))

    def cancel_job(self, job_id: str) -> Job:
        return self._request(ep.cancel_job(job_id))

    def job_history(self, job_id: str) -> list[dict[str, Any]]:
        """Per-epoch records (loss, dev F1, …) of a job so far."""
        return self.get_job(job_id).history

    def wait_for_job(
        self,
        job_id: str,
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> Job:
        """Poll until the job succeeds (returned) or fails or is cancelled (:class:`JobError`
        with the job's error), with a progress bar over its training steps."""
        return self._wait(job_id, self.get_job, progress, poll_interval, timeout)

    def run_job(
        self,
        dataset_id: str | Sequence[JobDataset],
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **params: Unpack[JobParams],
    ) -> Job:
        """Create a job and wait for it: the finished job, with its ``model_id``."""
        job = self.create_job(dataset_id, idempotency_key=idempotency_key, **params)
        return self.wait_for_job(
            job.id, progress=progress, poll_interval=poll_interval, timeout=timeout
        )

    # -- models -------------------------------------------------------------------------------
    def list_models(self, *, limit: int = 100, offset: int = 0) -> Page[Model]:
        return self._request(ep.list_models(limit, offset))

    def get_model(self, model_id: str) -> Model:
        """The model with its bundle ``manifest``."""
        return self._request(ep.get_model(model_id))

    def activate_model(self, model_id: str, force: bool = False) -> Model:
        return self._request(ep.activate_model(model_id, force))

    def delete_model(self, model_id: str) -> None:
        self._request(ep.delete_model(model_id))

    def model_calibration_png(self, model_id: str) -> bytes:
        """The model's reliability diagram, PNG bytes."""
        return self._request(ep.model_calibration_png(model_id))

    # -- vocabularies -------------------------------------------------------------------------
    def import_vocabulary(
        self,
        file: FileInput,
        *,
        name: str | None = None,
        url_pattern: str = "",
        activate: bool = False,
    ) -> Vocabulary:
        """Import a concept vocabulary (TSV, or OBO by a file name ending in ``.obo``; an
        admin key); a bad file is refused with its line and field (:class:`ValidationError`)."""
        return self._request(ep.import_vocabulary(file, name, url_pattern, activate))

    def list_vocabularies(
        self, *, limit: int = 100, offset: int = 0
    ) -> tuple[Page[Vocabulary], Linking]:
        """The imported vocabularies, and what answers link to now."""
        return self._request(ep.list_vocabularies(limit, offset))

    def get_vocabulary(self, vocabulary_id: str) -> Vocabulary:
        return self._request(ep.get_vocabulary(vocabulary_id))

    def activate_vocabulary(self, vocabulary_id: str) -> Linking:
        """Link every replica's answers to it (``default``: the deployment's own)."""
        return self._request(ep.activate_vocabulary(vocabulary_id))

    def delete_vocabulary(self, vocabulary_id: str) -> None:
        self._request(ep.delete_vocabulary(vocabulary_id))

    # -- evaluations --------------------------------------------------------------------------
    def create_evaluation(
        self,
        model_id: str,
        dataset_id: str,
        split: Literal["train", "dev", "test"] = "test",
        *,
        type_map: dict[str, Any] | None = None,
    ) -> Evaluation:
        """Queue an evaluation; ``type_map`` maps the dataset's types onto the model's (it is
        then judged on the types it annotates)."""
        return self._request(ep.create_evaluation(model_id, dataset_id, split, type_map))

    def get_evaluation(self, evaluation_id: str) -> Evaluation:
        return self._request(ep.get_evaluation(evaluation_id))

    def wait_for_evaluation(
        self,
        evaluation_id: str,
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> Evaluation:
        return self._wait(evaluation_id, self.get_evaluation, progress, poll_interval, timeout)

    def evaluation_calibration_png(self, evaluation_id: str) -> bytes:
        return self._request(ep.evaluation_calibration_png(evaluation_id))

    # -- annotation jobs (bulk) ---------------------------------------------------------------
    def upload_notes(
        self, file: FileInput, *, format: str | None = None, encoding: str | None = None
    ) -> NoteFile:
        """Upload a file of notes (JSONL ``{"id", "text"}``, text one per line, BioC or
        PubTator); the notes it could not read are in ``problems``, the others are kept."""
        return self._request(ep.upload_notes(file, format, encoding))

    def create_annotation_job(
        self,
        source: str | dict[str, Any],
        *,
        output: dict[str, Any] | None = None,
        **options: Unpack[AnnotationJobOptions],
    ) -> AnnotationJob:
        """Queue an annotation job. ``source``: a notes file's id, or ``{"kind": "sql",
        "warehouse": NAME, "query": "SELECT note_id, note_text FROM …"}``; ``output``:
        ``{"kind": "file", "format": "jsonl" | "bioc" | "pubtator"}`` (default JSONL) or
        ``{"kind": "omop", "warehouse": NAME, "table": "cdm.note_nlp"}``."""
        body = {"kind": "file", "input": source} if isinstance(source, str) else source
        return self._request(ep.create_annotation_job(body, output or {"kind": "file"}, options))

    def list_annotation_jobs(
        self, *, state: str | None = None, limit: int = 100, offset: int = 0
    ) -> Page[AnnotationJob]:
        return self._request(ep.list_annotation_jobs(state, limit, offset))

    def get_annotation_job(self, job_id: str) -> AnnotationJob:
        return self._request(ep.get_annotation_job(job_id))

    def cancel_annotation_job(self, job_id: str) -> AnnotationJob:
        return self._request(ep.cancel_annotation_job(job_id))

    def delete_annotation_job(self, job_id: str) -> None:
        """Delete a finished job and its output files (NOTE_NLP rows it wrote stay)."""
        self._request(ep.delete_annotation_job(job_id))

    def delete_notes(self, input_id: str) -> None:
        """Delete an uploaded notes file (patient data) no open job reads."""
        self._request(ep.delete_notes(input_id))

    def annotation_job_errors(self, job_id: str) -> list[dict[str, Any]]:
        """Every note not annotated (``note_id``, ``reason``) and every chunk that failed."""
        return self._request(ep.annotation_job_errors(job_id))

    def annotation_job_output(self, job_id: str) -> bytes:
        """The annotations of a finished file-output job, in its format."""
        return self._request(ep.annotation_job_output(job_id))

    def wait_for_annotation_job(
        self,
        job_id: str,
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> AnnotationJob:
        """Poll until the job succeeds (returned), with a progress bar over its notes; a job
        that failed or was cancelled raises :class:`JobError`."""
        fetch = self.get_annotation_job
        return self._wait(job_id, fetch, progress, poll_interval, timeout)

    # -- health -------------------------------------------------------------------------------
    def healthz(self) -> dict[str, Any]:
        return self._request(ep.healthz())

    def readyz(self) -> Readiness:
        """Readiness; a 503 gives ``ready=False`` with the reasons (no exception)."""
        return self._request(ep.readyz())

    # -----------------------------------------------------------------------------------------
    def _wait(
        self,
        run_id: str,
        fetch: Callable[[str], RunT],
        progress: bool,
        poll_interval: float,
        timeout: float | None,
    ) -> RunT:
        watch = Watch(run_id, progress, timeout)
        try:
            while not watch.done(run := fetch(run_id)):
                self._sleep(poll_interval)
        finally:
            watch.close()
        return run
