"""uvicorn's httptools protocol with bounds on the head of a request and on connections.

httptools (uvicorn's fastest HTTP/1.1 parser, and its default) has no limit on the request
line and headers: as it comes, it buffers a 100 MB ``Authorization`` header whole before
anything can refuse it. h11 has such a limit but serves 15–20 % fewer requests per second
here. This subclass counts the bytes that arrive while a request's head is incomplete and
answers 431 — then closes the connection — once they pass ``MAX_HEAD_BYTES``; a head may
overshoot by at most one read (the bytes of a read that also starts a new request are not
counted, so a long pipelined body never counts against the next head).

A head must also arrive whole within ``head_timeout`` seconds of its first byte — or of the
connection, for its first request — else the connection is answered 408 and closed; and a body
within ``head_timeout`` seconds plus its length at ``min_body_rate`` bytes per second (a body of
unknown length: at most :data:`MAX_BODY_SECONDS`), else 408 and closed too: a client that
sends a body byte by byte holds its connection for seconds, not hours. And a process holds at
most ``max_connections`` connections: past it, the oldest connection that is not being
answered (waiting for its head or its body, or idle) is closed — or the new one, when every
connection is being answered — so the process never runs out of descriptors and slow clients
cannot lock new ones out. Idle keep-alive connections are closed by uvicorn after
``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 1000
#: The slowest a body may arrive (bytes per second, on average, after the head's timeout).
MIN_BODY_RATE = 64 * 1024
#: The longest a body of unknown length (chunked) may take to arrive.
MAX_BODY_SECONDS = 300.0


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    max_head_bytes = MAX_HEAD_BYTES
    head_timeout = HEAD_TIMEOUT_S
    max_connections = MAX_CONNECTIONS
    min_body_rate = MIN_BODY_RATE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # a connection starts with a request's head
        self._in_body = False  # its head is in, its body not yet whole
        self._head_bytes = 0
        self._head_deadline: asyncio.TimerHandle | None = None
        self._body_deadline: asyncio.TimerHandle | None = None
        self._opened_at = 0.0

    @classmethod
    def configured(
        cls, head_timeout: float, max_connections: int, min_body_rate: int = MIN_BODY_RATE
    ) -> type:
        """This protocol with other bounds (uvicorn takes a class)."""
        return type(
            cls.__name__,
            (cls,),
            {
                "head_timeout": head_timeout,
                "max_connections": max_connections,
                "min_body_rate": min_body_rate,
            },
        )

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opened_at = self.loop.time()
        if len(self.connections) > self.max_connections:
            # the oldest connection that is not being answered (still waiting for its head
            # or its body, or idle between two) goes, so that slow or idle clients cannot
            # lock new ones out; when every one is being answered, the new one goes
            waiting = [
                c
                for c in self.connections
                if isinstance(c, BoundedHttpToolsProtocol)
                and c is not self
                and c._idle_or_in_head()
            ]
            victim = min(waiting, key=lambda c: c._opened_at, default=self)
            self.logger.warning(
                "over %d connections: %s closed",
                self.max_connections,
                "a new one" if victim is self else "the oldest waiting one",
            )
            victim.transport.abort()  # its descriptor goes now
            if victim is self:
                return
        self._arm_head_deadline()

    def _idle_or_in_head(self) -> bool:
        """Not being answered: waiting for a request's head or the rest of its body, or kept
        alive between two requests."""
        return self._in_head or self._in_body or self.cycle is None or self.cycle.response_complete

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        self._disarm_body_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if not self._in_head or self.transport.is_closing():
            return
        self.logger.info(
            "request head not complete after %.0f s: connection closed", self.head_timeout
        )
        self._send_and_close(408, "Request Timeout", "request head not received in time")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._arm_head_deadline()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm_head_deadline()
        super().on_headers_complete()
        length = self._content_length()
        if length != 0:  # a body follows: it has a deadline of its own
            self._in_body = True
            seconds = (
                MAX_BODY_SECONDS
                if length is None
                else self.head_timeout + length / max(self.min_body_rate, 1)
            )
            self._body_deadline = self.loop.call_later(
                min(seconds, MAX_BODY_SECONDS), self._body_too_slow
            )

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm_body_deadline()
        super().on_message_complete()

    def _content_length(self) -> int | None:
        """The request's Content-Length (0: none, None: chunked or unreadable)."""
        headers = dict(self.headers) if getattr(self, "headers", None) else {}
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            return None
        value = headers.get(b"content-length")
        if value is None:
            return 0
        try:
            return max(int(value), 0)
        except ValueError:
            return None

    def _disarm_body_deadline(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _body_too_slow(self) -> None:
        self._body_deadline = None
        if not self._in_body or self.transport.is_closing():
            return
        self.logger.info("request body not complete in time: connection closed")
        started = self.cycle is not None and self.cycle.response_started
        if started:  # the app has answered already (a refusal before the body): just close
            self.transport.close()
            return
        self._send_and_close(408, "Request Timeout", "request body not received in time")

    def data_received(self, data: bytes) -> None:
        started_in_head = self._in_head
        super().data_received(data)
        if not (started_in_head and self._in_head) or self.transport.is_closing():
            return
        self._head_bytes += len(data)  # every byte of this read belongs to the head
        if self._head_bytes > self.max_head_bytes:
            self.logger.warning("request head over %d bytes refused", self.max_head_bytes)
            self._refuse()

    def _refuse(self) -> None:
        msg = f"request line and headers longer than {self.max_head_bytes} bytes"
        self._send_and_close(431, "Request Header Fields Too Large", msg)

    def _send_and_close(self, status: int, phrase: str, msg: str) -> None:
        self._disarm_head_deadline()
        self._disarm_body_deadline()
        self.transport.write(
            f"HTTP/1.1 {status} {phrase}\r\n".encode("ascii")
            + b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: " + str(len(msg)).encode("ascii") + b"\r\n"
            b"connection: close\r\n\r\n" + msg.encode("ascii")
        )
        self.transport.close()


def __getattr__(name: str) -> Any:
    """``SettingsProtocol``: :class:`BoundedHttpToolsProtocol` with this process's settings
    (MSLM_*). uvicorn's processes (``mslm serve --workers N``) are started by spawning, which
    pickles the configuration: a class made at run time cannot be pickled, an import string
    to this name can, and each process makes the class from the same environment."""
    if name == "SettingsProtocol":
        from mslm_settings import get_settings

        s = get_settings()
        made = BoundedHttpToolsProtocol.configured(
            s.header_timeout_seconds, s.max_connections, s.min_body_rate_kb * 1024
        )
        globals()[name] = made
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
