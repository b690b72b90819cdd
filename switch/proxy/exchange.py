"""One client exchange over raw ASGI: read the body once, answer or stream back.

Raw ASGI instead of a framework's request and response objects keeps the per-request cost low: the body is
read into one bytes object, headers are decoded once, and streamed chunks go straight to `send`.
On switch's own server (`http_server`, whose cycle is behind `send`) a whole answer goes out in one
write, streamed chunks are framed and written to the socket directly, and a client that hangs up is
reported the moment its connection closes; on any other ASGI server the same happens through `send`,
`receive` and side tasks.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from switch.errors import ClientRequestError
from switch.proxy.body_budget import BodyBudget
from switch.proxy.http_server import Cycle

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_ids = random.Random()


def new_id(prefix: str) -> str:
    """A unique-enough id for messages and requests (not a secret: no syscall per call)."""
    return prefix + format(_ids.getrandbits(96), "024x")


def parse_json_body(raw: bytes) -> Any:
    """A client body parsed as JSON; a `ClientRequestError` (400) when it is empty or not JSON."""
    if not raw:
        raise ClientRequestError("request body is empty; expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientRequestError(f"request body is not valid JSON: {exc.msg}") from exc


JSON_HEADERS = [(b"content-type", b"application/json")]


class Exchange:
    """The client side of one proxied call."""

    __slots__ = (
        "scope",
        "receive",
        "send",
        "headers",
        "started",
        "body",
        "status",
        "response_bytes",
        "streaming",
        "disconnected",
        "last_send",
        "finished",
        "route",
        "_cycle",
        "_direct",
        "_guard",
        "budget",
        "held",
    )

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.headers: dict[str, str] = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]
        }
        self.started = time.perf_counter()
        self.body = b""
        self.status = 0
        self.response_bytes = 0
        self.streaming = False
        self.disconnected = False
        self.last_send = 0.0
        self.finished = False
        self.route = b""
        # On switch's own server `send` is its cycle's bound method (the scope does not hold the cycle:
        # the cycle holds the scope, and a reference back would tie each call into a reference cycle).
        cycle = getattr(send, "__self__", None)
        self._cycle: Cycle | None = cycle if type(cycle) is Cycle else None
        self._direct: Cycle | None = None
        self._guard: _CycleGuard | _TaskGuard | None = None
        self.budget: BodyBudget | None = None
        """Where the body's bytes are counted while the call lasts (see switch.proxy.body_budget)."""
        self.held = 0

    @property
    def path(self) -> str:
        """The request path."""
        return str(self.scope["path"])

    async def read_body(self, limit: int) -> bytes:
        """Read the whole request body, refusing more than `limit` bytes with a 413."""
        declared = self.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ClientRequestError(f"request body of {declared} bytes exceeds the {limit}-byte limit", status=413)
        budget = self.budget
        if budget is not None and declared is not None and declared.isdigit():
            budget.take(int(declared))
            self.held = int(declared)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                break
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise ClientRequestError(f"request body exceeds the {limit}-byte limit", status=413)
                if budget is not None and size > self.held:
                    # Chunked, or more than declared: counted as it arrives.
                    budget.take(size - self.held)
                    self.held = size
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        self.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return self.body

    async def respond(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        """Send a complete response."""
        self.status = status
        self.response_bytes = len(body)
        all_headers = list(headers) if headers else list(JSON_HEADERS)
        all_headers.append((b"content-length", str(len(body)).encode()))
        if self.route:
            all_headers.append((b"x-switch-route", self.route))
        cycle = self._cycle
        if cycle is not None:
            await cycle.respond(status, all_headers, body)
        else:
            await self.send({"type": "http.response.start", "status": status, "headers": all_headers})
            await self.send({"type": "http.response.body", "body": body, "more_body": False})
        self.finished = True

    async def start_stream(self, headers: list[tuple[bytes, bytes]], status: int = 200) -> None:
        """Begin a streamed response."""
        self.status = status
        self.streaming = True
        self.last_send = time.perf_counter()
        if self.route:
            headers = [*headers, (b"x-switch-route", self.route)]
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        cycle = self._cycle
        self._direct = cycle.direct() if cycle is not None else None

    async def send_chunk(self, data: bytes) -> None:
        """Send part of a streamed body."""
        if data and not self.finished:
            self.response_bytes += len(data)
            self.last_send = time.perf_counter()
            cycle = self._direct
            if cycle is None:
                await self.send({"type": "http.response.body", "body": data, "more_body": True})
                return
            # What uvicorn's `send` does for a chunk, without its per-message checks: wait while the
            # client's socket buffer is full, drop the bytes once the client has gone.
            if not cycle.try_write(data):
                await cycle.drain()
                cycle.write_chunk(data)

    def task(self) -> asyncio.Task[Any]:
        """The task serving this call, asked of the connection's loop (`get_running_loop()` is a getpid() call on
        Python 3.11)."""
        cycle = self._cycle
        task = asyncio.current_task(cycle.conn.loop) if cycle is not None else asyncio.current_task()
        assert task is not None
        return task

    def watch_client(self, task: asyncio.Task[Any]) -> Callable[[], None]:
        """Cancel `task` if the client leaves before the returned function is called.

        For the wait on an upstream before anything is sent back (a whole non-streamed answer can
        take minutes): the upstream call is cancelled with it. A later `guard_stream` for the same
        task takes this guard over and adds pings, so a stream still costs one guard.
        """
        guard = self._guard
        if guard is not None and guard.task is task:
            return guard.stop
        cycle = self._cycle
        if cycle is None:
            return _TaskGuard(self, task).stop
        return _CycleGuard(self, cycle, task).stop

    def guard_stream(
        self, task: asyncio.Task[Any], interval: float, ping: Callable[[], bytes] | None = None
    ) -> Callable[[], None]:
        """While `task` streams: cancel it if the client leaves, send `ping()` after `interval` of silence.

        Returns the function that stops both. On switch's server the hang-up comes from the connection
        and the pings from one timer; elsewhere two side tasks do it (one parked on `receive` for the
        disconnect, one sleeping for pings).
        """
        guard = self._guard
        if guard is not None:
            if guard.task is task and guard.add_ping(interval, ping):
                return guard.stop
            guard.stop()
        cycle = self._direct
        if cycle is None:
            task_guard = _TaskGuard(self, task)
            task_guard.add_ping(interval, ping)
            return task_guard.stop
        cycle_guard = _CycleGuard(self, cycle, task)
        cycle_guard.add_ping(interval, ping)
        return cycle_guard.stop

    async def _ping_when_silent(self, interval: float, ping: Callable[[], bytes]) -> None:
        while True:
            await asyncio.sleep(interval)
            if time.perf_counter() - self.last_send >= interval and not self.finished:
                await self.send_chunk(ping())

    async def end_stream(self, data: bytes = b"") -> None:
        """Send the last part of a streamed body."""
        if self.finished:
            return
        self.finished = True
        self.response_bytes += len(data)
        await self.send({"type": "http.response.body", "body": data, "more_body": False})

    async def _watch_disconnect(self, task: asyncio.Task[Any]) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                if not self.finished:
                    task.cancel()
                return


class _TaskGuard:
    """`Exchange.watch_client` and `guard_stream` on servers other than switch's own: a task parked on
    `receive` for the disconnect, and one sleeping between pings once the stream has started."""

    __slots__ = ("exchange", "task", "tasks")

    def __init__(self, exchange: Exchange, task: asyncio.Task[Any]) -> None:
        self.exchange = exchange
        self.task = task
        self.tasks = [asyncio.create_task(exchange._watch_disconnect(task))]
        exchange._guard = self

    def add_ping(self, interval: float, ping: Callable[[], bytes] | None) -> bool:
        """Also ping the client after `interval` of silence."""
        if ping is not None:
            self.tasks.append(asyncio.create_task(self.exchange._ping_when_silent(interval, ping)))
        return True

    def stop(self) -> None:
        """Stop watching (and pinging)."""
        for side_task in self.tasks:
            side_task.cancel()
        if self.exchange._guard is self:
            self.exchange._guard = None


class _CycleGuard:
    """`Exchange.watch_client` and `guard_stream` on switch's server: the cycle calls back when the client
    leaves, and a timer pings a silent stream. Pings need the direct writer, so they are added only once
    the stream started."""

    __slots__ = ("exchange", "cycle", "task", "interval", "ping", "handle")

    def __init__(self, exchange: Exchange, cycle: Cycle, task: asyncio.Task[Any]) -> None:
        self.exchange = exchange
        self.cycle = cycle
        self.task = task
        self.interval = 0.0
        self.ping: Callable[[], bytes] | None = None
        self.handle: asyncio.TimerHandle | None = None
        exchange._guard = self
        cycle.on_hangup(self.hung_up)

    def hung_up(self) -> None:
        """The client left before the answer was complete: the call is cancelled, upstream included."""
        self.exchange.disconnected = True
        self.task.cancel()
        self.stop()

    def add_ping(self, interval: float, ping: Callable[[], bytes] | None) -> bool:
        """Also ping after `interval` of silence; False when the stream cannot be written directly."""
        if ping is None:
            return True
        if self.exchange._direct is not self.cycle:
            return False
        self.interval = interval
        self.ping = ping
        if self.handle is None:
            self.handle = self.cycle.conn.loop.call_later(interval, self.tick)
        return True

    def tick(self) -> None:
        """Ping the client if the stream has been silent for `interval`; then wait for the next silence."""
        # The handle is dropped whenever the timer stops: kept, it would tie this guard (and the
        # stream's state through `ping`) into a reference cycle with its own bound method.
        self.handle = None
        exchange, cycle, ping = self.exchange, self.cycle, self.ping
        if exchange.finished or ping is None:
            return
        now = time.perf_counter()
        if now - exchange.last_send >= self.interval and not cycle.write_paused:
            data = ping()
            exchange.response_bytes += len(data)
            exchange.last_send = now
            cycle.write_chunk(data)
        wait = max(exchange.last_send + self.interval - now, self.interval / 4)
        self.handle = cycle.conn.loop.call_later(wait, self.tick)

    def stop(self) -> None:
        """Stop watching (and pinging)."""
        self.cycle.on_hangup(None)
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        if self.exchange._guard is self:
            self.exchange._guard = None
