"""The part of the client that does no I/O, shared by :class:`Client` and :class:`AsyncClient`.

A :class:`Call` describes one logical operation (method, path, body, how to read the answer,
whether it is safe to send twice). :meth:`Protocol.exchange` turns it into a generator that
yields what to do — :class:`Send` this request, :class:`Sleep` this long — and is sent back
the outcome (an ``httpx.Response`` or the ``httpx.TransportError`` raised); it returns the
parsed result or raises. The sync and async clients only drive it, so request building,
retries, back-off and error mapping exist once.
"""

from __future__ import annotations

import logging
import os
import random
import uuid
from collections.abc import Callable, Generator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, TypeAlias, TypeVar

import httpx

from ._version import __version__
from .errors import APIConnectionError, APIError, MSLMError

log = logging.getLogger("mslm_client")
T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
#: an uploaded file: a path, its bytes, or an open binary file
FileInput: TypeAlias = str | os.PathLike[str] | bytes | IO[bytes]
Outcome: TypeAlias = httpx.Response | httpx.TransportError

# Raised before any byte of the request left this machine: safe to retry any request.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


@dataclass
class Call(Generic[T]):
    """One logical operation against the API."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    json: Any = None
    data: dict[str, str] | None = None
    files: dict[str, FileInput] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: may be sent again after it possibly reached the service (no side effect, or made safe
    #: by an Idempotency-Key); GET, PUT and DELETE always are
    idempotent: bool = False
    #: statuses besides 2xx that are an answer, not an error (``/readyz`` answers 503)
    answers: frozenset[int] = frozenset()

    @property
    def retry_safe(self) -> bool:
        return self.idempotent or self.method in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE")


@dataclass(frozen=True)
class Send:
    request: httpx.Request


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step: TypeAlias = Send | Sleep


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential back-off with jitter: retry ``k`` (0-based) waits a random time in
    ``[d/2, d]`` with ``d = min(max_backoff, backoff × 2^k)``, or what ``Retry-After`` asks
    (up to ``max_retry_after`` seconds; a longer wait is the caller's decision, so the error
    is raised with its ``retry_after``)."""

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 300.0
    statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("max_retries, backoff and max_backoff must not be negative")

    def delay(self, retry: int, rng: random.Random) -> float:
        ceiling = min(self.max_backoff, self.backoff * 2.0**retry)
        return ceiling / 2 + rng.uniform(0.0, ceiling / 2)


class Protocol:
    """Configuration and the request/response logic of a client (no I/O)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = 30.0,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
    ):
        url = base_url or os.environ.get("MSLM_URL") or DEFAULT_URL
        self.base_url = httpx.URL(url.rstrip("/") + "/")
        self.api_key = api_key if api_key is not None else os.environ.get("MSLM_API_KEY")
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.retry = retry or RetryPolicy()
        self.headers = {"User-Agent": _user_agent(), "Accept": "application/json"}
        if self.api_key:
            self.headers["Authorization"] = f"Bearer {self.api_key}"
        self.headers.update(headers or {})
        self.rng = rng or random.Random()

    def __repr__(self) -> str:  # never the key
        return f"<{type(self).__name__} {self.base_url}>"

    def build(self, call: Call[Any], request_id: str, files: ExitStack) -> httpx.Request:
        """The request for one attempt; files opened for it are closed with ``files``."""
        return httpx.Request(
            call.method,
            self.base_url.join(call.path.lstrip("/")),
            params=call.params,
            json=call.json,
            data=call.data,
            files=_open_files(call.files, files) if call.files else None,
            headers={**self.headers, "X-Request-ID": request_id, **call.headers},
            extensions={"timeout": self.timeout.as_dict()},
        )

    def exchange(self, call: Call[T]) -> Generator[Step, Outcome | None, T]:
        """Send ``call`` (retrying as the policy allows) and return its parsed result."""
        request_id = uuid.uuid4().hex  # one id for every attempt: the service logs show them
        retry = 0
        while True:
            with ExitStack() as files:
                outcome = yield Send(self.build(call, request_id, files))
            assert outcome is not None, "the driver sends back a response or an exception"
            error: MSLMError
            if isinstance(outcome, httpx.Response):
                status = outcome.status_code
                if 200 <= status < 300 or status in call.answers:
                    return _parse(call, outcome)
                if status == 404 and retry and call.method == "DELETE":
                    # an earlier attempt deleted it but its answer was lost: done
                    return _parse(call, outcome)
                error = APIError.from_response(outcome)
                wait = self._wait_after_status(call, error, retry)
            else:
                error = APIConnectionError(
                    f"{call.method} {call.path}: {type(outcome).__name__}: {outcome} "
                    f"(service {self.base_url}, request {request_id})"
                )
                error.__cause__ = outcome
                wait = self._wait_after_transport_error(call, outcome, retry)
            if wait is None:
                raise error
            retry += 1
            log.info(
                "%s %s: %s; retry %d/%d in %.2fs",
                call.method,
                call.path,
                error,
                retry,
                self.retry.max_retries,
                wait,
            )
            yield Sleep(wait)

    def _wait_after_status(self, call: Call[Any], error: APIError, retry: int) -> float | None:
        if retry >= self.retry.max_retries or error.status not in self.retry.statuses:
            return None
        if not call.retry_safe:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.retry.max_retry_after else None
        return self.retry.delay(retry, self.rng)

    def _wait_after_transport_error(
        self, call: Call[Any], exc: httpx.TransportError, retry: int
    ) -> float | None:
        if retry >= self.retry.max_retries:
            return None
        if not (call.retry_safe or isinstance(exc, _NOT_SENT)):
            return None  # it may have reached the service: sending it again could repeat it
        return self.retry.delay(retry, self.rng)


def _parse(call: Call[T], response: httpx.Response) -> T:
    try:
        return call.parse(response)
    except (ValueError, KeyError, TypeError) as exc:
        raise MSLMError(
            f"{call.method} {call.path}: unexpected answer from the service "
            f"({response.status_code}, {response.headers.get('content-type', 'no content type')})"
            f": {type(exc).__name__}: {exc}"
        ) from exc


def _open_files(
    files: Mapping[str, FileInput], stack: ExitStack
) -> dict[str, tuple[str, IO[bytes] | bytes]]:
    out: dict[str, tuple[str, IO[bytes] | bytes]] = {}
    for part, given in files.items():
        if isinstance(given, (str, os.PathLike)):
            path = Path(given)
            handle = stack.enter_context(open(path, "rb"))  # noqa: SIM115 (closed by the stack)
            out[part] = (path.name, handle)
        elif isinstance(given, bytes):
            out[part] = (part, given)
        else:
            if given.seekable():  # an attempt after a failed one reads it from the start
                position = given.tell()
                stack.callback(given.seek, position)
            name = getattr(given, "name", None)
            out[part] = (Path(name).name if isinstance(name, str) else part, given)
    return out


def _user_agent() -> str:
    return f"mslm-client/{__version__} httpx/{httpx.__version__}"
