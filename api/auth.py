"""API keys: ``Authorization: Bearer <key>``, stored as sha256 digests, with scopes
(``annotate``, ``train``, ``admin``; admin implies the others).

Keys come from ``MSLM_API_KEYS`` (synchronised into the store at start: added, and revoked
when no longer configured). When no key exists at all, the first start creates an admin key
and prints it once. Repeated bad keys from one client are slowed down. A key never appears
in a log: only its id and first characters.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import defaultdict, deque
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from mslm_core.errors import ConfigError
from mslm_settings import Settings
from store import keys
from store.keys import hash_key

log = logging.getLogger(__name__)

SCOPES = ("annotate", "train", "admin")
MIN_KEY_LENGTH = 16


def parse_api_keys(value: str) -> list[tuple[str, frozenset[str]]]:
    """``"SECRET:SCOPE[+SCOPE…],…"`` → [(secret, scopes)]. Raises ValueError naming the
    entry (by position, never by its secret)."""
    out = []
    for n, entry in enumerate(filter(None, (e.strip() for e in value.split(","))), start=1):
        secret, sep, scopes = entry.rpartition(":")
        if not sep or not secret or not scopes:
            raise ValueError(f"entry {n}: expected SECRET:SCOPE[+SCOPE…]")
        names = frozenset(s.strip() for s in scopes.split("+"))
        unknown = sorted(names - set(SCOPES))
        if unknown:
            raise ValueError(f"entry {n}: unknown scope(s) {unknown}; valid: {', '.join(SCOPES)}")
        if len(secret) < MIN_KEY_LENGTH:
            raise ValueError(
                f"entry {n}: the key is shorter than {MIN_KEY_LENGTH} characters; use a long "
                "random secret (python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        out.append((secret, names))
    return out


def configured_keys(settings: Settings) -> list[tuple[str, frozenset[str]]]:
    """``MSLM_API_KEYS`` parsed; a bad entry is a :class:`ConfigError` naming the variable and
    the entry's position (never its secret). The API checks it when it is built."""
    if settings.api_keys is None or not settings.api_keys.get_secret_value().strip():
        return []
    try:
        return parse_api_keys(settings.api_keys.get_secret_value())
    except ValueError as exc:
        raise ConfigError(f"MSLM_API_KEYS: {exc}") from None


@dataclass(frozen=True)
class Principal:
    key_id: str
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes

    @property
    def owner(self) -> str | None:
        """Whose datasets, jobs and evaluations this key sees: its own (its id), or every
        one's (None) for an admin key."""
        return None if "admin" in self.scopes else self.key_id


def sync_configured_keys(session: Session, settings: Settings) -> None:
    """Make the store's ``env`` keys equal to ``MSLM_API_KEYS``."""
    keys.sync_configured(session, configured_keys(settings))


def announce_admin_key(secret: str) -> None:
    """Print the bootstrap key once, on stderr, outside the log (it is a credential)."""
    line = "=" * 72
    sys.stderr.write(
        f"\n{line}\nNo API key was configured: created an ADMIN key. It is shown only now.\n"
        f"  {secret}\nUse it as 'Authorization: Bearer <key>'. Set MSLM_API_KEYS to manage "
        f"keys yourself.\n{line}\n\n"
    )
    sys.stderr.flush()


class KeyCache:
    """digest → principal, refreshed from the store every ``ttl`` seconds (revocations take
    effect within ``ttl``).

    One reload at a time: requests that find the cache stale wait for the reload under way
    instead of each starting their own, and a reload that began after a request arrived
    answers it. Reloads never overlap, so an older read cannot land after a newer one (a key
    revoked between them would come back until the next reload)."""

    def __init__(self, factory: sessionmaker[Session], ttl: float = 10.0):
        self.factory, self.ttl = factory, ttl
        self._keys: dict[str, Principal] = {}
        self._loaded = float("-inf")  # when the read behind ``_keys`` began
        self._lock = asyncio.Lock()

    def _read(self) -> dict[str, Principal]:
        with self.factory() as session:
            rows = keys.usable_keys(session)
            return {r.key_hash: Principal(r.id, frozenset(r.scopes.split("+"))) for r in rows}

    async def _refresh(self, asked: float) -> None:
        """Reload unless a reload that began at or after ``asked`` already has; when the store
        cannot answer (a restart), keep the keys already known so that annotation goes on, and
        try again after ``ttl``."""
        async with self._lock:
            if self._loaded >= asked:
                return
            began = time.monotonic()
            try:
                self._keys = await asyncio.to_thread(self._read)
            except Exception as exc:  # the store may be restarting
                log.warning(
                    "API keys not reloaded (%s); using the %d known",
                    type(exc).__name__,
                    len(self._keys),
                )
            self._loaded = began

    async def lookup(self, secret: str) -> Principal | None:
        asked = time.monotonic()
        if asked - self._loaded > self.ttl:
            await self._refresh(asked - self.ttl)
        digest = hash_key(secret)
        found = self._keys.get(digest)
        if found is None and asked - self._loaded > 1.0:
            await self._refresh(asked)  # a key created moments ago
            found = self._keys.get(digest)
        return found


class BadKeyThrottle:
    """After ``free`` bad keys within ``window`` seconds from one client, each further
    attempt waits 0.25 s × 2^(n−free), at most ``max_delay`` — a brute force slows to a
    crawl while a typo costs nothing."""

    def __init__(self, free: int = 5, window: float = 60.0, max_delay: float = 4.0):
        self.free, self.window, self.max_delay = free, window, max_delay
        self._failures: dict[str, deque[float]] = defaultdict(deque)

    def _recent(self, client: str) -> deque[float]:
        q = self._failures[client]
        cutoff = time.monotonic() - self.window
        while q and q[0] < cutoff:
            q.popleft()
        return q

    def delay(self, client: str) -> float:
        n = len(self._recent(client))
        if n < self.free:
            return 0.0
        return float(min(self.max_delay, 0.25 * 2 ** (n - self.free)))

    def reset(self) -> None:
        self._failures.clear()

    def failed(self, client: str) -> None:
        self._recent(client).append(time.monotonic())
        if len(self._failures) > 10_000:  # bound memory under a spray of addresses
            for key in list(self._failures)[:5_000]:
                del self._failures[key]
