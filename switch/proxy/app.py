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
from switch.config import LoadedConfig, Settings, file_digest, file_signature, litellm_names, load_config
from switch.errors import ClientRequestError, ConfigError
from switch.ledger.record import RecordSink
from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages.inbound import request_to_ir as anthropic_request_to_ir
from switch.protocols.ir import RequestFormatError
from switch.protocols.tokens import estimate_input_tokens
from switch.proxy import litellm_upstream
from switch.proxy.budget_gate import BudgetGate
from switch.proxy.exchange import Exchange, Receive, Scope, Send, new_id, parse_json_body
from switch.proxy.guard import Guard
from switch.proxy.relay import Relay
from switch.proxy.upstream import UpstreamPool
from switch.routing.classify import ROLES
from switch.routing.presets import PresetManager, active_name, load_preset

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

    def __init__(self, routes: dict[tuple[str, str], Handler], fallback: Any) -> None:
        self.routes = routes
        self.fallback = fallback
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
        await self.fallback(scope, receive, send)


class ConfigFollower:
    """Applies config.toml edits to the running proxy; a file it cannot use leaves the last good config running.

    Providers, `[defaults]`, `[routing]`, `[models]` and prices follow the file; `[server]` (where and how
    the proxy listens) needs a restart, which the log and `/healthz` say. Each change swaps whole
    objects, so a call sees the old config or the new one and requests pay nothing for the watching.
    """

    def __init__(self, loaded: LoadedConfig, relay: Relay, presets: PresetManager, sink: RecordSink | None) -> None:
        self.relay = relay
        self.presets = presets
        self.sink = sink
        self.path = loaded.path
        self.running = loaded
        self.started_server = loaded.server
        self.seen = loaded.signature
        self.loaded_at = time.time()
        self.rejected: dict[str, str | None] | None = None
        self.restart_needed: list[str] = []

    def poll(self) -> bool:
        """Apply the file if it changed since the last look; True when the running config changed."""
        signature = file_signature(self.path)
        if signature == self.seen:
            return False
        self.seen = signature
        try:
            loaded = load_config(self.path)
            self._check_active_preset(loaded)
        except ConfigError as exc:
            if self.rejected is None or self.rejected["error"] != exc.message:
                log.error("config.toml rejected, still running on the previous config: %s", exc.message)
            self.rejected = {"digest": file_digest(self.path), "error": exc.message}
            return False
        self.rejected = None
        if loaded.digest == self.running.digest:
            return False
        self._apply(loaded)
        return True

    def _check_active_preset(self, loaded: LoadedConfig) -> None:
        # A provider the active preset routes to must not vanish under it; when the preset was already
        # broken on its own, the preset watcher reports that, not this file.
        name = active_name()
        if name is None or self.presets.error is not None:
            return
        try:
            load_preset(name, set(loaded.settings.providers), loaded.settings.defaults.model)
        except ConfigError as exc:
            raise ConfigError(f"{self.path}: the active preset no longer loads with it: {exc.message}") from exc

    def _apply(self, loaded: LoadedConfig) -> None:
        running = self.relay.settings
        settings = loaded.settings.model_copy(update={"server": running.server})
        providers = {name: provider.api_key_env for name, provider in settings.providers.items()}
        if providers != {name: provider.api_key_env for name, provider in running.providers.items()}:
            self.relay.keys.reconfigure(providers)
        self.relay.reconfigure(settings)
        if set(settings.providers) != self.presets.providers or settings.defaults.model != self.presets.fallback_model:
            self.presets.reconfigure(set(settings.providers), settings.defaults.model)
        if (
            settings.prices != running.prices
            or settings.pricing != running.pricing
            or litellm_names(settings) != litellm_names(running)
        ):
            self._reprice(settings)
        if settings.budgets != running.budgets or set(settings.providers) != set(running.providers):
            # Rebuilt from the ledger: spend so far this period carries over to the edited budgets.
            self.relay.budgets = BudgetGate.build(settings, self.path, getattr(self.sink, "database", None))
        self.running = loaded
        self.loaded_at = time.time()
        self.restart_needed = sorted(
            key for key, value in loaded.server.items() if value != self.started_server.get(key)
        )
        log.warning("config.toml reloaded: %s", loaded.path)
        if self.restart_needed:
            log.warning(
                "config.toml changes [server] %s: that applies only after a restart (switch down && switch up)",
                ", ".join(self.restart_needed),
            )

    def _reprice(self, settings: Settings) -> None:
        from switch.ledger.pricer import Pricer

        if isinstance(getattr(self.sink, "pricer", None), Pricer):
            # The writer thread reads `pricer` once per row; the new table loads there, on first use.
            self.sink.pricer = Pricer(  # type: ignore[union-attr]
                settings.prices,
                litellm_names=litellm_names(settings),
                baseline_anthropic=settings.pricing.baseline_anthropic,
                baseline_openai=settings.pricing.baseline_openai,
            )

    def health(self) -> dict[str, Any]:
        """The config the proxy runs with, for /healthz (which `switch doctor` compares with the file)."""
        signature = self.running.signature
        return {
            "path": str(self.path),
            "digest": self.running.digest,
            "mtime": signature[1] / 1e9 if signature else None,
            "loaded_at": round(self.loaded_at, 3),
            "rejected": self.rejected,
            "restart_needed": self.restart_needed,
        }


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
) -> Any:
    """Build the proxy app; `sink` receives one record per call; given `config`, edits of its file are followed."""
    pool = UpstreamPool(settings.server)
    presets = PresetManager(set(settings.providers), settings.defaults.model)
    relay = Relay(settings, pool, sink, presets)
    follower = ConfigFollower(config, relay, presets, sink) if config is not None else None
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

    def observe_budgets(record: Any, row: dict[str, Any]) -> None:
        gate = relay.budgets  # read once: a config reload may swap it meanwhile
        if gate is not None:
            gate.book.observe(record, row)

    observers = getattr(sink, "observers", None)
    if isinstance(observers, list):
        observers.append(observe_budgets)
    metrics_routes: list[Route] = []
    if settings.server.metrics:
        # Imported here, not at the top: only a serving proxy with metrics on loads prometheus_client.
        from switch.proxy.metrics import Metrics

        metrics = Metrics(ledger_health, budget_report)
        if isinstance(observers, list):
            observers.append(metrics.observe)

        async def metrics_endpoint(_request: Request) -> Response:
            return Response(metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

        metrics_routes.append(Route("/metrics", metrics_endpoint, methods=["GET"]))

    # Who this proxy is, so a command run from another SWITCH_HOME never mistakes it for its own.
    identity = {"home": str(locations.home().resolve()), "pid": os.getpid(), "version": __version__}

    async def healthz(_request: Request) -> Response:
        payload: dict[str, Any] = {"status": "ok", "uptime_s": round(time.time() - started, 1), **identity}
        # What routes calls now: after a broken edit that is the last good preset, not the one the file names.
        payload["preset"] = {"name": presets.active.name, "error": presets.error}
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
            while app.in_flight and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            relay.keys.stop()
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
    app = HotRoutes(hot, starlette_app)
    return Guard(app, settings.server.access_token)


__all__ = ["create_app"]
