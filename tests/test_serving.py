"""The serving engine's micro-batcher and model cache, unit-tested with a fake pipeline (a
real one is in the service tests). Issue 18 item 1: a request on a model that another
request's model evicted never answered, and the eviction stalled the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict
from types import SimpleNamespace

import pytest

from api.metrics import Metrics
from api.serving import BatcherClosed, MicroBatcher, ModelManager
from mslm_core.pipeline import AnnotateOptions
from store import models as stored_models


class FakePlan:
    """An annotation plan of ``steps`` steps of ``seconds`` each; every text gets no entity."""

    def __init__(self, texts, steps: int, seconds: float, started: threading.Event):
        self.texts, self.left, self.seconds, self.started = list(texts), steps, seconds, started
        self.running = 0
        self.steps_run = 0
        self.lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self.left == 0 and self.running == 0

    def next_step(self):
        with self.lock:
            if self.left == 0:
                return None
            self.left -= 1
            self.running += 1
        return self._step

    def _step(self):
        self.started.set()
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
            self.steps_run += 1

    def take_result(self) -> bool:
        with self.lock:
            if self.left or self.running or getattr(self, "taken", False):
                return False
            self.taken = True
            return True

    def result(self):
        return [[] for _ in self.texts]


class SlowPipeline:
    """Plans of ``steps`` steps (a text longer than 1,000 characters: ``long_steps``) of
    ``seconds`` each, run in the batcher's threads."""

    id = "m-slow"

    def __init__(self, seconds: float, steps: int = 1, long_steps: int = 1, parallel: int = 1):
        self.seconds, self.steps, self.long_steps = seconds, steps, long_steps
        self.parallel_steps = parallel
        self.started = threading.Event()
        self.plans: list[FakePlan] = []

    def preprocess(self, texts, options):
        steps = self.long_steps if any(len(t) > 1000 for t in texts) else self.steps
        plan = FakePlan(texts, steps, self.seconds, self.started)
        plan.options = options
        self.plans.append(plan)
        return plan


@pytest.fixture(scope="module")
def metrics():
    return Metrics()


def test_the_active_model_gauge_names_the_served_model_alone():
    one = Metrics()  # one API process: the model served before is gone from the page
    one.serving("m-a", None)
    one.serving("m-b", "m-a")
    page = one.render().decode()
    assert 'mslm_active_model_info{model="m-b"} 1.0' in page
    assert 'model="m-a"' not in page


def _bare_manager(read_active, vocabularies) -> ModelManager:
    """A model manager with no settings, store or vocabulary of its own: fakes."""
    manager = ModelManager.__new__(ModelManager)
    manager.active_id = manager.last_error = manager.coming = None
    manager._models, manager._loading = OrderedDict(), {}
    manager._lock, manager._ranking = asyncio.Lock(), asyncio.Lock()
    manager.metrics = Metrics()
    manager.vocabularies = vocabularies
    manager.factory = lambda: contextlib.nullcontext(None)
    manager._read_active = read_active
    return manager


def _refresh_around(manager, reached: threading.Event, go_on: threading.Event, act) -> None:
    """``manager.refresh()`` held where it sets ``reached``, ``act()`` run meanwhile, then
    the refresh let go on to its end."""

    async def scenario():
        refresh = asyncio.create_task(manager.refresh())
        assert await asyncio.to_thread(reached.wait, 5)
        await act()
        go_on.set()
        await refresh

    asyncio.run(scenario())


def test_a_refresh_that_read_the_store_before_an_activation_does_not_undo_it(monkeypatch):
    """The periodic refresh read "no model" from the store; an admin's activation on this
    replica finished before that refresh took the lock. The model stays served (without the
    second read under the lock: 503 "no model is active yet" right after activate's 200)."""
    store: dict[str, str | None] = {"active": None}
    first_read, go_on = threading.Event(), threading.Event()
    reads: list[str | None] = []

    def read_active():
        reads.append(store["active"])  # what the store says now ...
        if len(reads) == 1:
            first_read.set()
            go_on.wait(5)  # ... handed back after the activation: stale
        return reads[-1], None

    async def load(model_id):
        return SimpleNamespace(id=model_id)

    manager = _bare_manager(read_active, SimpleNamespace(current=None, follow=lambda: None))
    manager.load = load
    monkeypatch.setattr(stored_models, "set_active_model", lambda _, m: store.update(active=m))
    _refresh_around(manager, first_read, go_on, lambda: manager.activate("m-new"))
    assert manager.active_id == "m-new"
    assert reads == [None, "m-new"]  # the refresh looked again under the lock


def test_a_vocabulary_built_by_a_refresh_does_not_replace_one_activated_meanwhile():
    """The refresh built the vocabulary another replica had activated (slow); an admin
    activated a newer one here meanwhile. The newer one stays until the store says else."""
    built, go_on = threading.Event(), threading.Event()

    def follow():
        built.set()
        go_on.wait(5)
        return SimpleNamespace(vocabulary_id="v-other", linker="other")

    vocabularies = SimpleNamespace(
        current=SimpleNamespace(vocabulary_id=None, linker=None),
        follow=follow,
        activate=lambda v: SimpleNamespace(vocabulary_id=v, linker="new"),
    )
    manager = _bare_manager(lambda: (None, None), vocabularies)
    _refresh_around(manager, built, go_on, lambda: manager.activate_vocabulary("v-new"))
    assert vocabularies.current.vocabulary_id == "v-new"


def test_closing_answers_the_running_and_the_queued_requests_without_blocking(metrics):
    async def scenario():
        extractor = SlowPipeline(0.6)
        batcher = MicroBatcher(extractor, 0.0, 256, metrics)
        running = asyncio.create_task(batcher.annotate(["a"]))
        await asyncio.to_thread(extractor.started.wait, 5)
        queued = asyncio.create_task(batcher.annotate(["b", "c"]))
        await asyncio.sleep(0)  # queued behind the running batch
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(ticker())
        started = time.perf_counter()
        await asyncio.wait_for(batcher.close(), 10)
        closing = time.perf_counter() - started
        beat.cancel()
        assert await asyncio.wait_for(running, 1) == [[]]
        assert await asyncio.wait_for(queued, 1) == [[], []]
        # the event loop kept running while the batches finished (it was blocked before)
        assert ticks >= closing / 0.01 * 0.5, (ticks, closing)
        with pytest.raises(BatcherClosed):
            await batcher.annotate(["late"])
        await batcher.close()  # twice is fine

    asyncio.run(scenario())


def test_a_closed_batcher_is_done_with_its_thread(metrics):
    async def scenario():
        batcher = MicroBatcher(SlowPipeline(0.0), 0.0, 256, metrics)
        assert await batcher.annotate(["a"]) == [[]]
        await batcher.close()
        assert batcher.task.done()
        assert batcher.executor._shutdown

    asyncio.run(scenario())


def test_a_long_text_does_not_hold_up_a_short_one_that_comes_after_it(metrics):
    """Issue 18, item 5: three 100,000-character texts blocked every other annotation for
    73 s. Batches now take turns step by step: the short request is answered within a few
    steps of the long one's, which still completes."""

    async def scenario():
        extractor = SlowPipeline(0.02, steps=1, long_steps=100)  # long: 2 s of steps
        batcher = MicroBatcher(extractor, 0.0, 256, metrics)
        started = time.perf_counter()
        long = asyncio.create_task(batcher.annotate(["." * 100_000]))
        await asyncio.to_thread(extractor.started.wait, 5)
        short_at = time.perf_counter()
        assert await asyncio.wait_for(batcher.annotate(["aspirin"]), 5) == [[]]
        short_took = time.perf_counter() - short_at
        assert not long.done() and short_took < 0.5, short_took
        assert await asyncio.wait_for(long, 10) == [[]]
        assert time.perf_counter() - started >= 100 * 0.02
        assert extractor.plans[0].steps_run == 100
        await batcher.close()

    asyncio.run(scenario())


def test_work_of_a_client_that_left_is_dropped(metrics):
    """Issue 18, item 5: work went on after the client left. A cancelled request's batch is
    not stepped any more, and the engine serves the next request at once."""

    async def scenario():
        extractor = SlowPipeline(0.02, steps=1, long_steps=500, parallel=2)  # 5 s of steps
        batcher = MicroBatcher(extractor, 0.0, 256, metrics)
        long = asyncio.create_task(batcher.annotate(["." * 100_000]))
        await asyncio.to_thread(extractor.started.wait, 5)
        long.cancel()
        await asyncio.sleep(0.2)
        ran = extractor.plans[0].steps_run
        assert await asyncio.wait_for(batcher.annotate(["aspirin"]), 2) == [[]]
        await asyncio.sleep(0.2)
        assert extractor.plans[0].steps_run <= ran + 2  # at most the steps in flight
        assert ran < 50 and batcher.active == [] and batcher.in_flight == 0
        await batcher.close()

    asyncio.run(scenario())


def test_requests_that_wait_for_a_busy_engine_share_one_batch(metrics):
    async def scenario():
        extractor = SlowPipeline(0.3)
        batcher = MicroBatcher(extractor, 0.0, 256, metrics)
        first = asyncio.create_task(batcher.annotate(["a"]))
        await asyncio.to_thread(extractor.started.wait, 5)
        # each request's texts are read and postprocessed under its own options
        options = [AnnotateOptions(), AnnotateOptions(style="X"), AnnotateOptions(linking=False)]
        others = [
            asyncio.create_task(batcher.annotate([t, t], o))
            for t, o in zip("bcd", options, strict=True)
        ]
        assert await asyncio.wait_for(asyncio.gather(first, *others), 5) == [[[]]] + [[[], []]] * 3
        assert [len(p.texts) for p in extractor.plans] == [1, 6]  # b, c, d: one batch
        assert extractor.plans[1].options == [o for o in options for _ in "tt"]
        await batcher.close()

    asyncio.run(scenario())


def test_an_engine_that_runs_steps_side_by_side_gets_batches_of_its_size(metrics):
    """An engine that bounds a batch (``batch_texts``, one step's windows for int8 on CPU)
    gets the queued requests in batches of that size at most, within the deployment's bound:
    many clients of one sentence each make several batches, not one."""

    async def scenario():
        extractor = SlowPipeline(0.3, parallel=2)
        extractor.batch_texts = 2
        batcher = MicroBatcher(extractor, 0.0, 256, metrics)
        assert batcher.max_texts == 2
        first = asyncio.create_task(batcher.annotate(["a"]))
        await asyncio.to_thread(extractor.started.wait, 5)
        others = [asyncio.create_task(batcher.annotate([t])) for t in "bcdef"]
        answers = await asyncio.wait_for(asyncio.gather(first, *others), 10)
        assert answers == [[[]]] * 6
        sizes = [len(p.texts) for p in extractor.plans]
        assert sum(sizes) == 6 and max(sizes) == 2 and len(sizes) >= 4, sizes
        await batcher.close()

    asyncio.run(scenario())


def test_a_short_request_never_shares_a_batch_with_long_ones(metrics):
    """Issue 18, item 5, as replayed on MiniLM (tests/test_live_attacks.py): a short request that
    queued with three 100,000-character texts joined their batch and waited for all their
    steps (50 s). A batch gathers at most BATCH_CHARS characters: the long texts each start
    their own, and the short one gets its turns beside them."""

    async def scenario():
        extractor = SlowPipeline(0.02, steps=1, long_steps=50)  # long: 1 s of steps each
        batcher = MicroBatcher(extractor, 0.0, 256, metrics)
        first = asyncio.create_task(batcher.annotate(["a"]))
        await asyncio.to_thread(extractor.started.wait, 5)  # busy: the next ones queue
        longs = [asyncio.create_task(batcher.annotate(["." * 100_000])) for _ in range(3)]
        await asyncio.sleep(0)
        short_at = time.perf_counter()
        assert await asyncio.wait_for(batcher.annotate(["aspirin"]), 5) == [[]]
        short_took = time.perf_counter() - short_at
        assert short_took < 0.5 and not any(t.done() for t in longs), short_took
        assert await asyncio.wait_for(asyncio.gather(first, *longs), 20) == [[[]]] * 4
        assert sorted(len(p.texts) for p in extractor.plans) == [1, 1, 1, 1, 1]
        await batcher.close()

    asyncio.run(scenario())
