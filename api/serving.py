"""Serving: loaded models, dynamic micro-batching, hot swap.

Each loaded model has one inference thread and a :class:`MicroBatcher`: concurrent requests
queue up, and whatever arrived within ``batch_wait_ms`` (or while the previous batch ran) goes
to the engine as one call, so load raises throughput instead of queueing; the event loop never
runs inference. The active model id lives in the job store; every replica polls it and loads a
new model *before* swapping the reference, so requests in flight finish on the model they
started with and none is dropped. A model that fails to load (for example a checksum
mismatch) is refused and the previous one keeps serving.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from mslm_core import active
from mslm_core.errors import InferenceError, MSLMError
from mslm_core.pipeline import DEFAULTS, AnnotateOptions, AnnotationPipeline
from mslm_core.predict import AnnotationPlan
from mslm_core.types import Entity
from mslm_settings import Settings
from store import models as stored_models
from store.pipeline import context_engine, load_pipeline
from store.serving import active_model_id, coming_model

from .linking import Linking, VocabularyManager
from .metrics import Metrics

log = logging.getLogger(__name__)


class BatcherClosed(Exception):
    """The model was unloaded (evicted or deleted) before this request reached it; the
    caller asks the manager again."""


_STOP = None  # the queue's last item: finish what came before it, then stop


class Request(NamedTuple):
    """One caller's texts, its options (checked for the model) and its answer."""

    texts: list[str]
    options: AnnotateOptions
    future: asyncio.Future[list[list[Entity]]]


_T = TypeVar("_T")

#: Characters a micro-batch gathers at most from several requests: a request that would take
#: a batch past it starts the next batch instead, so a short request never shares the many
#: steps of a long one (a single request over it is a batch of its own).
BATCH_CHARS = 32_768


def _chars(request: Request) -> int:
    return sum(len(t) for t in request.texts)


@dataclass
class _Work:
    """One micro-batch being run: the requests it answers and, after its first step, its
    plan."""

    requests: list[Request]
    started: float
    plan: AnnotationPlan | None = None
    in_flight: int = 0
    failed: bool = False

    @property
    def abandoned(self) -> bool:
        """Every client of this batch has gone (their futures were cancelled)."""
        return all(r.future.done() for r in self.requests)


class MicroBatcher:
    """Batches concurrent ``annotate`` calls for one pipeline, and shares the engine fairly.

    Requests that arrive together are merged into one micro-batch (one plan, see
    :class:`~mslm_core.predict.AnnotationPlan`, each text under its request's options). The
    batches being run take turns: each turn runs one step — up to
    :attr:`~mslm_core.predict.AnnotationPlan.STEP_WINDOWS` windows, side by side as the engine
    allows — of the next batch in line. A 100,000-character text therefore holds
    the engine for one step at a time and a short request that arrives behind it is answered
    after a few steps, not after the long one. A batch whose clients have
    all gone (their requests cancelled) is not stepped any further. A batch gathers up to
    :data:`BATCH_CHARS` characters: a short request that arrives with long ones is not made
    to wait for all their steps; and as many texts as the engine asks
    (:attr:`~mslm_core.pipeline.AnnotationPipeline.batch_texts`) within ``max_texts``."""

    def __init__(
        self, pipeline: AnnotationPipeline, wait_s: float, max_texts: int, metrics: Metrics
    ):
        self.pipeline = pipeline
        self.wait_s = wait_s
        # requests merged up to the deployment's bound, or the engine's where it is lower
        self.max_texts = min(max_texts, getattr(pipeline, "batch_texts", None) or max_texts)
        self.metrics = metrics
        self.queue: asyncio.Queue[Request | None] = asyncio.Queue()
        self.closed = False
        # steps in flight: one (a step runs its batches of windows side by side itself, as
        # the engine's workers allow)
        self.parallel = max(1, int(getattr(pipeline, "parallel_steps", 1)))
        self.executor = ThreadPoolExecutor(self.parallel, thread_name_prefix=f"infer-{pipeline.id}")
        self.active: list[_Work] = []
        self.in_flight = 0
        self._turn = 0
        self._changed = asyncio.Event()  # wakes the scheduler
        self._slot = asyncio.Event()  # a step ended (wakes a collector gathering a batch)
        self._collecting = True
        self._held: Request | None = None  # taken from the queue, starts the next batch
        loop = asyncio.get_running_loop()
        self.task = loop.create_task(self._collect())
        self.scheduler = loop.create_task(self._schedule())

    async def annotate(
        self, texts: list[str], options: AnnotateOptions = DEFAULTS
    ) -> list[list[Entity]]:
        """Entities of ``texts`` under ``options``, which the pipeline checked
        (:meth:`~mslm_core.pipeline.AnnotationPipeline.options`); a batch may mix requests of
        several options, each text is read and postprocessed under its request's."""
        if self.closed:
            raise BatcherClosed()
        future: asyncio.Future[list[list[Entity]]] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: self._changed.set())  # a cancel frees its turns
        await self.queue.put(Request(texts, options, future))
        return await future

    # -- collecting micro-batches ---------------------------------------------------------
    async def _collect(self) -> None:
        """Requests become batches. Whatever queues while every engine slot is busy goes into
        the next batch, all together, until a step ends (then the batch starts and takes its
        turns beside the batches already running) or ``max_texts`` is reached; under load a
        batch also waits up to ``wait_s`` for company. A lone request on an idle engine is
        never delayed. Returns at the stop marker, after handing over every request queued
        before :meth:`close`."""
        loop = asyncio.get_running_loop()
        under_load = stopping = False
        try:
            while not stopping:
                first, self._held = self._held or await self.queue.get(), None
                if first is _STOP:
                    return
                batch = [first]
                n, chars = len(first.texts), _chars(first)
                deadline = loop.time() + (self.wait_s if under_load else 0.0)
                while n < self.max_texts:
                    if not self.queue.empty():
                        item = self.queue.get_nowait()
                    elif self.in_flight >= self.parallel:  # busy: gather until a step ends
                        self._slot.clear()
                        came, item = await self._next_or_slot()
                        if not came:
                            break  # a step ended: this batch starts and takes its turns
                    else:
                        remaining = deadline - loop.time()
                        if remaining <= 0:
                            break
                        try:
                            item = await asyncio.wait_for(self.queue.get(), remaining)
                        except TimeoutError:
                            break
                    if item is _STOP:
                        stopping = True
                        break
                    if chars + _chars(item) > BATCH_CHARS:
                        self._held = item  # too much for this batch: it starts the next
                        break
                    batch.append(item)
                    n += len(item.texts)
                    chars += _chars(item)
                under_load = len(batch) > 1
                await self._start(batch)
        finally:
            self._collecting = False
            self._changed.set()

    async def _next_or_slot(self) -> tuple[bool, Request | None]:
        """(True, the next queued item: a request or the stop marker), or (False, None) when
        an engine slot frees first."""
        get = asyncio.ensure_future(self.queue.get())
        slot = asyncio.ensure_future(self._slot.wait())
        await asyncio.wait({get, slot}, return_when=asyncio.FIRST_COMPLETED)
        slot.cancel()
        if get.done():
            return True, get.result()
        get.cancel()
        return False, None

    async def _start(self, batch: list[Request]) -> None:
        live = [r for r in batch if not r.future.done()]
        if live:
            self.metrics.batch_texts.observe(sum(len(r.texts) for r in live))
            self.active.append(_Work(live, time.perf_counter()))
            self._launch()  # at once: a lone request waits for no other task
            self._changed.set()

    # -- running them in turns --------------------------------------------------------------
    async def _schedule(self) -> None:
        while True:
            self._launch()
            if not self._collecting and not self.active and self.in_flight == 0:
                return
            self._changed.clear()
            await self._changed.wait()

    def _launch(self) -> None:
        """Start steps, one batch after the other in turn, up to ``parallel`` in flight."""
        for work in [w for w in self.active if w.in_flight == 0 and (w.abandoned or w.failed)]:
            self.active.remove(work)  # its clients are gone, or it failed: no more steps
        loop = asyncio.get_running_loop()
        idle = 0
        while self.in_flight < self.parallel and self.active and idle < len(self.active):
            self._turn %= len(self.active)
            work = self.active[self._turn]
            self._turn += 1
            step: Callable[[], Any] | None = None
            if work.abandoned or work.failed:
                pass
            elif work.plan is None:
                if work.in_flight == 0:  # its first step makes the plan
                    step = functools.partial(self._first_step, work)
            else:
                plan_step = work.plan.next_step()
                if plan_step is not None:
                    step = functools.partial(self._step, work.plan, plan_step)
                elif work.plan.take_result():  # done with no step left to run (empty texts)
                    step = work.plan.result
            if step is None:
                idle += 1
                continue
            idle = 0
            self.in_flight += 1
            work.in_flight += 1
            done = loop.run_in_executor(self.executor, step)
            done.add_done_callback(functools.partial(self._step_done, work))

    def _first_step(self, work: _Work) -> list[list[Entity]] | None:
        """The plan (sentences, the first chunk's windows) and its first step, in one go: a
        short request is answered by this one step."""
        requests = work.requests
        plan = self.pipeline.preprocess(
            [t for r in requests for t in r.texts], [r.options for r in requests for _ in r.texts]
        )
        work.plan = plan
        step = plan.next_step()
        if step is None:  # nothing to run (empty texts)
            return plan.result() if plan.take_result() else None
        return self._step(plan, step)

    @staticmethod
    def _step(plan: AnnotationPlan, step: Callable[[], None]) -> list[list[Entity]] | None:
        """One step, in an inference thread; the step that completes the plan also builds
        its result (the entities, postprocessed)."""
        step()
        return plan.result() if plan.take_result() else None

    def _step_done(self, work: _Work, done: asyncio.Future[Any]) -> None:
        self.in_flight -= 1
        work.in_flight -= 1
        self._slot.set()
        exc = done.exception()
        if exc is not None:
            work.failed = True
            self._fail(work.requests, exc)
        elif done.result() is not None:  # the last step: the entities
            self.active.remove(work)
            self.metrics.inference_seconds.observe(time.perf_counter() - work.started)
            results, pos = done.result(), 0
            for r in work.requests:
                if not r.future.done():  # a client may have gone away
                    r.future.set_result(results[pos : pos + len(r.texts)])
                pos += len(r.texts)
        self._launch()  # the next turn at once
        self._changed.set()

    @staticmethod
    def _fail(requests: list[Request], exc: BaseException) -> None:
        for r in requests:
            if not r.future.done():
                r.future.set_exception(exc)

    async def close(self) -> None:
        """Take no new request, answer every one already queued or running, then stop —
        without blocking the event loop (the executor is not waited for)."""
        if self.closed:
            return
        self.closed = True
        await self.queue.put(_STOP)
        await asyncio.shield(self.task)
        await asyncio.shield(self.scheduler)
        self.executor.shutdown(wait=False)


@dataclass
class LoadedModel:
    id: str
    pipeline: AnnotationPipeline
    batcher: MicroBatcher
    loaded_at: float = field(default_factory=time.time)

    def describe(self) -> dict[str, Any]:
        return self.pipeline.describe()


class ModelManager:
    """The models this replica holds (LRU, the active one included) and which is active."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session], metrics: Metrics):
        self.settings = settings
        self.context = context_engine(settings)  # a bad site rules file stops the start
        self.vocabularies = VocabularyManager(settings, factory)  # so does a bad vocabulary
        self.factory = factory
        self.metrics = metrics
        self.active_id: str | None = None
        self.last_error: str | None = None
        # the model coming to replace the served one, as of the last refresh (store.serving)
        self.coming: dict[str, Any] | None = None
        self._models: OrderedDict[str, LoadedModel] = OrderedDict()
        self._loading: dict[str, asyncio.Task[LoadedModel]] = {}
        self._lock = asyncio.Lock()
        self._ranking = asyncio.Lock()  # suggest: one ranking at a time

    # -- loading ----------------------------------------------------------------------------
    def _load_sync(self, model_id: str) -> AnnotationPipeline:
        return load_pipeline(
            self.settings,
            self.factory,
            model_id,
            context=self.context,
            linker=self.vocabularies.linker,
            spinning=False,  # the event loop shares these cores
        )

    async def load(self, model_id: str) -> LoadedModel:
        """The loaded model (loading it once even when asked concurrently). Raises KeyError
        for an unknown id and MSLMError when the bundle cannot be served."""
        if model_id in self._models:
            self._models.move_to_end(model_id)
            return self._models[model_id]
        task = self._loading.get(model_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(model_id))
            self._loading[model_id] = task
        return await asyncio.shield(task)

    async def _load(self, model_id: str) -> LoadedModel:
        try:
            pipeline = await asyncio.to_thread(self._load_sync, model_id)
        except (KeyError, MSLMError):
            self.metrics.model_loads.labels("refused").inc()
            raise
        finally:
            self._loading.pop(model_id, None)
        self.metrics.model_loads.labels("loaded").inc()
        pipeline.linker = self.vocabularies.linker  # a vocabulary swapped while it loaded
        s = self.settings
        loaded = LoadedModel(
            model_id,
            pipeline,
            MicroBatcher(pipeline, s.batch_wait_ms / 1000, s.max_batch_texts, self.metrics),
        )
        self._models[model_id] = loaded
        await self._evict(keep=model_id)
        log.info("loaded model %s (%s)", model_id, loaded.describe())
        return loaded

    async def _evict(self, keep: str) -> None:
        """Unload the least recently used models beyond the cache size, never the active one
        nor ``keep`` (the one just loaded for a request: with a cache of 1, it was unloaded
        before its request could use it)."""
        while len(self._models) > self.settings.model_cache_size:
            victim = next((k for k in self._models if k not in (self.active_id, keep)), None)
            if victim is None:
                return
            old = self._models.pop(victim)
            await old.batcher.close()

    async def drop(self, model_id: str) -> None:
        """Forget a model this replica holds (it was deleted)."""
        old = self._models.pop(model_id, None)
        if old is not None:
            await old.batcher.close()
            log.info("dropped deleted model %s", model_id)

    def _existing(self, model_ids: list[str]) -> set[str]:
        with self.factory() as session:
            return stored_models.existing_models(session, model_ids)

    # -- the vocabulary ---------------------------------------------------------------------
    def _link_with(self, linking: Linking) -> None:
        """Every loaded model links with ``linking`` from its next batch on (and models
        loaded later too)."""
        self.vocabularies.current = linking
        for loaded in self._models.values():
            loaded.pipeline.linker = linking.linker

    async def activate_vocabulary(self, vocabulary_id: str | None) -> Linking:
        """Build the vocabulary's linker and, only if that worked, link with it here and
        record it in the store; the other replicas follow within ``model_poll_seconds``."""
        async with self._lock:
            linking = await asyncio.to_thread(self.vocabularies.activate, vocabulary_id)
            self._link_with(linking)
            return linking

    # -- the active model -------------------------------------------------------------------
    async def refresh(self) -> None:
        """Follow the store's active model id and vocabulary, and drop models deleted since
        they were loaded (every replica calls this periodically)."""
        before = self.vocabularies.current
        linking = await asyncio.to_thread(self.vocabularies.follow)
        if linking is not None:
            async with self._lock:
                # a vocabulary activated here while that one was built is newer: the next
                # refresh reads the store again
                if self.vocabularies.current is before:
                    self._link_with(linking)
        held = list(self._models)
        if held:
            existing = await asyncio.to_thread(self._existing, held)
            for model_id in held:
                if model_id not in existing and model_id != self.active_id:
                    await self.drop(model_id)
        wanted, self.coming = await asyncio.to_thread(self._read_active)
        if wanted == self.active_id:
            return
        async with self._lock:
            # read again under the lock: an activation on this replica may have finished
            # between the first read and here, and that stale read must not undo it
            wanted, self.coming = await asyncio.to_thread(self._read_active)
            if wanted == self.active_id:
                return
            if wanted is None:
                self.active_id = None
                return
            try:
                await self.load(wanted)
            except (KeyError, MSLMError) as exc:
                reason = f"model {wanted} cannot be served: {exc}"
                if reason != self.last_error:
                    log.error("%s; still serving %s", reason, self.active_id)
                self.last_error = reason
                return
            self._swap(wanted)

    def _read_active(self) -> tuple[str | None, dict[str, Any] | None]:
        with self.factory() as session:
            return active_model_id(session), coming_model(session)

    def _swap(self, model_id: str) -> None:
        previous, self.active_id, self.last_error = self.active_id, model_id, None
        self.metrics.serving(model_id, previous)
        if previous != model_id:
            log.info("now serving %s (was %s)", model_id, previous)

    async def activate(self, model_id: str) -> LoadedModel:
        """Load (verifying every checksum) and, only if that worked, make active here and in
        the store; the other replicas follow within ``model_poll_seconds``."""
        async with self._lock:
            loaded = await self.load(model_id)

            def write() -> None:
                with self.factory() as session:
                    stored_models.set_active_model(session, model_id)

            await asyncio.to_thread(write)
            self._swap(model_id)
            return loaded

    async def get(self, model_id: str | None) -> LoadedModel:
        """The model to annotate with: ``model_id`` or the active one."""
        wanted = model_id or self.active_id
        if wanted is None:
            raise InferenceError("no model is active yet (train one, then activate it)")
        return await self.load(wanted)

    async def annotate(
        self, model_id: str | None, texts: list[str], options: AnnotateOptions
    ) -> tuple[LoadedModel, list[list[Entity]]]:
        """Entities of ``texts`` with ``model_id`` (or the active model) under ``options``
        (a style the model does not read: StyleError) → (the model that answered, its
        entities). A model unloaded between lookup and queueing (evicted by another request's
        model, or deleted) is looked up again: loaded anew, or KeyError."""
        for _ in range(3):
            loaded = await self.get(model_id)
            checked = loaded.pipeline.options(options)
            try:
                return loaded, await loaded.batcher.annotate(texts, checked)
            except BatcherClosed:
                continue
        raise InferenceError("the model was unloaded three times while this request waited")

    async def uncertainties(
        self, model_id: str | None, texts: list[str], strategy: str
    ) -> tuple[LoadedModel, list[float]]:
        """Each text's uncertainty under ``strategy`` (``mslm_core.active``) with ``model_id``
        (or the active model), one ranking at a time per replica, in a thread: annotation
        requests keep being answered meanwhile."""
        return await self._ranked(
            model_id, lambda p: active.uncertainties(p.extractor.predictor, texts, strategy)
        )

    async def annotate_with_uncertainties(
        self, model_id: str | None, texts: list[str], strategy: str
    ) -> tuple[LoadedModel, list[list[Entity]], list[float]]:
        """:meth:`annotate` and :meth:`uncertainties` from one prediction pass (Label Studio's
        pre-annotations come with their order), run like a ranking."""
        loaded, (entities, scores) = await self._ranked(
            model_id, lambda p: p.annotate_with_uncertainty(texts, strategy)
        )
        return loaded, entities, scores

    async def _ranked(
        self, model_id: str | None, call: Callable[[AnnotationPipeline], _T]
    ) -> tuple[LoadedModel, _T]:
        """``call`` on the model's pipeline in a thread, one ranking at a time per replica."""
        loaded = await self.get(model_id)
        async with self._ranking:
            return loaded, await asyncio.to_thread(call, loaded.pipeline)

    @property
    def active(self) -> LoadedModel | None:
        return self._models.get(self.active_id) if self.active_id else None

    async def close(self) -> None:
        for loaded in list(self._models.values()):
            await loaded.batcher.close()
        self._models.clear()
