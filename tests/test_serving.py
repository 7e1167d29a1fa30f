"""The serving engine's micro-batcher and model cache, unit-tested with a fake extractor (a
real one is in the service tests). Issue 18 item 1: a request on a model that another
request's model evicted never answered, and the eviction stalled the event loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from api.metrics import Metrics
from api.serving import BatcherClosed, MicroBatcher


class SlowExtractor:
    """Answers each text with no entity after ``seconds``, in the inference thread."""

    id = "m-slow"

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.started = threading.Event()

    def annotate(self, texts):
        self.started.set()
        time.sleep(self.seconds)
        return [[] for _ in texts]


@pytest.fixture(scope="module")
def metrics():
    return Metrics()


def test_closing_answers_the_running_and_the_queued_requests_without_blocking(metrics):
    async def scenario():
        extractor = SlowExtractor(0.6)
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
        batcher = MicroBatcher(SlowExtractor(0.0), 0.0, 256, metrics)
        assert await batcher.annotate(["a"]) == [[]]
        await batcher.close()
        assert batcher.task.done()
        assert batcher.executor._shutdown

    asyncio.run(scenario())
