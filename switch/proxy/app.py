"""The ASGI application, composed of named parts: the relay and its routes, health, metrics, lifespan tasks.

`create_app` only wires them: the router (`endpoints.Routes`) with the model routes (→ `relay`) and the
small endpoints (`endpoints`, `health`, `/metrics`), the tasks that run beside the calls (`lifespan`), and
the config follower (`config_follower`), all under the guard.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from switch import locations
from switch.config import LoadedConfig, Settings, file_digest
from switch.ledger.record import RecordSink
from switch.proxy.body_budget import BodyBudget
from switch.proxy.budget_gate import BudgetGate
from switch.proxy.config_follower import ConfigFollower
from switch.proxy.endpoints import Handler, Routes, count_tokens_handler, model_routes, models_endpoint, ok, readable
from switch.proxy.exchange import Exchange
from switch.proxy.fail_open import FailOpen
from switch.proxy.guard import Guard
from switch.proxy.health import Health
from switch.proxy.heap import return_freed_heap
from switch.proxy.lifespan import collect_cycles, lifespan, watch_files
from switch.proxy.relay import Relay
from switch.proxy.responses_ws import ResponsesSocket, refusal_recorder
from switch.proxy.upstream import UpstreamPool
from switch.routing.presets import Preset, PresetManager


def _follower(
    config: LoadedConfig | None, relay: Relay, presets: PresetManager, sink: Any, fail_open: FailOpen | None
) -> ConfigFollower | None:
    """The config follower for `config`'s file, told of a broken file the proxy started without."""
    follower = ConfigFollower(config, relay, presets, sink) if config is not None else None
    if fail_open is not None:
        if follower is not None and fail_open.config_broken:
            # The watcher applies the file once it loads; until then it reports it as rejected.
            follower.rejected = {"digest": file_digest(follower.path), "error": fail_open.reason}
        fail_open.begin(presets)
        if fail_open.closed:
            relay.refusal = fail_open.refusal
    return follower


def _configured(settings: Settings, preset: Preset, model: str) -> bool:
    """Whether `provider/model` is named in config.toml or routed to by the active preset (for metric labels)."""
    if model in settings.models or model in settings.prices or model == settings.defaults.model:
        return True
    for routes in preset.sections.values():
        chains = (*routes.roles.values(), routes.fallback, *routes.families.values(), *routes.kinds.values())
        if any(model in chain for chain in (*chains, *routes.long_context.values())):
            return True
    return False


METRICS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def _metrics_routes(
    settings: Settings, health: Health, consumers: list[Any] | None, relay: Relay, presets: PresetManager
) -> dict[str, Handler]:
    """`GET /metrics` when the config turns it on; its counters follow the recorder's committed rows."""
    if not settings.server.metrics:
        return {}
    # Imported here, not at the top: only a serving proxy with metrics on loads prometheus_client.
    from switch.proxy.metrics import Metrics

    metrics = Metrics(
        health.ledger_health, health.budget_report, lambda model: _configured(relay.settings, presets.active, model)
    )
    if consumers is not None:
        consumers.append(metrics.observe)

    async def metrics_endpoint(exchange: Exchange) -> None:
        await exchange.respond(200, metrics.exposition(), [(b"content-type", METRICS_TYPE)])

    return {"/metrics": metrics_endpoint}


def _observe_budgets(relay: Relay, rows: list[dict[str, Any]]) -> None:
    gate = relay.budgets  # read once: a config reload swaps it under the recorder's publish lock
    if gate is not None:
        gate.book.observe(rows)


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
    presets = PresetManager(set(settings.providers), settings.defaults.model)
    relay = Relay(settings, UpstreamPool(settings.server), sink, presets)
    follower = _follower(config, relay, presets, sink, fail_open)
    config_path = config.path if config is not None else locations.config_file()
    relay.budgets = BudgetGate.build(
        settings, config_path, getattr(sink, "database", None), pricer=getattr(sink, "pricer", None)
    )
    health = Health(relay, presets, follower, fail_open, getattr(sink, "health", None), time.time())

    # The recorder's stream of committed rows; registered before its writer starts (`switch serve`), so
    # the spill file's replay reaches them too, and the budgets count only rows after what they loaded.
    consumers = getattr(sink, "consumers", None)
    consumers = consumers if isinstance(consumers, list) else None
    if consumers is not None:
        consumers.append(functools.partial(_observe_budgets, relay))
    endpoints = readable(
        {
            "/v1/models": models_endpoint(presets, health.started),
            "/healthz": health.endpoint,
            **_metrics_routes(settings, health, consumers, relay, presets),
            "/": ok,
            "/api/hello": ok,
        }
    )
    tasks: list[Callable[[], Any]] = [
        functools.partial(watch_files, follower, presets, fail_open, relay),
        collect_cycles,
    ]
    routes = Routes(
        relay,
        model_routes(relay, count_tokens_handler(settings)),
        endpoints,
        BodyBudget(settings.server.max_buffered_body_bytes),
        ResponsesSocket(relay),
    )
    tasks.append(functools.partial(return_freed_heap, routes))
    routes.lifespan = lifespan(relay, sink, fail_open, tasks, routes)
    return Guard(routes, settings.server.access_token, refusal_recorder(sink))


__all__ = ["create_app"]
