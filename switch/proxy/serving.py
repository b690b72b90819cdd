"""The proxy's server: a listening socket served on switch's HTTP protocol, the lifespan, signals, shutdown.

This is the part of uvicorn `switch serve` used (its `Server`), without importing uvicorn: uvicorn's package
brings click, multiprocessing, logging.config and its reload and worker supervisors with it, 3.1 MB a proxy
would keep for good and about 28 ms of every start. uvicorn is imported at the first WebSocket upgrade only,
for its WebSocket protocol (`http_server.websocket_protocol`).

What it keeps of uvicorn's behaviour:
- the ASGI lifespan runs before the socket is served; a start-up the app reports failed ends the server
  unstarted;
- a `date` header on every answer, refreshed once a second;
- SIGINT or SIGTERM starts a graceful shutdown: the socket is closed, idle connections close at once and
  busy ones after their answer, calls get `grace` seconds to finish, then the rest are cancelled and the
  lifespan's shutdown runs; a second Ctrl-C cancels the calls at once (they still record themselves).
  `run` returns the signals it caught, for the process to end with them once it has done its own closing
  (`server_main`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from switch.proxy.connections import ConnectionLimits
from switch.proxy.http_server import http_protocol, websocket_protocol

log = logging.getLogger("switch.server")

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
DATE_REFRESH_S = 1.0
WAIT_STEP_S = 0.05
"""How often a shutdown looks again for connections and calls still open."""

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(seconds: float) -> bytes:
    """`seconds` since the epoch as an HTTP date (RFC 9110's IMF-fixdate), whatever the locale."""
    moment = time.gmtime(seconds)
    return (
        f"{_DAYS[moment.tm_wday]}, {moment.tm_mday:02d} {_MONTHS[moment.tm_mon - 1]} {moment.tm_year} "
        f"{moment.tm_hour:02d}:{moment.tm_min:02d}:{moment.tm_sec:02d} GMT"
    ).encode()


class ServerState:
    """What every connection of one server shares (the names uvicorn's protocols use, for its WebSocket one)."""

    def __init__(self) -> None:
        self.connections: set[Any] = set()
        """Open connections: each has `shutdown()`, which closes it once its answer is complete."""
        self.tasks: set[asyncio.Task[None]] = set()
        """The running calls."""
        self.default_headers: list[tuple[bytes, bytes]] = []
        """Headers every answer carries (the `date`)."""


class ProtocolConfig:
    """What switch's HTTP protocol reads of its server's configuration (the fields it shares with uvicorn.Config)."""

    def __init__(self, app: Any, timeout_keep_alive: float, ws_protocol_class: Callable[..., Any] | None) -> None:
        self.loaded_app = app
        self.timeout_keep_alive = timeout_keep_alive
        self.ws_protocol_class = ws_protocol_class


def websocket_upgrades(app: Any, max_size: int) -> Callable[..., asyncio.Protocol]:
    """A factory of uvicorn's WebSocket protocol for `app`, importing uvicorn at its first call.

    Messages are capped at `max_size` bytes; permessage-deflate is declined (on loopback, compressing each
    of a turn's hundred-odd events costs CPU and saves nothing; Codex works without it).
    """
    built: list[Any] = []

    def upgrade(config: Any, server_state: ServerState, app_state: dict[str, Any]) -> asyncio.Protocol:
        if not built:
            import uvicorn

            # What uvicorn's WebSocket protocol reads of its config: the app, the message cap, the extensions.
            websocket_config = uvicorn.Config(
                app,
                ws_max_size=max_size,
                ws_per_message_deflate=False,
                interface="asgi3",
                lifespan="off",
                proxy_headers=False,
                server_header=False,
                log_config=None,
                access_log=False,
            )
            websocket_config.load()
            built.append(websocket_config)
        return websocket_protocol(config=built[0], server_state=server_state, app_state=app_state)

    return upgrade


class Lifespan:
    """The app's ASGI lifespan, driven from start-up to shutdown.

    An app that raises on the lifespan scope before its start-up completes is served without one, unless the
    lifespan is `required` (switch's proxy: its start-up opens the ledger), when it fails the start.
    """

    def __init__(self, app: Any, *, required: bool = False) -> None:
        self.app = app
        self.required = required
        self.state: dict[str, Any] = {}
        self.failed = False
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._started = asyncio.Event()
        self._ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reported = False

    async def startup(self) -> bool:
        """Run the app's start-up; False when it failed (reported, or, where `required`, raised or returned)."""
        self._task = asyncio.get_running_loop().create_task(self._main())
        await self._inbox.put({"type": "lifespan.startup"})
        await self._started.wait()
        return not self.failed

    async def shutdown(self) -> None:
        """Run the app's shutdown and wait for it (nothing for an app whose lifespan has already ended)."""
        if self._task is None or self._task.done():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        await self._ended.wait()

    async def _main(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self._receive, self._send)
        except BaseException as exc:
            if self._started.is_set():
                if not self._reported:
                    log.error("the app's lifespan failed", exc_info=exc)
            elif self.required:
                self._fail("the proxy could not start", exc)
            # Else an app that takes no lifespan scope (a test's fake upstream, say): served without one.
            if not isinstance(exc, Exception):
                raise
        finally:
            if not self._started.is_set() and self.required and not self._reported:
                self._fail("the proxy could not start: its start-up ended without completing")
            self._started.set()
            self._ended.set()

    def _fail(self, message: str, exc: BaseException | None = None) -> None:
        self.failed = self._reported = True
        log.error(message, exc_info=exc)

    async def _receive(self) -> dict[str, Any]:
        return await self._inbox.get()

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind in ("lifespan.startup.complete", "lifespan.startup.failed"):
            if kind == "lifespan.startup.failed":
                self._fail(f"the proxy could not start: {message.get('message', '')}")
            self._started.set()
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            if kind == "lifespan.shutdown.failed":
                self._reported = True
                log.error("the proxy's shutdown failed: %s", message.get("message", ""))
            self._ended.set()


class Serving:
    """One app served on listening sockets until a signal (or `should_exit`) ends it."""

    def __init__(
        self,
        app: Any,
        limits: ConnectionLimits,
        *,
        keep_alive: float,
        grace: float,
        websocket_max_size: int | None = None,
        handle_signals: bool = True,
        lifespan_required: bool = True,
    ) -> None:
        self.app = app
        self.lifespan_required = lifespan_required
        self.grace = grace
        self.handle_signals = handle_signals
        upgrades = websocket_upgrades(app, websocket_max_size) if websocket_max_size is not None else None
        self.config = ProtocolConfig(app, keep_alive, upgrades)
        self.protocol = http_protocol(limits)
        self.state = ServerState()
        self.started = False
        self.should_exit = False
        self.force_exit = False
        self.servers: list[asyncio.AbstractServer] = []
        self.caught: list[int] = []
        """The signals that ended the server, in the order they came."""
        self._exit: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app_state: dict[str, Any] = {}

    def run(self, sockets: list[socket.socket]) -> list[int]:
        """Serve `sockets` on a new event loop (uvloop's where it is installed) until stopped; the signals caught."""
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(self.serve(sockets))
        return self.caught

    def stop(self) -> None:
        """Begin the graceful shutdown; from any thread."""
        self.should_exit = True
        loop, exit_event = self._loop, self._exit
        if loop is not None and exit_event is not None:
            try:
                loop.call_soon_threadsafe(exit_event.set)
            except RuntimeError:
                pass  # the loop has closed: the server has already stopped

    async def serve(self, sockets: list[socket.socket]) -> None:
        """Start, serve until stopped, shut down."""
        loop = self._loop = asyncio.get_running_loop()
        self._exit = asyncio.Event()
        if self.should_exit:
            self._exit.set()
        restore = self._catch_signals(loop) if self.handle_signals else None
        try:
            lifespan = Lifespan(self.app, required=self.lifespan_required)
            if not await lifespan.startup():
                return
            self._app_state = lifespan.state
            self._refresh_date()
            for sock in sockets:
                server = await loop.create_server(self._connection, sock=sock, backlog=2048)
                self.servers.append(server)
            self.started = True
            await self._exit.wait()
            await self._shutdown(sockets)
            # Also after a second Ctrl-C: the calls it cut off record themselves and the ledger is closed.
            await lifespan.shutdown()
        finally:
            if restore is not None:
                restore()

    def _catch_signals(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        """SIGINT and SIGTERM begin the shutdown while serving; the function that puts the old handlers back."""
        try:
            for number in HANDLED_SIGNALS:
                loop.add_signal_handler(number, self._caught, number)
        except NotImplementedError:
            # Windows' event loops take no signal handlers: Python's own, passed to the loop (which the
            # signal wakes).
            previous = {
                number: signal.signal(number, lambda number, _frame: loop.call_soon_threadsafe(self._caught, number))
                for number in HANDLED_SIGNALS
            }

            def put_back() -> None:
                for number, handler in previous.items():
                    signal.signal(number, handler)

            return put_back

        def remove() -> None:
            for number in HANDLED_SIGNALS:
                loop.remove_signal_handler(number)

        return remove

    def _connection(self) -> asyncio.Protocol:
        # The loop passed in: asyncio.get_running_loop() is a getpid() system call on Python 3.11, per connection.
        assert self._loop is not None  # connections come only while `serve` runs
        return self.protocol(config=self.config, server_state=self.state, app_state=self._app_state, loop=self._loop)

    def _caught(self, number: int) -> None:
        self.caught.append(number)
        if self.should_exit and number == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for calls
        self.stop()

    def _refresh_date(self) -> None:
        now = time.time()
        self.state.default_headers = [(b"date", http_date(now))]
        if not self.should_exit:
            loop = asyncio.get_running_loop()
            # At the next whole second, so the header turns over with the clock.
            loop.call_later(DATE_REFRESH_S - now % DATE_REFRESH_S, self._refresh_date)

    async def _shutdown(self, sockets: list[socket.socket]) -> None:
        log.info("shutting down: %d call(s) running get up to %g s to finish", len(self.state.tasks), self.grace)
        for server in self.servers:
            server.close()
        for sock in sockets:
            sock.close()
        for connection in list(self.state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._settled(), timeout=self.grace)
        except TimeoutError:
            log.error("%d call(s) still running after %g s: cancelled", len(self.state.tasks), self.grace)
        for task in self.state.tasks:
            # After the grace, or at once after a second Ctrl-C.
            task.cancel(msg="cancelled: the proxy is stopping and its shutdown grace is over")

    async def _settled(self) -> None:
        """Until every connection is closed and every call has ended (or a second Ctrl-C)."""
        state = self.state
        while (state.connections or state.tasks) and not self.force_exit:
            await asyncio.sleep(WAIT_STEP_S)
        if self.force_exit:
            return
        for server in self.servers:
            await server.wait_closed()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (not on Windows or PyPy: see pyproject.toml); else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


__all__ = ["Lifespan", "ProtocolConfig", "ServerState", "Serving", "http_date", "websocket_upgrades"]
