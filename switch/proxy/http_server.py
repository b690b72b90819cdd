"""switch's HTTP/1.1 server protocol: ASGI over httptools, with the client limits and a direct chunk writer.

`serving.Serving` runs it and keeps what a process needs: the listening sockets, lifespan, signals, graceful
shutdown (`server_state.connections` and `.tasks`, each connection's `shutdown()`) and the `date` header it
refreshes once a second. WebSocket upgrades are handed to uvicorn's own WebSocket protocol, which takes the
same config and server state (their fields are named as uvicorn names them). Each HTTP/1.1 connection is
served here.

It does what uvicorn's httptools protocol does for an ASGI app, with less work per connection and per
call, since a proxy pays it on every call: no socket objects or address lookups per connection (the
addresses come from the transport's cached extra info), one deadline timer per connection instead of
one per state, a whole response (`content-length` set) written in one piece with its head, and a hang-up
reported the moment it is read rather than found by polling. Semantics follow uvicorn's: pipelined
requests run one after another, `Expect: 100-continue` is answered on the first `receive`, HEAD answers
carry no body, and a response that breaks the ASGI contract ends with a 500 or a closed connection.

The limits (`connections.ConnectionLimits`): a deadline for the request line and headers, one for the
whole body, uvicorn's `timeout_keep_alive` between requests, a 431 past `MAX_HEADER_BYTES`, and the
connection cap. A call in progress has no deadline here: the relay's own timeouts bound it.

`Cycle` is one request and its response. Besides ASGI `receive`/`send`, it offers the relay's
`Exchange` (which finds it behind `send`) a direct writer for streamed chunks, framed here
and written to the socket without an ASGI message each, and `on_hangup` to learn at once that the
client left.
"""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.parse
from collections import deque
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, ClassVar

import httptools

from switch.proxy.connections import REFUSED, TOO_LARGE, ConnectionLimits, canned_close

log = logging.getLogger("switch.server")

MAX_HEADER_BYTES = 64 * 1024
"""Request line and headers of one request (Envoy's default is 60 KiB, nginx's 4 x 8 KiB)."""
HIGH_WATER = 64 * 1024
"""Request body bytes read ahead of the app before the socket stops being read."""

_BAD_NAME = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_BAD_VALUE = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_REQUEST = canned_close(b"400 Bad Request", "invalid_request_error", "invalid HTTP request")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LAST_CHUNK = b"0\r\n\r\n"
_SERVER_ERROR = (
    b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nInternal Server Error"
)


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


_STATUS_LINES = {status: _status_line(status) for status in range(100, 600)}

direct_streams = 0
"""Streams whose chunks went straight to the socket (tests check the direct writer engages)."""


class Cycle:
    """One request and its response on a connection: ASGI `receive` and `send`, and a direct chunk writer."""

    __slots__ = (
        "conn",
        "scope",
        "keep_alive",
        "expects_continue",
        "chunks",
        "buffered",
        "more_body",
        "body_sent",
        "waiter",
        "disconnected",
        "response_started",
        "response_complete",
        "chunked",
        "remaining",
        "head",
        "head_only",
        "hangup",
    )

    def __init__(self, conn: HttpConnection, scope: dict[str, Any], keep_alive: bool, expects_continue: bool) -> None:
        self.conn = conn
        self.scope = scope
        self.keep_alive = keep_alive
        self.expects_continue = expects_continue
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.more_body = True
        self.body_sent = False
        self.waiter: asyncio.Future[None] | None = None
        self.disconnected = False
        self.response_started = False
        self.response_complete = False
        self.chunked = False
        self.remaining = 0
        self.head = b""
        """A whole response's head, held until its body so both leave in one write."""
        self.head_only = scope["method"] == "HEAD"
        self.hangup: Callable[[], None] | None = None

    # ---- the connection's side -------------------------------------------------------------------

    def wake(self) -> None:
        """Let a `receive` waiting for body bytes, the end of the body or a hang-up go on."""
        waiter, self.waiter = self.waiter, None
        _settle(waiter)

    def lost(self) -> None:
        """The client's connection is gone."""
        if not self.response_complete:
            self.disconnected = True
        self.wake()
        hangup = self.hangup
        if hangup is not None and self.disconnected:
            self.hangup = None
            hangup()

    # ---- ASGI ------------------------------------------------------------------------------------

    async def run(self, app: Any) -> None:
        """Run the app on this request; a broken response ends in a 500 or a closed connection."""
        try:
            await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            if isinstance(exc, Exception):
                log.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                self._fail()
            else:
                self.conn.transport.close()
            if not isinstance(exc, Exception):
                raise
        else:
            if not self.response_started and not self.disconnected:
                log.error("ASGI callable returned without starting response.")
                self._fail()
            elif not self.response_complete and not self.disconnected:
                log.error("ASGI callable returned without completing response.")
                self.conn.transport.close()
        finally:
            self.hangup = None

    def _fail(self) -> None:
        transport = self.conn.transport
        if not transport.is_closing():
            transport.write(_SERVER_ERROR)
            transport.close()
        self.response_started = self.response_complete = True

    async def receive(self) -> dict[str, Any]:
        """The next part of the request body, or `http.disconnect` once the client left or the response ended."""
        conn = self.conn
        if self.expects_continue:
            self.expects_continue = False
            if not conn.transport.is_closing():
                conn.transport.write(_CONTINUE)
        # Once the whole body was delivered, a receive waits for the client to leave or the response to end.
        while not self.chunks and not self.disconnected and not self.response_complete:
            if not self.more_body and not self.body_sent:
                break
            if not conn.pipeline:
                conn.resume_reading()
            waiter = self.waiter = conn.loop.create_future()
            await waiter
        if not self.chunks and (self.disconnected or self.response_complete):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": self.take_body(), "more_body": self.more_body}

    def take_body(self) -> bytes:
        """The body bytes read so far and not yet taken."""
        chunks = self.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.chunks = []
        self.buffered = 0
        if not self.more_body:
            self.body_sent = True
        conn = self.conn
        if not conn.pipeline:
            # Taken: read on, so the end of a large body and a hang-up after it are both heard.
            conn.resume_reading()
        return body

    async def send(self, message: dict[str, Any]) -> None:
        """Write the response as the app sends it (ASGI `http.response.start` then `.body` messages)."""
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self._start(message["status"], message.get("headers", ()))
        elif not self.response_complete:
            if kind != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
            self._body(message.get("body", b""), message.get("more_body", False))
        else:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already completed.")

    async def respond(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A whole response in one call: `send`'s two messages without building them."""
        if self.conn.write_paused and not self.disconnected:
            await self.conn.drain()
        if self.disconnected:
            return
        if self.response_started:
            raise RuntimeError("Unexpected response after the response already started.")
        self._start(status, headers)
        self._body(body, False)

    def _start(self, status: int, headers: Any) -> None:
        self.response_started = True
        self.expects_continue = False
        if self.more_body:
            # Answered before the request's body was all read (a 413, say): the rest of the body would be read
            # as the next request's head, so the connection closes after this answer.
            self.keep_alive = False
        content = [_STATUS_LINES.get(status) or _status_line(status)]
        length: int | None = None
        closing = False
        for name, value in (*self.conn.server_state.default_headers, *headers):
            if _BAD_NAME.search(name):
                raise RuntimeError("Invalid HTTP header name.")
            if _BAD_VALUE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length" and length is None and not self.chunked:
                length = int(value)
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.chunked = True
                length = None
            elif name == b"connection" and b"close" in [token.strip() for token in value.lower().split(b",")]:
                self.keep_alive = False
                closing = True
            content += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not closing:
            content.append(b"connection: close\r\n")
        if length is None and not self.chunked and not self.head_only and status not in (204, 304):
            self.chunked = True
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        head = b"".join(content)
        if length is None or self.head_only:
            self.conn.transport.write(head)
        else:
            self.remaining = length
            self.head = head

    def _body(self, body: bytes, more_body: bool) -> None:
        transport = self.conn.transport
        if self.head_only:
            self.remaining = 0
        elif self.chunked:
            if body:
                transport.write(b"%x\r\n%b\r\n%b" % (len(body), body, b"" if more_body else _LAST_CHUNK))
            elif not more_body:
                transport.write(_LAST_CHUNK)
        else:
            if len(body) > self.remaining:
                raise RuntimeError("Response content longer than Content-Length")
            self.remaining -= len(body)
            if self.head:
                # One system call for both, without copying the body into a joined buffer.
                transport.writelines((self.head, body))
                self.head = b""
            elif body:
                transport.write(body)
        if not more_body:
            if self.remaining != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self.response_complete = True
            self.wake()
            if not self.keep_alive:
                transport.close()
            self.conn.response_done(self)

    # ---- the direct writer (see Exchange.send_chunk) ------------------------------------------

    @property
    def write_paused(self) -> bool:
        """Whether the client's socket buffer is full (writes should wait for `drain`)."""
        return self.conn.write_paused

    async def drain(self) -> None:
        """Wait until the client's socket buffer has room."""
        await self.conn.drain()

    def try_write(self, data: bytes) -> bool:
        """Write one chunk unless the client's socket buffer is full: False then, and the caller awaits `drain`."""
        if self.conn.write_paused and not self.disconnected:
            return False
        self.write_chunk(data)
        return True

    def write_chunk(self, data: bytes) -> None:
        """Write one chunk of a chunked body; dropped once the client has gone or the response ended."""
        # A chunk written after the response ended would corrupt the next response on this connection.
        if not self.disconnected and not self.response_complete and self.chunked:
            self.conn.transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def direct(self) -> Cycle | None:
        """This cycle as a direct chunk writer, when its response is chunked (the framing is then ours)."""
        if not self.chunked or self.head_only:
            return None
        global direct_streams
        direct_streams += 1
        return self

    def on_hangup(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` once if the client leaves before the response is complete (None: stop)."""
        self.hangup = callback
        if callback is not None and self.disconnected:
            self.hangup = None
            callback()


class HttpConnection(asyncio.Protocol):
    """One client connection: the HTTP/1.1 parser, its deadline, and the cycle it serves (see the module)."""

    limits: ClassVar[ConnectionLimits]

    def __init__(
        self,
        config: Any,
        server_state: Any,
        app_state: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.config = config
        self.server_state = server_state
        self.app_state = app_state
        self.loop = loop
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.cycle: Cycle | None = None
        self.pipeline: deque[Cycle] | None = None
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.expects_continue = False
        self.upgrading = False
        self.in_request = False
        self.header_bytes = 0
        self.refused = False
        self.reading = True
        self.write_paused = False
        self.drained: asyncio.Future[None] | None = None
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.client: tuple[str, int] | None = None
        self.server: tuple[str, int] | None = None

    # ---- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        limits = self.limits
        if not limits.make_room():
            self.refused = True
            transport.write(REFUSED)  # type: ignore[attr-defined]
            transport.close()
            return
        limits.live.add(self)
        limits.waiting[self] = None
        self.server_state.connections.add(self)
        self.client = _address(transport.get_extra_info("peername"))
        self.server = _address(transport.get_extra_info("sockname"))
        self._arm(limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.refused:
            return
        self._release()
        self.server_state.connections.discard(self)
        cycle = self.cycle
        if cycle is not None:
            cycle.lost()
        for queued in self.pipeline or ():
            queued.lost()
        self.write_paused = False
        self._drained()
        if exc is None:
            self.transport.close()
        # The parser and the cycle refer back to this connection: let both go without the collector.
        self.parser = None  # type: ignore[assignment]
        self.cycle = None
        self.pipeline = None

    def eof_received(self) -> None:
        return None  # a half-closed client is gone: the transport closes

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if not self.in_request:
            self.header_bytes += len(data)
            if self.header_bytes == len(data):
                # The first byte of a request on a kept-alive connection starts its header deadline.
                self._arm(self.limits.header_timeout)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self.upgrading:
                self._upgrade()
                return
            log.warning("Unsupported upgrade request.")
        except httptools.HttpParserError:
            log.warning("Invalid HTTP request received.")
            self._close_with(_BAD_REQUEST)
            return
        if not self.in_request and self.header_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
            self._close_with(TOO_LARGE)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._drained()

    # ---- the server calls this at shutdown ---------------------------------------------------------

    def shutdown(self) -> None:
        """Close now if no response is under way; else close once the current one is complete."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self.transport.close()
        else:
            cycle.keep_alive = False

    # ---- httptools callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.expects_continue = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expects_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.in_request = True
        self.header_bytes = 0
        limits = self.limits
        limits.waiting.pop(self, None)
        self._arm(limits.body_timeout)
        parser = self.parser
        method = parser.get_method().decode("ascii")
        http_version = parser.get_http_version()
        if parser.should_upgrade() and self._is_websocket():
            self.upgrading = True
            return
        url = self.url
        if url[:1] == b"/":
            raw_path, _, query = url.partition(b"?")
            raw_path = raw_path.partition(b"#")[0]
            query = query.partition(b"#")[0]
        else:  # absolute form (a client that takes us for a forward proxy)
            parsed = httptools.parse_url(url)
            raw_path, query = parsed.path or b"/", parsed.query or b""
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": http_version,
            "server": self.server,
            "client": self.client,
            "scheme": "http",
            "method": method,
            "root_path": "",
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }
        cycle = Cycle(self, scope, http_version != "1.0" and parser.should_keep_alive(), self.expects_continue)
        current = self.cycle
        if current is None or current.response_complete:
            self.cycle = cycle
            self._run(cycle)
        else:
            # Pipelined: served once the current response is complete.
            self.pause_reading()
            if self.pipeline is None:
                self.pipeline = deque()
            self.pipeline.appendleft(cycle)

    def on_body(self, body: bytes) -> None:
        cycle = self._receiving()
        if cycle is None:
            return
        cycle.chunks.append(body)
        cycle.buffered += len(body)
        if cycle.buffered > HIGH_WATER:
            self.pause_reading()
        cycle.wake()

    def on_message_complete(self) -> None:
        cycle = self._receiving()
        if cycle is None:
            return
        cycle.more_body = False
        self._forget()
        cycle.wake()

    # ---- the cycles ------------------------------------------------------------------------------

    def _receiving(self) -> Cycle | None:
        """The cycle the body being parsed belongs to (the newest, pipelined or not); None to drop it."""
        if self.upgrading:
            return None
        cycle = self.pipeline[0] if self.pipeline else self.cycle
        if cycle is None or cycle.response_complete:
            return None
        return cycle

    def _run(self, cycle: Cycle) -> None:
        task = self.loop.create_task(cycle.run(self.config.loaded_app))
        tasks = self.server_state.tasks
        task.add_done_callback(tasks.discard)
        tasks.add(task)

    def response_done(self, cycle: Cycle) -> None:
        """`cycle`'s response is complete: serve the next pipelined request, or wait idle for one."""
        if self.transport.is_closing():
            return
        self.resume_reading()
        if self.pipeline:
            self.cycle = self.pipeline.pop()
            self._run(self.cycle)
            return
        self.in_request = False
        if self in self.limits.live:
            # Between requests the connection may make room for another (see ConnectionLimits).
            self.limits.waiting[self] = None
        self._arm(self.config.timeout_keep_alive)

    # ---- reading and writing ---------------------------------------------------------------------

    def pause_reading(self) -> None:
        """Stop reading the socket (a body read ahead of the app, or a pipelined request)."""
        if self.reading:
            self.reading = False
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read the socket again."""
        if not self.reading:
            self.reading = True
            self.transport.resume_reading()

    async def drain(self) -> None:
        """Wait until the client's socket buffer has room (or the client is gone)."""
        if self.write_paused:
            if self.drained is None:
                self.drained = self.loop.create_future()
            await asyncio.shield(self.drained)

    def _drained(self) -> None:
        drained, self.drained = self.drained, None
        _settle(drained)

    # ---- the deadline ----------------------------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        """The connection closes unless its state changes within `seconds`."""
        deadline = self.loop.time() + seconds
        self.deadline = deadline
        timer = self.timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self.timer = self.loop.call_at(deadline, self._check_deadline)

    def _forget(self) -> None:
        """No deadline while the app handles a request (the timer, if armed, ends by itself)."""
        self.deadline = 0.0

    def _check_deadline(self) -> None:
        self.timer = None
        deadline = self.deadline
        if not deadline:
            return
        if self.loop.time() < deadline:
            self.timer = self.loop.call_at(deadline, self._check_deadline)
            return
        self.close_now()

    # ---- closing -------------------------------------------------------------------------------

    def close_now(self) -> None:
        """Close the connection (it is no longer counted, though its loss is reported later)."""
        self._release()
        self.transport.close()

    def _release(self) -> None:
        """Stop timing this connection and counting it against the limits."""
        self._forget()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.limits.live.discard(self)
        self.limits.waiting.pop(self, None)

    def _close_with(self, response: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(response)
        self.close_now()

    # ---- WebSocket upgrades ----------------------------------------------------------------------

    def _is_websocket(self) -> bool:
        if self.config.ws_protocol_class is None:
            return False
        connection: list[bytes] = []
        upgrade = None
        for name, value in self.headers:
            if name == b"connection":
                connection = [token.lower().strip() for token in value.split(b",")]
            elif name == b"upgrade":
                upgrade = value.lower()
        return b"upgrade" in connection and upgrade == b"websocket"

    def _upgrade(self) -> None:
        """Hand the connection to uvicorn's WebSocket protocol, replaying the request to it."""
        self._release()
        self.server_state.connections.discard(self)
        request = [self.parser.get_method(), b" ", self.url, b" HTTP/1.1\r\n"]
        for name, value in self.headers:
            request += (name, b": ", value, b"\r\n")
        request.append(b"\r\n")
        protocol = self.config.ws_protocol_class(
            config=self.config, server_state=self.server_state, app_state=self.app_state
        )
        protocol.connection_made(self.transport)
        protocol.data_received(b"".join(request))
        self.transport.set_protocol(protocol)
        self.parser = None  # type: ignore[assignment]  # it refers back to this protocol, which is done


def _settle(waiter: asyncio.Future[None] | None) -> None:
    """Let whoever awaits `waiter` go on (once; nothing when there is none)."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _address(info: Any) -> tuple[str, int] | None:
    if isinstance(info, tuple) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return None


def websocket_protocol(**options: Any) -> asyncio.Protocol:
    """uvicorn's WebSocket protocol (its `auto` choice), imported at the first upgrade.

    The WebSocket implementation is 1.6 MB of modules a proxy that no WebSocket reaches would carry for good."""
    from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

    if AutoWebSocketsProtocol is None:
        raise RuntimeError("no WebSocket library is installed (switch depends on websockets)")
    return AutoWebSocketsProtocol(**options)


def http_protocol(limits: ConnectionLimits) -> type[HttpConnection]:
    """The protocol class serving every connection under `limits`."""
    return type("LimitedHttpConnection", (HttpConnection,), {"limits": limits})


__all__ = ["Cycle", "HttpConnection", "http_protocol", "websocket_protocol"]
