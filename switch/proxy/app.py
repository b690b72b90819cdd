"""The ASGI application: routes, health probes, and the relay behind them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from switch import __version__, locations
from switch.config import LoadedConfig, Settings, file_digest
from switch.errors import ClientRequestError
from switch.ledger.record import RecordSink
from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages.inbound import request_to_ir as anthropic_request_to_ir
from switch.protocols.ir import RequestFormatError
from switch.protocols.tokens import estimate_input_tokens
from switch.proxy import litellm_upstream
from switch.proxy.budget_gate import BudgetGate
from switch.proxy.config_follower import ConfigFollower
from switch.proxy.exchange import Exchange, Receive, Scope, Send, new_id, parse_json_body
from switch.proxy.fail_open import FailOpen
from switch.proxy.guard import Guard
from switch.proxy.relay import Relay
from switch.proxy.responses_ws import ResponsesSocket, refusal_recorder
from switch.proxy.upstream import UpstreamPool
from switch.routing.classify import ROLES
from switch.routing.presets import PresetManager

log = logging.getLogger("switch.app")

Handler = Callable[[Exchange], Awaitable[None]]
GC_INTERVAL_S = 60.0
LAST_CALLS_S = 3.0  # at shutdown, how long cancelled calls may take to end their streams and record
KEY_START_WAIT_S = 15.0


class HotRoutes:
    """Dispatches the proxy endpoints straight to their handlers; everything else goes to Starlette.

    The model endpoints carry all the traffic, so they skip Starlette's routing and middleware,
    whose wrappers would otherwise sit around every streamed chunk.
    """

    def __init__(self, routes: dict[tuple[str, str], Handler], fallback: Any, upgrades: Any = None) -> None:
        self.routes = routes
        self.fallback = fallback
        self.upgrades = upgrades
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            handler = self.routes.get((scope["method"], scope["path"]))
            if handler is not None:
                self.in_flight += 1
                try:
                    await handler(Exchange(scope, receive, send))
                finally:
                    self.in_flight -= 1
                return
        elif scope["type"] == "websocket" and self.upgrades is not None:
            await self.upgrades(scope, receive, send)
            return
        await self.fallback(scope, receive, send)


async def _count_tokens_error(exchange: Exchange, status: int, message: str) -> None:
    request_id = new_id("req_")
    headers = [(b"content-type", b"application/json"), (b"request-id", request_id.encode())]
    if status < 500:
        headers.append((b"x-should-retry", b"false"))
    await exchange.respond(status, anthropic_errors.error_body(status, message, request_id), headers)


async def _ok(_request: Request) -> Response:
    return Response(b"", status_code=200)


def create_app(
    settings: Settings,
    *,
    sink: RecordSink | None = None,
    config: LoadedConfig | None = None,
    fail_open: FailOpen | None = None,
) -> Any:
    """Build the proxy app; `sink` receives one record per call; given `config`, edits of its file are followed.

    With `fail_open` (the config or preset could not be used at start-up), `settings` are the fallback ones
    and `config` their stand-in: calls are served degraded until the file and the preset load again."""
    pool = UpstreamPool(settings.server)
    presets = PresetManager(set(settings.providers), settings.defaults.model)
    relay = Relay(settings, pool, sink, presets)
    follower = ConfigFollower(config, relay, presets, sink) if config is not None else None
    if fail_open is not None:
        if follower is not None and fail_open.config_broken:
            # The watcher applies the file once it loads; until then it reports it as rejected.
            follower.rejected = {"digest": file_digest(follower.path), "error": fail_open.reason}
        fail_open.begin(presets)
        if fail_open.closed:
            relay.refusal = fail_open.refusal
    config_path = config.path if config is not None else locations.config_file()
    relay.budgets = BudgetGate.build(settings, config_path, getattr(sink, "database", None))
    started = time.time()

    async def count_tokens(exchange: Exchange) -> None:
        try:
            body = parse_json_body(await exchange.read_body(settings.server.max_body_bytes))
            if isinstance(body, dict):
                # count_tokens takes no max_tokens; whatever the client sent there is irrelevant.
                body = {**body, "max_tokens": 1}
            request = anthropic_request_to_ir(body)
            tokens = estimate_input_tokens(request)
        except ClientRequestError as exc:
            await _count_tokens_error(exchange, exc.status, exc.message)
            return
        except RequestFormatError as exc:
            await _count_tokens_error(exchange, 400, exc.message)
            return
        except Exception as exc:
            log.exception("switch failed counting the tokens of a request body")
            message = f"switch could not parse this request body ({type(exc).__name__} in the request parser)"
            await _count_tokens_error(exchange, 400, message)
            return
        await exchange.respond(200, orjson.dumps({"input_tokens": tokens}))

    async def models(_request: Request) -> Response:
        created = int(started)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
        preset = presets.active
        routes = preset.routes_for("claude-code")
        entries = []
        for role in ROLES:
            chain = preset.chain("claude-code", role)
            entries.append(
                {
                    "id": f"claude-switch-{role}",
                    "type": "model",
                    "object": "model",
                    "display_name": f"{role}: {chain[0]} ({preset.name})",
                    "created_at": stamp,
                    "created": created,
                    "owned_by": "switch",
                }
            )
        for family, chain in routes.families.items():
            entries.append(
                {
                    "id": f"claude-switch-{family}",
                    "type": "model",
                    "object": "model",
                    "display_name": f"{family}: {chain[0]} ({preset.name})",
                    "created_at": stamp,
                    "created": created,
                    "owned_by": "switch",
                }
            )
        payload = {
            "object": "list",
            "data": entries,
            "has_more": False,
            "first_id": entries[0]["id"],
            "last_id": entries[-1]["id"],
        }
        return Response(orjson.dumps(payload), media_type="application/json")

    ledger_health = getattr(sink, "health", None)

    def budget_report() -> list[dict[str, Any]]:
        gate = relay.budgets
        return gate.book.report() if gate is not None else []

    def observe_budgets(rows: list[dict[str, Any]]) -> None:
        gate = relay.budgets  # read once: a config reload swaps it under the recorder's publish lock
        if gate is not None:
            gate.book.observe(rows)

    # The recorder's stream of committed rows; registered before its writer starts (`switch serve`), so
    # the spill file's replay reaches them too, and the budgets count only rows after what they loaded.
    consumers = getattr(sink, "consumers", None)
    if isinstance(consumers, list):
        consumers.append(observe_budgets)
    metrics_routes: list[Route] = []
    if settings.server.metrics:
        # Imported here, not at the top: only a serving proxy with metrics on loads prometheus_client.
        from switch.proxy.metrics import Metrics

        metrics = Metrics(ledger_health, budget_report)
        if isinstance(consumers, list):
            consumers.append(metrics.observe)

        async def metrics_endpoint(_request: Request) -> Response:
            return Response(metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

        metrics_routes.append(Route("/metrics", metrics_endpoint, methods=["GET"]))

    # Who this proxy is, so a command run from another SWITCH_HOME never mistakes it for its own.
    identity = {"home": str(locations.home().resolve()), "pid": os.getpid(), "version": __version__}
    # Set in the login service's unit (switch.service): `up`, `down` and `status` leave such a proxy to it.
    service = os.environ.get("SWITCH_SERVICE", "")

    async def healthz(_request: Request) -> Response:
        payload: dict[str, Any] = {"status": "ok", "uptime_s": round(time.time() - started, 1), **identity}
        # What routes calls now: after a broken edit that is the last good preset, not the one the file names.
        payload["preset"] = {"name": presets.active.name, "error": presets.error}
        if service:
            payload["service"] = service
        if fail_open is not None and fail_open.active:
            # 200 all the same: the proxy answers every call (natively, or with the 503 that says why).
            payload["status"] = "degraded"
            payload["fail_open"] = fail_open.health()
        if follower is not None:
            payload["config"] = follower.health()
        if ledger_health is not None:
            # Still 200 when the ledger is in trouble: calls are served (and kept) all the same, and
            # harness start-up probes must pass; "degraded" and the figures say what is wrong.
            payload["ledger"] = ledger = ledger_health()
            if not ledger.get("ok", True):
                payload["status"] = "degraded"
        if relay.budgets is not None:
            payload["budgets"] = budget_report()
        return Response(orjson.dumps(payload), media_type="application/json")

    async def watch_files() -> None:
        # A stat of a handful of small files every half second: `switch use` and config.toml edits
        # take effect within a second, and requests never wait for it.
        while True:
            await asyncio.sleep(0.5)
            if follower is not None:
                try:
                    follower.poll()
                except OSError as exc:
                    log.warning("could not read config.toml: %s", exc)
                except Exception:  # the watcher must keep running: the next edit may be fine
                    log.exception("could not apply config.toml")
            try:
                presets.refresh()
            except OSError as exc:
                log.warning("could not read presets: %s", exc)
            if fail_open is not None and fail_open.active:
                config_ok = follower is None or follower.rejected is None
                if fail_open.settle(config_ok, presets):
                    relay.refusal = None

    async def collect_cycles() -> None:
        # `switch serve` raises the collector's thresholds so requests do not pay for young-generation
        # passes; requests free almost everything by refcount, so the count that triggers a pass can
        # take hours to reach. Our code leaves no cycles behind, but libraries can (uvicorn's protocol
        # and its parser, for one, per closed client connection): a timed pass over the young
        # generations bounds them. Long-lived tables move to the old generation on the first pass.
        while True:
            await asyncio.sleep(GC_INTERVAL_S)
            began = time.perf_counter()
            found = gc.collect(1)
            log.debug("collected %d objects in %.1f ms", found, (time.perf_counter() - began) * 1000)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # Keys are read before the first call is accepted, on the key thread, never on this loop.
        relay.keys.start()
        if not await asyncio.to_thread(relay.keys.wait_loaded, KEY_START_WAIT_S):
            log.warning("still reading provider keys after %.0f s; serving meanwhile", KEY_START_WAIT_S)
        watcher = asyncio.create_task(watch_files())
        collector = asyncio.create_task(collect_cycles())
        try:
            yield
        finally:
            watcher.cancel()
            collector.cancel()
            # uvicorn starts this once the grace period is over and it has cancelled the calls still
            # running; they are ending their streams and recording themselves: wait for that.
            deadline = time.monotonic() + LAST_CALLS_S
            while (app.in_flight or upgrades.turns) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            relay.keys.stop()
            if fail_open is not None:
                fail_open.clear_marker()
            await pool.aclose()
            await litellm_upstream.close_clients()
            # Write out queued records here, inside the server's shutdown: uvicorn re-raises the
            # SIGTERM/SIGINT it caught once `run()` returns, which ends the process on the spot.
            close_sink = getattr(sink, "close", None)
            if close_sink is not None:
                await asyncio.to_thread(close_sink)

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        *metrics_routes,
        Route("/", _ok, methods=["GET", "HEAD"]),
        Route("/api/hello", _ok, methods=["GET", "HEAD"]),
    ]
    starlette_app = Starlette(routes=routes, lifespan=lifespan)
    starlette_app.state.relay = relay
    starlette_app.state.presets = presets
    hot: dict[tuple[str, str], Handler] = {
        ("POST", "/v1/messages"): relay.messages,
        ("POST", "/v1/messages/count_tokens"): count_tokens,
        ("POST", "/v1/chat/completions"): relay.chat_completions,
        ("POST", "/v1/responses"): relay.responses_api,
        ("POST", "/chat/completions"): relay.chat_completions,
        ("POST", "/responses"): relay.responses_api,
    }
    upgrades = ResponsesSocket(relay)
    app = HotRoutes(hot, starlette_app, upgrades)
    return Guard(app, settings.server.access_token, refusal_recorder(sink))


__all__ = ["create_app"]
