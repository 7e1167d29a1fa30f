"""The asynchronous client: a thin driver of the shared protocol over ``httpx.AsyncClient``."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, overload

import httpx

from . import _endpoints as ep
from ._core import Call, FileInput, Protocol, RetryPolicy, Send
from ._endpoints import AnnotateOptions, AnnotationJobOptions, JobParams
from ._helpers import RunT, Watch, abatches, check_batching, series_result, series_texts
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


class AsyncClient:
    """The :class:`~mslm_client.Client` API with ``await`` (same arguments, same retries);
    ``annotate_iter`` keeps up to ``concurrency`` requests in flight. Use ``async with``, or
    call :meth:`aclose`."""

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
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_backoff=max_backoff)
        self.protocol = Protocol(base_url, api_key, timeout=timeout, retry=retry, headers=headers)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(transport=transport)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"<AsyncClient {self.protocol.base_url}>"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _request(self, call: Call[T]) -> T:
        """Run one :class:`Call` (every method goes through here): send what the shared
        protocol asks for, sleep when it asks to, until it returns or raises."""
        exchange = self.protocol.exchange(call)
        step = next(exchange)
        while True:
            outcome: Any = None
            if isinstance(step, Send):
                try:
                    outcome = await self._http.send(step.request)
                except httpx.TransportError as exc:
                    outcome = exc
            else:
                await self._sleep(step.seconds)
            try:
                step = exchange.send(outcome)
            except StopIteration as stop:
                result: T = stop.value
                return result

    # -- annotate -----------------------------------------------------------------------------
    @overload
    async def annotate(
        self,
        texts: Sequence[str],
        *,
        format: Literal["json"] | None = None,
        **options: Unpack[AnnotateOptions],
    ) -> AnnotateResponse: ...

    @overload
    async def annotate(
        self,
        texts: Sequence[str],
        *,
        format: Literal["pubtator"],
        **options: Unpack[AnnotateOptions],
    ) -> str: ...

    @overload
    async def annotate(
        self, texts: Sequence[str], *, format: str, **options: Unpack[AnnotateOptions]
    ) -> Any: ...

    async def annotate(
        self, texts: Sequence[str], *, format: str | None = None, **options: Unpack[AnnotateOptions]
    ) -> Any:
        """See :meth:`mslm_client.Client.annotate`."""
        return await self._request(ep.annotate(texts, options, format))

    def annotate_iter(
        self,
        texts: Iterable[str] | AsyncIterable[str],
        *,
        batch_size: int = 32,
        concurrency: int = 4,
        **options: Unpack[AnnotateOptions],
    ) -> AsyncIterator[list[Entity]]:
        """``async for entities in client.annotate_iter(texts)``: the entities of each text,
        in order. Texts are read lazily; up to ``concurrency`` batches are annotated at once,
        all with the model that answered the first batch."""
        check_batching(batch_size, concurrency)
        ep.check_annotate_options(options)
        return self._annotate_batches(abatches(texts, batch_size), concurrency, options)

    async def _annotate_batches(
        self, chunks: AsyncIterator[list[str]], concurrency: int, options: AnnotateOptions
    ) -> AsyncIterator[list[Entity]]:
        in_flight: deque[asyncio.Task[AnnotateResponse]] = deque()
        try:
            async for batch in chunks:
                if options.get("model") is None:  # learn which model answers, then pin it
                    first = await self.annotate(batch, **options)
                    options["model"] = first.model.id
                    for result in first.results:
                        yield result.entities
                    continue
                in_flight.append(asyncio.ensure_future(self.annotate(batch, **options)))
                if len(in_flight) >= concurrency:
                    for result in (await in_flight.popleft()).results:
                        yield result.entities
            while in_flight:
                for result in (await in_flight.popleft()).results:
                    yield result.entities
        finally:  # the consumer stopped early, or a batch failed: drop what is left
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def annotate_series(
        self,
        series: pd.Series,
        *,
        batch_size: int = 32,
        concurrency: int = 4,
        **options: Unpack[AnnotateOptions],
    ) -> pd.Series:
        """See :meth:`mslm_client.Client.annotate_series`."""
        texts, positions = series_texts(series)
        iterator = self.annotate_iter(
            texts, batch_size=batch_size, concurrency=concurrency, **options
        )
        found = [entities async for entities in iterator]
        return series_result(series, positions, found)

    # -- datasets -----------------------------------------------------------------------------
    async def upload_dataset(
        self,
        name: str | None = None,
        *,
        train: FileInput,
        dev: FileInput | None = None,
        test: FileInput | None = None,
    ) -> Dataset:
        """See :meth:`mslm_client.Client.upload_dataset` (files are read in the event loop)."""
        return await self._request(ep.upload_dataset(name, train, dev, test))

    async def list_datasets(self, *, limit: int = 100, offset: int = 0) -> Page[Dataset]:
        return await self._request(ep.list_datasets(limit, offset))

    async def get_dataset(self, dataset_id: str) -> Dataset:
        return await self._request(ep.get_dataset(dataset_id))

    async def delete_dataset(self, dataset_id: str) -> None:
        await self._request(ep.delete_dataset(dataset_id))

    async def add_documents(
        self,
        dataset_id: str,
        documents: Sequence[Document] = (),
        *,
        remove: Sequence[str] = (),
    ) -> DatasetVersion:
        """A new version of the dataset: ``documents`` added (or replacing the one with their
        id; ``entities=None``: not labelled yet, into the pool), ``remove``: ids deleted."""
        return await self._request(ep.add_documents(dataset_id, documents, remove))

    async def list_dataset_versions(self, dataset_id: str) -> Page[DatasetVersion]:
        """The dataset's versions, newest first."""
        return await self._request(ep.list_dataset_versions(dataset_id))

    async def suggest(
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
        return await self._request(
            ep.suggest(dataset_id, limit, strategy, diversity, model, max_documents)
        )

    # -- jobs ---------------------------------------------------------------------------------
    async def create_job(
        self,
        dataset_id: str | Sequence[JobDataset],
        *,
        idempotency_key: str | None = None,
        **params: Unpack[JobParams],
    ) -> Job:
        return await self._request(ep.create_job(dataset_id, params, idempotency_key))

    async def get_job(self, job_id: str) -> Job:
        return await self._request(ep.get_job(job_id))

    async def list_jobs(
        self, *, state: str | None = None, limit: int = 100, offset: int = 0
    ) -> Page[Job]:
        return await self._request(ep.list_jobs(state, limit, offset))

    async def cancel_job(self, job_id: str) -> Job:
        return await self._request(ep.cancel_job(job_id))

    async def job_history(self, job_id: str) -> list[dict[str, Any]]:
        return (await self.get_job(job_id)).history

    async def wait_for_job(
        self,
        job_id: str,
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> Job:
        """See :meth:`mslm_client.Client.wait_for_job`."""
        return await self._wait(job_id, self.get_job, progress, poll_interval, timeout)

    async def run_job(
        self,
        dataset_id: str,
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **params: Unpack[JobParams],
    ) -> Job:
        job = await self.create_job(dataset_id, idempotency_key=idempotency_key, **params)
        return await self.wait_for_job(
            job.id, progress=progress, poll_interval=poll_interval, timeout=timeout
        )

    # -- models -------------------------------------------------------------------------------
    async def list_models(self, *, limit: int = 100, offset: int = 0) -> Page[Model]:
        return await self._request(ep.list_models(limit, offset))

    async def get_model(self, model_id: str) -> Model:
        return await self._request(ep.get_model(model_id))

    async def activate_model(self, model_id: str, force: bool = False) -> Model:
        return await self._request(ep.activate_model(model_id, force))

    async def delete_model(self, model_id: str) -> None:
        await self._request(ep.delete_model(model_id))

    async def model_calibration_png(self, model_id: str) -> bytes:
        return await self._request(ep.model_calibration_png(model_id))

    # -- vocabularies -------------------------------------------------------------------------
    async def import_vocabulary(
        self,
        file: FileInput,
        *,
        name: str | None = None,
        url_pattern: str = "",
        activate: bool = False,
    ) -> Vocabulary:
        """Import a concept vocabulary (TSV, or OBO by a file name ending in ``.obo``; an
        admin key); a bad file is refused with its line and field (:class:`ValidationError`)."""
        return await self._request(ep.import_vocabulary(file, name, url_pattern, activate))

    async def list_vocabularies(
        self, *, limit: int = 100, offset: int = 0
    ) -> tuple[Page[Vocabulary], Linking]:
        """The imported vocabularies, and what answers link to now."""
        return await self._request(ep.list_vocabularies(limit, offset))

    async def get_vocabulary(self, vocabulary_id: str) -> Vocabulary:
        return await self._request(ep.get_vocabulary(vocabulary_id))

    async def activate_vocabulary(self, vocabulary_id: str) -> Linking:
        """Link every replica's answers to it (``default``: the deployment's own)."""
        return await self._request(ep.activate_vocabulary(vocabulary_id))

    async def delete_vocabulary(self, vocabulary_id: str) -> None:
        await self._request(ep.delete_vocabulary(vocabulary_id))

    # -- evaluations --------------------------------------------------------------------------
    async def create_evaluation(
        self,
        model_id: str,
        dataset_id: str,
        split: Literal["train", "dev", "test"] = "test",
        *,
        type_map: dict[str, Any] | None = None,
    ) -> Evaluation:
        """Queue an evaluation; ``type_map`` maps the dataset's types onto the model's (it is
        then judged on the types it annotates)."""
        return await self._request(ep.create_evaluation(model_id, dataset_id, split, type_map))

    async def get_evaluation(self, evaluation_id: str) -> Evaluation:
        return await self._request(ep.get_evaluation(evaluation_id))

    async def wait_for_evaluation(
        self,
        evaluation_id: str,
        *,
        progress: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> Evaluation:
        fetch = self.get_evaluation
        return await self._wait(evaluation_id, fetch, progress, poll_interval, timeout)

    async def evaluation_calibration_png(self, evaluation_id: str) -> bytes:
        return await self._request(ep.evaluation_calibration_png(evaluation_id))

    # -- annotation jobs (bulk) ---------------------------------------------------------------
    async def upload_notes(
        self, file: FileInput, *, format: str | None = None, encoding: str | None = None
    ) -> NoteFile:
        """Upload a file of notes (JSONL ``{"id", "text"}``, text one per line, BioC or
        PubTator); the notes it could not read are in ``problems``, the others are kept."""
        return await self._request(ep.upload_notes(file, format, encoding))

    async def create_annotation_job(
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
        return await self._request(
            ep.create_annotation_job(body, output or {"kind": "file"}, options)
        )

    async def list_annotation_jobs(
        self, *, state: str | None = None, limit: int = 100, offset: int = 0
    ) -> Page[AnnotationJob]:
        return await self._request(ep.list_annotation_jobs(state, limit, offset))

    async def get_annotation_job(self, job_id: str) -> AnnotationJob:
        return await self._request(ep.get_annotation_job(job_id))

    async def cancel_annotation_job(self, job_id: str) -> AnnotationJob:
        return await self._request(ep.cancel_annotation_job(job_id))

    async def delete_annotation_job(self, job_id: str) -> None:
        """Delete a finished job and its output files (NOTE_NLP rows it wrote stay)."""
        await self._request(ep.delete_annotation_job(job_id))

    async def delete_notes(self, input_id: str) -> None:
        """Delete an uploaded notes file (patient data) no open job reads."""
        await self._request(ep.delete_notes(input_id))

    async def annotation_job_errors(self, job_id: str) -> list[dict[str, Any]]:
        """Every note not annotated (``note_id``, ``reason``) and every chunk that failed."""
        return await self._request(ep.annotation_job_errors(job_id))

    async def annotation_job_output(self, job_id: str) -> bytes:
        """The annotations of a finished file-output job, in its format."""
        return await self._request(ep.annotation_job_output(job_id))

    async def wait_for_annotation_job(
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
        return await self._wait(job_id, fetch, progress, poll_interval, timeout)

    # -- health -------------------------------------------------------------------------------
    async def healthz(self) -> dict[str, Any]:
        return await self._request(ep.healthz())

    async def readyz(self) -> Readiness:
        return await self._request(ep.readyz())

    # -----------------------------------------------------------------------------------------
    async def _wait(
        self,
        run_id: str,
        fetch: Callable[[str], Awaitable[RunT]],
        progress: bool,
        poll_interval: float,
        timeout: float | None,
    ) -> RunT:
        watch = Watch(run_id, progress, timeout)
        try:
            while not watch.done(run := await fetch(run_id)):
                await self._sleep(poll_interval)
        finally:
            watch.close()
        return run
