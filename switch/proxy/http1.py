"""One upstream HTTP/1.1 connection and the response streamed over it.

A small asyncio protocol around httptools' C parser: one write per request, body chunks handed
to the reader as they arrive without copying, and no task or timer created per chunk. A read
timeout is checked lazily (only while the reader waits), so a chunk costs a deque append and a
wake-up. The pool that owns connections is in `upstream`.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import zlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Protocol, cast

import httptools

from switch.errors import UpstreamError, UpstreamTimeout

_HIGH_WATER = 1 << 20  # pause reading the upstream when this much is buffered (slow clients)
_LOW_WATER = 1 << 18
MAX_HEAD_BYTES = 64 * 1024
"""Largest status line plus headers an upstream may send (Envoy's default is 60 KiB, nginx's 32-64 KiB)."""
MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest whole (non-streamed) upstream body, after any decompression, that `read()` keeps."""
_INFLATE_PIECE = 1 << 20  # at most this much decompressed output per step: a bomb never lands in one allocation


class ConnectionPool(Protocol):
    """Where a connection goes back when its response is complete and it can be reused."""

    def release(self, connection: Connection) -> None: ...


class _NoCallbacks:
    pass


_DETACHED_PARSER = httptools.HttpResponseParser(_NoCallbacks())


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection carrying one request at a time."""

    def __init__(self, pool: ConnectionPool, key: tuple[str, str, int], loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.key = key
        self.loop = loop
        """The loop it runs on, for its responses (asyncio.get_running_loop() is a getpid() call on Python 3.11)."""
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.response: UpstreamResponse | None = None
        self._paused = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:
            self.closed = True  # unsolicited bytes: the connection is no longer trustworthy
            if self.transport is not None:
                self.transport.close()
            return
        response.last_activity = response.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            response.fail(UpstreamError("upstream sent a malformed HTTP response", kind="protocol"))
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            return
        if response.status_code == 0:
            # Still in the status line or headers: the parser keeps them, so their size is capped.
            response.head_bytes += len(data)
            if response.head_bytes > MAX_HEAD_BYTES:
                too_long = f"upstream sent more than {MAX_HEAD_BYTES} bytes of status line and headers"
                response.fail(UpstreamError(too_long, kind="protocol"))
                self.closed = True
                if self.transport is not None:
                    self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.parser = _DETACHED_PARSER  # the parser holds this protocol: drop the cycle with the socket
        response = self.response
        if response is not None and not response.complete:
            response.fail(UpstreamError("upstream closed the connection mid-response", kind="broken"))

    def pause_writing(self) -> None:  # request bodies are written in one go; nothing to pause
        pass

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.response is not None
        self.response.raw_headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        response = self.response
        assert response is not None
        response.status_code = self.parser.get_status_code()
        response.headers_done()

    def on_body(self, body: bytes) -> None:
        response = self.response
        assert response is not None
        response.feed(body)
        if response.buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        response = self.response
        assert response is not None
        response.keep_alive = self.parser.should_keep_alive()
        response.finish()

    def drained(self) -> None:
        """The reader caught up; resume reading if we had paused."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
            if self.response is not None:
                # The upstream could not send while we were not reading: that time is not its silence.
                self.response.last_activity = self.response.loop.time()

    def send(self, data: tuple[bytes, bytes], response: UpstreamResponse) -> None:
        """Write one request (its head and body, in one system call where the loop can) for `response`."""
        self.response = response
        assert self.transport is not None
        self.transport.writelines(data)


class UpstreamResponse:
    """Status, headers and a streamed body of one upstream response."""

    def __init__(self, connection: Connection, read_timeout: float) -> None:
        self.connection = connection
        self.loop = connection.loop
        self.status_code = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers: dict[str, str] = {}
        self.keep_alive = False
        self.complete = False
        self.buffered = 0
        self.last_activity = self.started = self.loop.time()
        self.read_timeout = read_timeout
        self.head_bytes = 0
        self.deadline = float("inf")
        """Loop time by which the whole response must be in (the overall stream deadline)."""
        self._chunks: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._headers_ready: asyncio.Future[None] = self.loop.create_future()
        self._error: UpstreamError | None = None
        self._released = False
        self._inflate: Any = None

    # called by the connection
    def headers_done(self) -> None:
        self.headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in self.raw_headers}
        if not self._headers_ready.done():
            self._headers_ready.set_result(None)

    def feed(self, body: bytes) -> None:
        self._chunks.append(body)
        self.buffered += len(body)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def finish(self) -> None:
        self.complete = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: UpstreamError) -> None:
        if self.complete or self._error is not None:
            return  # the first failure is the cause; closing the connection after it adds another
        self._error = error
        if not self._headers_ready.done():
            self._headers_ready.set_result(None)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # used by the relay
    async def wait_headers(self) -> None:
        """Wait for the status line and headers, which must all be in within the read timeout of the request."""
        ready = self._headers_ready
        if not ready.done():
            # Absolute, not re-armed by each byte: an upstream trickling its headers is cut off like a silent one.
            handle = self.loop.call_at(self.started + self.read_timeout, self._headers_timeout)
            try:
                await ready
            finally:
                handle.cancel()
        if self.status_code == 0 and self._error is not None:
            raise self._raised_error()
        encoding = self.headers.get("content-encoding", "").lower()
        if encoding in ("gzip", "deflate"):
            self._inflate = zlib.decompressobj(wbits=47)  # 47: gzip or zlib header, auto-detected

    def _headers_timeout(self) -> None:
        if self._headers_ready.done():
            return
        self.connection.closed = True
        if self.connection.transport is not None:
            self.connection.transport.close()
        self._error = UpstreamTimeout("upstream did not send its status line and headers in time")
        self._headers_ready.set_result(None)

    async def wait_body(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the first body bytes (or the end); False on timeout."""
        if self._chunks or self.complete or self._error is not None:
            return True
        waiter = self._waiter = self.loop.create_future()
        timed_out = False

        def expire() -> None:
            nonlocal timed_out
            if not waiter.done():
                timed_out = True
                waiter.set_result(None)

        handle = self.loop.call_later(timeout, expire)
        try:
            await waiter
        except asyncio.CancelledError:
            self.close()  # the caller gave up: hang up so the upstream stops generating
            raise
        finally:
            handle.cancel()
            self._waiter = None
        return not timed_out

    def _raised_error(self) -> UpstreamError:
        # A copy, never the stored error: a raised exception keeps the frames it passed through,
        # and those frames hold this response, whose `_error` would hold them back: a reference
        # cycle per failed call that only the (rarely run) cycle collector frees.
        assert self._error is not None
        return copy.copy(self._error)

    def decode_content(self, enabled: bool) -> None:
        """Whether `chunks()` yields decompressed bytes (default: yes, for gzip and deflate)."""
        if not enabled:
            self._inflate = None

    async def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive."""
        while True:
            if self._chunks:
                data = self._take()
                if self.loop.time() > self.deadline:
                    self._past_deadline()
                if self._inflate is not None:
                    # One bounded piece at a time, each consumed before the next is made: a bomb is
                    # stopped by its reader's own limit (`read`, the SSE line cap), never held whole.
                    while data:
                        piece, data = self._inflate_step(data)
                        if piece:
                            yield piece
                    continue
                yield data
                continue
            if self._error is not None:
                raise self._raised_error()
            if self.complete:
                self._release()
                return
            await self._wait()

    def _take(self) -> bytes:
        """The body bytes buffered so far, in one piece; the connection reads again if it had paused."""
        queue = self._chunks
        data = queue.popleft() if len(queue) == 1 else b"".join(queue)
        queue.clear()
        self.buffered = 0
        self.connection.drained()
        return data

    def _inflate_step(self, data: bytes) -> tuple[bytes, bytes]:
        """At most `_INFLATE_PIECE` bytes of `data` decompressed, and the compressed rest still to inflate."""
        try:
            piece = self._inflate.decompress(data, _INFLATE_PIECE)
        except zlib.error as exc:
            raise UpstreamError("upstream sent a corrupt compressed body", kind="protocol") from exc
        return piece, self._inflate.unconsumed_tail

    def _past_deadline(self) -> None:
        self.close()
        raise self._deadline_error()

    def _deadline_error(self) -> UpstreamTimeout:
        seconds = round(self.deadline - self.started)
        return UpstreamTimeout(f"upstream response went on past the {seconds} s stream limit (max_stream_seconds)")

    async def read(self, limit: int = MAX_BODY_BYTES) -> bytes:
        """The whole body."""
        if self.complete and self._inflate is None and self.buffered <= limit:
            # Already all here (a short answer arrives with its headers): no generator, no wait.
            data = self._take()
            self._release()
            return data
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                self.close()
                raise UpstreamError(f"upstream response body is larger than {limit} bytes", kind="protocol")
        return b"".join(parts)

    async def _wait(self) -> None:
        self._waiter = waiter = self.loop.create_future()
        when = min(self.last_activity + self.read_timeout, self.deadline)
        handle = self.loop.call_at(when, self._check_timeout, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiter = None

    def _check_timeout(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():
            return
        now = self.loop.time()
        if now >= self.deadline - 0.001:
            self._error = self._deadline_error()
            self.connection.closed = True
            if self.connection.transport is not None:
                self.connection.transport.close()
            waiter.set_result(None)
        elif now - self.last_activity >= self.read_timeout - 0.001:
            self._error = UpstreamTimeout("upstream stopped sending (read timeout)")
            self.connection.closed = True
            if self.connection.transport is not None:
                self.connection.transport.close()
            waiter.set_result(None)
        else:
            self.loop.call_at(min(self.last_activity + self.read_timeout, self.deadline), self._check_timeout, waiter)

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        connection = self.connection
        connection.response = None
        if self.complete and self.keep_alive and not connection.closed:
            connection.pool.release(connection)
        else:
            connection.closed = True
            if connection.transport is not None:
                connection.transport.close()

    def close(self) -> None:
        """Give up on the rest of the body; the connection is closed unless the body was complete."""
        self._release()
