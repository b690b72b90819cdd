"""The upstream HTTP client pool: keep-alive HTTP/1.1 connections per host, streamed bodies.

The proxy spends most of its time here, so this is a lean client (see `http1`) instead of a
general-purpose one. It is the HTTP implementation of `transport.Transport` (`send`).

Contract: `UpstreamPool.request` returns an `UpstreamResponse` once the status line and headers
have arrived; its body must be consumed (`chunks()` / `read()`) or the response `close()`d, which
returns the connection to the pool when it is reusable. Failures raise `UpstreamError` (connect,
broken) or `UpstreamTimeout`; they never carry request headers, so keys stay out of messages.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from urllib.parse import urlsplit

from switch.config import Server
from switch.errors import UpstreamError, UpstreamTimeout
from switch.proxy.http1 import Connection, UpstreamResponse
from switch.proxy.transport import UpstreamRequest


def _ssl_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


class UpstreamPool:
    """Keep-alive connections per (scheme, host, port)."""

    def __init__(self, server: Server, idle_expiry: float = 60.0, max_idle_per_host: int = 64) -> None:
        self.server = server
        self.idle_expiry = idle_expiry
        self.max_idle_per_host = max_idle_per_host
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
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

    async def _connect(self, key: tuple[str, str, int]) -> Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ssl_context = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = _ssl_context()
            ssl_context = self._ssl
        try:
            _transport, connection = await asyncio.wait_for(
                loop.create_connection(lambda: Connection(self, key, loop), host, port, ssl=ssl_context),
                self.server.connect_timeout,
            )
        except TimeoutError as exc:
            raise UpstreamTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UpstreamError(f"could not connect to {host}:{port} ({reason})", kind="connect") from exc
        return connection

    def _acquire_idle(self, key: tuple[str, str, int]) -> Connection | None:
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

    def release(self, connection: Connection) -> None:
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
        # Head and body leave in one write without being joined: a prompt's tens of KB are not copied again.
        payload = (b"".join(head), body)
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
                response.deadline = response.started + self.server.max_stream_seconds
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

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        """The `Transport` entry: `request` over a pooled connection, its key already in its headers."""
        return await self.request(
            request.method, request.url, request.headers, request.body, header_timeout=request.header_timeout
        )

    async def aclose(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            for connection in idle:
                if connection.transport is not None:
                    connection.transport.close()
        self._idle.clear()


__all__ = ["UpstreamPool", "UpstreamResponse"]
