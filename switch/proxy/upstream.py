"""A lean HTTP/1.1 client for upstream calls: pooled keep-alive connections, streamed bodies.

The proxy spends most of its time here, so this is a small asyncio protocol around httptools'
C parser instead of a general-purpose client: one write per request, body chunks handed to the
reader as they arrive without copying, and no task or timer created per chunk. A read timeout is
checked lazily (only while the reader waits), so a chunk costs a deque append and a wake-up.

Contract: `UpstreamPool.request` returns an `UpstreamResponse` once the status line and headers
have arrived; its body must be consumed (`chunks()` / `read()`) or the response `close()`d, which
returns the connection to the pool when it is reusable. Failures raise `UpstreamError` (connect,
broken) or `UpstreamTimeout`; they never carry request headers, so keys stay out of messages.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from switch.config import Server
from switch.errors import UpstreamError, UpstreamTimeout

_HIGH_WATER = 1 << 20  # pause reading the upstream when this much is buffered (slow clients)
_LOW_WATER = 1 << 18


class _NoCallbacks:
    pass


_DETACHED_PARSER = httptools.HttpResponseParser(_NoCallbacks())


def _ssl_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection carrying one request at a time."""

    def __init__(self, pool: UpstreamPool, key: tuple[str, str, int]) -> None:
        self.pool = pool
        self.key = key
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

    def send(self, data: bytes, response: UpstreamResponse) -> None:
        self.response = response
        assert self.transport is not None
        self.transport.write(data)


class UpstreamResponse:
    """Status, headers and a streamed body of one upstream response."""

    def __init__(self, connection: _Connection, read_timeout: float) -> None:
        self.connection = connection
        self.loop = asyncio.get_running_loop()
        self.status_code = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers: dict[str, str] = {}
        self.keep_alive = False
        self.complete = False
        self.buffered = 0
        self.last_activity = self.loop.time()
        self.read_timeout = read_timeout
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
        """Wait for the status line and headers (bounded by the read timeout)."""
        ready = self._headers_ready
        if not ready.done():
            handle = self.loop.call_at(self.last_activity + self.read_timeout, self._headers_timeout)
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
        if self.loop.time() - self.last_activity >= self.read_timeout - 0.001:
            self.connection.closed = True
            if self.connection.transport is not None:
                self.connection.transport.close()
            self._error = UpstreamTimeout("upstream did not answer in time")
            self._headers_ready.set_result(None)
        else:
            self.loop.call_at(self.last_activity + self.read_timeout, self._headers_timeout)

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
        queue = self._chunks
        while True:
            if queue:
                if len(queue) == 1:
                    data = queue.popleft()
                else:
                    data = b"".join(queue)
                    queue.clear()
                self.buffered = 0
                self.connection.drained()
                if self._inflate is not None:
                    try:
                        data = self._inflate.decompress(data)
                    except zlib.error as exc:
                        raise UpstreamError("upstream sent a corrupt compressed body", kind="protocol") from exc
                    if not data:
                        continue
                yield data
                continue
            if self._error is not None:
                raise self._raised_error()
            if self.complete:
                self._release()
                return
            await self._wait()

    async def read(self, limit: int = 256 * 1024 * 1024) -> bytes:
        """The whole body."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                self.close()
                raise UpstreamError("upstream response body is too large", kind="protocol")
        return b"".join(parts)

    async def _wait(self) -> None:
        self._waiter = waiter = self.loop.create_future()
        handle = self.loop.call_at(self.last_activity + self.read_timeout, self._check_timeout, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiter = None

    def _check_timeout(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():
            return
        if self.loop.time() - self.last_activity >= self.read_timeout - 0.001:
            self._error = UpstreamTimeout("upstream stopped sending (read timeout)")
            self.connection.closed = True
            if self.connection.transport is not None:
                self.connection.transport.close()
            waiter.set_result(None)
        else:
            self.loop.call_at(self.last_activity + self.read_timeout, self._check_timeout, waiter)

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


class UpstreamPool:
    """Keep-alive connections per (scheme, host, port)."""

    def __init__(self, server: Server, idle_expiry: float = 60.0, max_idle_per_host: int = 64) -> None:
        self.server = server
        self.idle_expiry = idle_expiry
        self.max_idle_per_host = max_idle_per_host
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._targets: dict[str, tuple[tuple[str, str, int], str, bytes]] = {}

    def _target(self, url: str) -> tuple[tuple[str, str, int], str, bytes]:
        cached = self._targets.get(url)
        if cached is None:
            parts = urlsplit(url)
            scheme = parts.scheme or "http"
            host = parts.hostname or "127.0.0.1"
            port = parts.port or (443 if scheme == "https" else 80)
            path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
            default_port = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
            host_header = host if default_port else f"{host}:{port}"
            if ":" in host and not host.startswith("["):
                host_header = f"[{host}]" if default_port else f"[{host}]:{port}"
            cached = ((scheme, host, port), path, host_header.encode("idna"))
            if len(self._targets) < 1024:
                self._targets[url] = cached
        return cached

    async def _connect(self, key: tuple[str, str, int]) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ssl_context = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = _ssl_context()
            ssl_context = self._ssl
        try:
            _transport, connection = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(self, key), host, port, ssl=ssl_context),
                self.server.connect_timeout,
            )
        except TimeoutError as exc:
            raise UpstreamTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UpstreamError(f"could not connect to {host}:{port} ({reason})", kind="connect") from exc
        return connection

    def _acquire_idle(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < self.idle_expiry:
                return connection
            if connection.transport is not None:
                connection.transport.close()
        return None

    def release(self, connection: _Connection) -> None:
        """Return a connection whose response is complete."""
        idle = self._idle.setdefault(connection.key, [])
        if len(idle) >= self.max_idle_per_host:
            connection.closed = True
            if connection.transport is not None:
                connection.transport.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    async def request(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes,
        read_timeout: float | None = None,
        header_timeout: float | None = None,
    ) -> UpstreamResponse:
        """Send a request and return once the response headers are in.

        `header_timeout` bounds the wait for the status line (a time-to-first-byte limit);
        `read_timeout` bounds every later silence.
        """
        key, path, host_header = self._target(url)
        head = [f"{method} {path} HTTP/1.1\r\n".encode(), b"host: ", host_header, b"\r\n"]
        for name, value in headers:
            head.append(f"{name}: {value}\r\n".encode("latin-1"))
        head.append(b"content-length: " + str(len(body)).encode() + b"\r\n\r\n")
        payload = b"".join(head) + body
        timeout = read_timeout if read_timeout is not None else self.server.read_timeout
        for attempt in (0, 1):
            connection = self._acquire_idle(key) if attempt == 0 else None
            reused = connection is not None
            if connection is None:
                connection = await self._connect(key)
            response = UpstreamResponse(connection, header_timeout if header_timeout is not None else timeout)
            connection.send(payload, response)
            try:
                await response.wait_headers()
                response.read_timeout = timeout
            except asyncio.CancelledError:
                response.close()  # the caller gave up (its client left): hang up so the upstream stops
                raise
            except UpstreamError as exc:
                # A pooled connection the server closed while idle fails before any byte of the
                # answer; retrying once on a fresh connection is safe for that case only.
                if reused and exc.kind == "broken" and not response.raw_headers:
                    continue
                raise
            return response
        raise UpstreamError("upstream closed the connection", kind="broken")

    async def aclose(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            for connection in idle:
                if connection.transport is not None:
                    connection.transport.close()
        self._idle.clear()
