"""The API key cache's reloads: one at a time, and never an older read over a newer one.

The store is a fake here (a list of rows and a counter of reads); the cache runs as the
service runs it, on an event loop with each read in a worker thread."""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass

import pytest

from api import auth
from store.keys import hash_key


@dataclass
class Row:
    id: str
    key_hash: str
    scopes: str


class FakeStore:
    """Rows the cache reads, how many reads ran, and the most that ran at once."""

    def __init__(self, read_seconds: float = 0.05):
        self.rows = [Row("k1", hash_key("old-key"), "annotate")]
        self.read_seconds = read_seconds
        self.reads = self.running = self.most_at_once = 0
        self._guard = threading.Lock()

    def usable_keys(self, _session: object) -> list[Row]:
        with self._guard:
            self.reads += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            rows = list(self.rows)  # what the store holds when the read begins
        time.sleep(self.read_seconds)
        with self._guard:
            self.running -= 1
        return rows


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> FakeStore:
    fake = FakeStore()
    monkeypatch.setattr(auth.keys, "usable_keys", fake.usable_keys)
    return fake


def _cache(ttl: float = 10.0) -> auth.KeyCache:
    return auth.KeyCache(lambda: nullcontext(object()), ttl=ttl)  # type: ignore[arg-type]


def test_a_burst_on_a_stale_cache_reads_the_store_once(store: FakeStore) -> None:
    cache = _cache()

    async def burst() -> list[auth.Principal | None]:
        return await asyncio.gather(*(cache.lookup("old-key") for _ in range(20)))

    found = asyncio.run(burst())
    assert store.reads == 1
    assert [p.key_id if p else None for p in found] == ["k1"] * 20


def test_unknown_keys_at_once_read_the_store_at_most_twice_more(store: FakeStore) -> None:
    """A read answers the requests that arrived before it began; those that arrived while it
    ran share one more."""
    cache = _cache()
    asyncio.run(cache.lookup("old-key"))
    cache._loaded -= 2.0  # the last read began two seconds ago

    async def burst() -> list[auth.Principal | None]:
        return await asyncio.gather(*(cache.lookup(f"wrong-{i}") for i in range(20)))

    assert asyncio.run(burst()) == [None] * 20
    assert 2 <= store.reads <= 3  # the first read, then at most two for the whole burst
    assert store.most_at_once == 1


def test_a_key_created_after_the_last_read_is_found_at_once(store: FakeStore) -> None:
    cache = _cache()
    asyncio.run(cache.lookup("old-key"))
    cache._loaded -= 2.0
    store.rows.append(Row("k2", hash_key("new-key"), "annotate+train"))
    found = asyncio.run(cache.lookup("new-key"))
    assert found is not None and found.key_id == "k2" and "train" in found.scopes


def test_reloads_never_overlap_so_a_revoked_key_stays_revoked(store: FakeStore) -> None:
    """A slow read that saw the old key, and a later one after its revocation: run at once,
    the later one must land last."""
    cache = _cache(ttl=0.0)  # every lookup finds the cache stale

    async def scenario() -> auth.Principal | None:
        first = asyncio.create_task(cache.lookup("old-key"))
        await asyncio.sleep(0.01)  # the first read is under way and has seen the old key
        store.rows = []  # the key is revoked
        await asyncio.sleep(0.001)
        second = asyncio.create_task(cache.lookup("old-key"))
        await asyncio.gather(first, second)
        return await cache.lookup("old-key")

    assert asyncio.run(scenario()) is None
    assert store.most_at_once == 1
    assert store.reads >= 2
