"""Client connection limits on uvicorn's httptools protocol: header and body deadlines, a header size cap
and a connection cap (nginx's client_header_timeout, client_body_timeout, large_client_header_buffers and
worker_connections; the idle keep-alive timeout is uvicorn's own `timeout_keep_alive`).

uvicorn alone times out nothing but idle keep-alive connections: one that sends nothing, half its headers
or half its body stays open forever, and enough of them exhaust the file descriptors.

At the cap the oldest connection that is not carrying a request (fresh or idle between requests) is
closed to make room, as nginx drains its reusable connections: a flood of silent connections then only
pushes out its own members, and a real call, which sends its headers at once, gets in. When every
connection is carrying a request, the new one gets a 503 and is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 64 * 1024
"""Request line and headers of one request (Envoy's default is 60 KiB, nginx's 4 x 8 KiB)."""


def _canned(status: bytes, error_type: str, message: str, extra: bytes = b"") -> bytes:
    """A whole JSON error response that closes the connection, written before any request was read."""
    body = b'{"type":"error","error":{"type":"%s","message":"%s"}}' % (error_type.encode(), message.encode())
    head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n%sconnection: close\r\ncontent-length: %d\r\n\r\n"
    return head % (status, extra, len(body)) + body


_REFUSED = _canned(
    b"503 Service Unavailable", "overloaded_error", "switch proxy: too many client connections", b"retry-after: 1\r\n"
)
_TOO_LARGE = _canned(b"431 Request Header Fields Too Large", "invalid_request_error", "request headers over 64 KiB")


class ConnectionLimits:
    """The limits one server applies, and its connections that carry no request, oldest first."""

    def __init__(self, header_timeout: float, body_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_connections = max_connections
        self.live: set[Any] = set()
        self.waiting: dict[Any, None] = {}
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0

    def make_room(self) -> bool:
        """Whether a new connection fits, closing the oldest waiting one if that makes it fit."""
        if len(self.live) < self.max_connections:
            return True
        if not self.waiting:
            return False
        oldest = next(iter(self.waiting))
        self.evicted += 1
        oldest.close_now()
        return True


def limited_protocol(limits: ConnectionLimits) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with `limits` applied (pass it as uvicorn's `http`)."""

    class LimitedHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None
            self._in_request = False
            self._refused = False
            self._header_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if not limits.make_room():
                limits.refused += 1
                self._refused = True
                transport.write(_REFUSED)
                transport.close()
                return
            limits.live.add(self)
            limits.waiting[self] = None
            super().connection_made(transport)
            self._arm(limits.header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._disarm()
            limits.live.discard(self)
            limits.waiting.pop(self, None)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if not self._in_request:
                # The first byte of a request on a kept-alive connection starts its header deadline.
                if self._deadline is None:
                    self._arm(limits.header_timeout)
                self._header_bytes += len(data)
            super().data_received(data)
            if not self._in_request and self._header_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
                self.transport.write(_TOO_LARGE)
                self.close_now()

        def on_headers_complete(self) -> None:
            self._in_request = True
            self._header_bytes = 0
            limits.waiting.pop(self, None)
            self._arm(limits.body_timeout)
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing() or self.pipeline:
                return
            # Between requests: uvicorn's keep-alive timer runs, and the connection may make room for another.
            self._in_request = False
            if self in limits.live:
                limits.waiting[self] = None

        def handle_websocket_upgrade(self) -> None:
            # The WebSocket protocol takes the transport over, with limits of its own.
            self._disarm()
            limits.live.discard(self)
            limits.waiting.pop(self, None)
            super().handle_websocket_upgrade()

        def close_now(self) -> None:
            """Close the connection (it is no longer counted, though its loss is reported later)."""
            self._disarm()
            limits.live.discard(self)
            limits.waiting.pop(self, None)
            self.transport.close()

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            limits.timed_out += 1
            self.close_now()

    return LimitedHttpToolsProtocol
