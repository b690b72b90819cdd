"""The route and fallback loop: read a call once, classify it, try each target of its route in turn.

Per call: the client body is read and parsed once and classified once; each attempt goes down one
path (`passthrough` for the caller's own native API, `translated` for any other), and every
attempt is recorded by its `Meter`. One guard per call (`Exchange.watch_client`) cancels it,
upstream call included, when the client hangs up; a later target serves only while nothing has
reached the client yet (see `failures`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from switch.config import Settings, litellm_names
from switch.errors import ClientRequestError, RoutingError
from switch.ledger.limits import limit_table
from switch.ledger.record import RecordSink
from switch.protocols.ir import Reasoning, Request, Usage
from switch.protocols.openai_responses.compaction import UNCARRIED
from switch.proxy.adapters import (
    ANTHROPIC_INBOUND,
    CHAT_INBOUND,
    RESPONSES_INBOUND,
    InboundApi,
)
from switch.proxy.budget_gate import BLOCK_STATUS, BudgetGate, capped
from switch.proxy.exchange import Exchange, new_id, parse_json_body
from switch.proxy.failures import (
    CLIENT_LEFT,
    REQUEST_ERRORS,
    SHUTTING_DOWN,
    Attempt,
    Failure,
    Rejection,
    fail,
    overflow_failure,
    rejection,
    send_error,
)
from switch.proxy.litellm_upstream import LITELLM_UPSTREAM, LOADER, LiteLLMTransport, uses_litellm
from switch.proxy.meter import Meter
from switch.proxy.passthrough import PassThroughPath
from switch.proxy.plan_quota import PlanQuotas
from switch.proxy.room import Room, clamped, with_limits
from switch.proxy.state import KeyCache, ReasoningCache, ResponseStore, SessionAffinity
from switch.proxy.translated import TranslatedPath
from switch.proxy.transport import Transport
from switch.proxy.upstream_apis import UPSTREAMS, UpstreamApi
from switch.routing.classify import CallInfo, classify
from switch.routing.forks import ForkMatcher, route_owner
from switch.routing.presets import PresetManager, TargetOptions
from switch.routing.resolve import Target, resolve_target
from switch.values import evolve

log = logging.getLogger("switch.relay")


@dataclass(slots=True)
class _Call:
    """The meter of the attempt in progress, where the safety net in `Relay.handle` can find it."""

    meter: Meter


def _can_outgrow(room: Room, later: tuple[tuple[str, bool], ...], current: Target) -> bool:
    return room.fallback and any(room.may_outgrow(reference, current) for reference, _is_long in later)


def _with_options(request: Request, options: TargetOptions) -> Request:
    """Apply a preset's per-target reasoning and output-cap options to a request."""
    reasoning = request.reasoning
    if options.reasoning == "off":
        reasoning = Reasoning(False)
    elif options.reasoning != "follow":
        reasoning = Reasoning(options.reasoning != "none", options.reasoning)  # type: ignore[arg-type]
    cap = options.max_output_tokens
    limit = min(request.max_output_tokens or cap, cap) if cap else request.max_output_tokens
    if reasoning is request.reasoning and limit == request.max_output_tokens:
        return request
    return evolve(request, reasoning=reasoning, max_output_tokens=limit)


def _classify(headers: dict[str, str], body: Any) -> CallInfo:
    try:
        return classify(headers, body)
    except Exception:
        # Attribution is best effort: a classifier bug must not cost the caller its answer.
        log.exception("could not classify a call; serving it as an orchestrator call")
        return CallInfo("other", "orchestrator", None, None, None)


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A client body read, classified and turned into IR."""

    body: dict[str, Any]
    request: Request
    info: CallInfo


class Relay:
    """Serves each inbound API by forwarding or translating to the routed upstream."""

    def __init__(
        self,
        settings: Settings,
        http: Transport,
        sink: RecordSink | None = None,
        presets: PresetManager | None = None,
        litellm: Transport | None = None,
    ) -> None:
        self.settings = settings
        # The two ways a call goes upstream (`transport`): HTTP for every API, LiteLLM's SDK for its targets.
        self.http = http
        self.litellm = litellm if litellm is not None else LiteLLMTransport(settings.server)
        self.sink = sink
        self.presets = presets or PresetManager(set(settings.providers), settings.defaults.model)
        self.reasoning = ReasoningCache()
        self.keys = KeyCache({name: provider.api_key_env for name, provider in settings.providers.items()})
        self.responses = ResponseStore()
        self.affinity = SessionAffinity()
        self.forks = ForkMatcher()
        self.translated = TranslatedPath(settings, self.keys, self.reasoning, self.responses)
        self.quotas = PlanQuotas(sink)
        self.passthrough = PassThroughPath(settings, http, self.quotas)
        self._targets: dict[tuple[str, str], Target] = {}
        self._smallest: dict[tuple[str, tuple[tuple[str, bool], ...]], int | None] = {}
        """Per inbound API and route: the smallest known window on it (see `Room.size_up`)."""
        self.limits = limit_table(settings.models, litellm_names(settings))
        self.budgets: BudgetGate | None = None
        # Set while failing closed: every model call gets this message with a 503 (switch.proxy.fail_open).
        self.refusal: str | None = None
        if uses_litellm(settings):
            LOADER.warm()

    def reconfigure(self, settings: Settings) -> None:
        """Route later calls with `settings` (config.toml changed); calls in flight keep their targets."""
        self.settings = settings
        self.translated.settings = settings
        self.passthrough.settings = settings
        if isinstance(self.litellm, LiteLLMTransport):
            self.litellm.server = settings.server
        # Targets resolved from the old providers (base_url, api, key variable) must not outlive them.
        self._targets = {}
        self._smallest = {}
        self.limits = limit_table(settings.models, litellm_names(settings))
        if uses_litellm(settings):
            LOADER.warm()

    def _resolve(self, reference: str, inbound: InboundApi) -> Target:
        cached = self._targets.get((reference, inbound.name))
        if cached is None:
            cached = with_limits(resolve_target(self.settings, reference, inbound.name), self.limits)  # type: ignore[arg-type]
            self._targets[(reference, inbound.name)] = cached
        return cached

    async def messages(self, exchange: Exchange) -> None:
        """Serve Anthropic Messages."""
        await self.handle(exchange, ANTHROPIC_INBOUND)

    async def chat_completions(self, exchange: Exchange) -> None:
        """Serve OpenAI Chat Completions."""
        await self.handle(exchange, CHAT_INBOUND)

    async def responses_api(self, exchange: Exchange) -> None:
        """Serve OpenAI Responses."""
        await self.handle(exchange, RESPONSES_INBOUND)

    async def handle(self, exchange: Exchange, inbound: InboundApi) -> None:
        """Serve one call on `inbound`; a bug in switch becomes a 500 in the caller's format."""
        call = _Call(Meter(exchange, inbound.name, self.sink))
        try:
            await self._handle(exchange, inbound, call)
        except Exception:
            log.exception("switch failed while serving %s %s", inbound.name, exchange.path)
            message = "switch hit an internal error serving this call; see the switch log"
            if exchange.status == 0:
                meter = call.meter
                exchange.route = exchange.route or f"{meter.preset}; role={meter.role}; model=none".encode()
                await send_error(exchange, inbound, 500, message, new_id("req_"))
            elif not exchange.finished:
                await exchange.end_stream()
            if not call.meter.recorded:
                call.meter.finish("proxy_error", message)

    async def _handle(self, exchange: Exchange, inbound: InboundApi, call: _Call) -> None:
        meter = call.meter
        request_id = new_id("req_")
        parsed = await self._read_request(exchange, inbound, meter)
        if isinstance(parsed, Rejection):
            # Refused before routing: no target, but the caller still learns which preset and role it met.
            exchange.route = f"{meter.preset}; role={meter.role}; model=none".encode()
            await send_error(
                exchange, inbound, parsed.status, parsed.message, request_id, parsed.retry_after, parsed.param
            )
            meter.finish("rejected", parsed.message)
            return
        if self.refusal is not None:
            # Failing closed (switch.proxy.fail_open): classified and recorded, but sent nowhere.
            exchange.route = f"{meter.preset}; role={meter.role}; model=none".encode()
            await send_error(exchange, inbound, 503, self.refusal, request_id)
            meter.finish("proxy_error", self.refusal)
            return
        request, info = parsed.request, parsed.info
        preset = self.presets.active
        if info.session_id and self.settings.routing.affinity == "session" and self.presets.pinned is None:
            # A session keeps the routes it started with: its upstream prefix cache stays warm.
            # A fork shares its parent's pin: after a `switch use` it still reads the history where it is cached.
            preset = self.affinity.pin(info.session_id, route_owner(info), preset)
        if request.cache_key is None and info.session_id:
            request = evolve(request, cache_key=info.session_id)
        meter.requested_model = request.model
        meter.streamed = request.stream
        meter.preset = preset.name
        chain = preset.chain(info.harness, info.role, info.family, info.kind)
        gate = self.budgets
        effort: str | None = None
        if gate is not None:
            verdict = gate.verdict(info, chain, inbound.name, request.model, self.quotas.utilization)
            if verdict is not None:
                meter.budget, meter.budget_action = verdict.budget, verdict.action
                if verdict.message is not None:
                    exchange.route = f"{preset.name}; role={info.role}; model=none".encode()
                    await send_error(exchange, inbound, BLOCK_STATUS, verdict.message, request_id)
                    meter.finish("rejected", verdict.message)
                    return
                rerouted = gate.rerouted(verdict)
                if rerouted is not None:
                    # The budget's preset routes this call, with its target options, and is what the ledger shows.
                    preset = rerouted
                    meter.preset = preset.name
                    chain = preset.chain(info.harness, info.role, info.family, info.kind)
                effort = verdict.effort
        fallback_on = self.settings.routing.fallback_on
        candidates = preset.long_chain(info.harness, info.role, info.family, info.kind)
        room = Room(
            lambda reference: self._resolve(reference, inbound),
            request,
            len(exchange.body),
            "context_window" in fallback_on,
        )
        route = (inbound.name, candidates)
        if route not in self._smallest:
            self._smallest[route] = room.smallest_window(tuple(ref for ref, _long in candidates))
        room.size_up(self._smallest[route])
        trigger: str | None = None
        skipped: Target | None = None
        last_overflow: Failure | None = None
        for number, (reference, is_long) in enumerate(candidates):
            try:
                target = self._resolve(reference, inbound)
            except RoutingError as exc:
                exchange.route = f"{preset.name}; role={info.role}; model={reference}".encode()
                await send_error(exchange, inbound, 500, exc.message, request_id)
                meter.finish("proxy_error", exc.message)
                return
            if (is_long and not room.outgrown) or not room.holds(target):
                # Not an attempt: this target's window cannot hold the prompt (or it is only for those that
                # outgrow the role's own targets), so no upstream is asked what it must refuse.
                if not is_long:
                    skipped = skipped or target
                    room.outgrown = True
                    trigger = "context_window"
                continue
            later = [ref for ref, long_ in candidates[number + 1 :] if room.may_hold(ref, long_)]
            if later and target.native and self.quotas.resting_until(target.provider, exchange.headers):
                # Not an attempt: the plan rejected this account until its reset, and another target can serve.
                trigger = "quota"
                continue
            routed = clamped(request, target)
            attempt_meter = evolve(meter, target=target, attempt=number, trigger=trigger, usage=Usage())
            if gate is not None:
                attempt_meter.budget_hold = gate.hold(info, target, routed, len(exchange.body))
            call.meter = attempt_meter
            exchange.route = f"{preset.name}; role={info.role}; model={reference}".encode()
            log.debug(
                "route %s %s role=%s preset=%s attempt=%d -> %s",
                info.harness,
                inbound.name,
                info.role,
                preset.name,
                number,
                reference,
            )
            attempt = Attempt(exchange, inbound, attempt_meter, request_id, bool(later), fallback_on, room.estimate)
            # A target refusing the prompt as too long outgrows the role's own: long_context ones count too.
            attempt.can_outgrow = partial(_can_outgrow, room, candidates[number + 1 :], target)
            uncarried = request.provider_data.get(UNCARRIED)
            if target.native and target.api == inbound.name:
                served = self.passthrough.serve(attempt, target, parsed.body)
            elif uncarried is not None:
                # Translating would drop part of the conversation: refused, never skipped.
                await send_error(exchange, inbound, 400, f"{uncarried} ({reference})", request_id)
                attempt_meter.finish("rejected", uncarried, status=400)
                return
            else:
                upstream: UpstreamApi | None
                if target.api == "litellm":
                    upstream, transport = LITELLM_UPSTREAM, self.litellm
                else:
                    upstream, transport = UPSTREAMS.get(target.api), self.http
                if upstream is None:
                    message = f"upstream API '{target.api}' cannot serve {inbound.name} requests"
                    await send_error(exchange, inbound, 501, message, request_id)
                    attempt_meter.finish("proxy_error", message)
                    return
                routed = capped(_with_options(routed, preset.options(reference)), effort)
                served = self.translated.serve(attempt, upstream, routed, target, transport)
            failure = await self._watched(attempt, served)
            if failure is None:
                return
            trigger = failure.trigger
            if failure.outcome == "context_overflow":
                last_overflow = failure
                room.outgrow(target)
        # Every target was passed over or handed on for its window: the prompt fits none of them.
        first = skipped or (self._resolve(candidates[0][0], inbound) if candidates else None)
        refused = evolve(meter, target=first, attempt=0, trigger=None, usage=Usage())
        call.meter = refused
        exchange.route = f"{preset.name}; role={info.role}; model=none".encode()
        attempt = Attempt(exchange, inbound, refused, request_id, False, fallback_on, room.estimate)
        detail = "no target of this route has a context window that holds it"
        failure = overflow_failure(attempt, last_overflow.overflow if last_overflow else None, detail)
        # Refused by switch, before any provider: no model served it and it cost nothing (as a 400 or 413 does).
        refused.target = None
        await fail(attempt, failure)

    async def _read_request(self, exchange: Exchange, inbound: InboundApi, meter: Meter) -> _Parsed | Rejection:
        """Read, classify and parse the client's body; what it tells goes on `meter` even if it is rejected."""
        body: Any = None
        refused: Rejection | None = None
        try:
            body = parse_json_body(await exchange.read_body(self.settings.server.max_body_bytes))
        except ClientRequestError as exc:
            refused = Rejection(exc.status, exc.message, exc.param, exc.retry_after)
        info = self.forks.refine(_classify(exchange.headers, body), body)
        meter.harness = info.harness
        meter.role = info.role
        meter.session_id = info.session_id
        meter.agent_id = info.agent_id
        meter.request_kind = info.kind
        meter.parent_agent_id = info.parent_agent_id
        meter.preset = self.presets.active.name
        if isinstance(body, dict):
            model = body.get("model")
            meter.requested_model = model if isinstance(model, str) else ""
            meter.streamed = body.get("stream") is True
        if refused is not None:
            return refused
        try:
            request = inbound.request_to_ir(body)
            previous = request.provider_data.get("previous_response_id")
            if previous:
                request = self._with_previous(request, str(previous))
        except REQUEST_ERRORS as exc:
            return rejection(exc)
        except Exception as exc:
            # The parsers validate what they read; this is the net under a case they missed, so an
            # odd body still gets a 400 (which SDKs do not retry) rather than a 500.
            log.exception("switch failed parsing a %s request body", inbound.name)
            return Rejection(
                400,
                f"switch could not parse this {inbound.name} request body ({type(exc).__name__} in the request "
                "parser); check the body's field types, and see the switch log",
            )
        # A parser accepts only a JSON object, so the body is one here.
        return _Parsed(body, request, info)

    async def _watched(self, attempt: Attempt, served: Coroutine[Any, Any, Failure | None]) -> Failure | None:
        """Run one attempt; a client that hangs up while it waits cancels it, upstream call included."""
        exchange, meter = attempt.exchange, attempt.meter
        task = exchange.task()
        stop_watch = exchange.watch_client(task)
        try:
            return await served
        except asyncio.CancelledError:
            task.uncancel()
            if exchange.disconnected:
                meter.finish("client_cancelled", CLIENT_LEFT)
                return None
            # Nothing else cancels a call whose client is still connected: the server is stopping
            # and its grace period ran out. Answer in the caller's format, and keep the record.
            if exchange.status == 0:
                await send_error(exchange, attempt.inbound, 503, SHUTTING_DOWN, attempt.request_id)
            elif not exchange.finished:
                await exchange.end_stream()
            meter.finish("proxy_error", SHUTTING_DOWN, status=503)
            return None
        finally:
            stop_watch()

    def _with_previous(self, request: Request, previous_id: str) -> Request:
        history = self.responses.get(previous_id)
        if history is None:
            raise ClientRequestError(
                f"Previous response with id '{previous_id}' not found. switch keeps the last "
                f"{self.responses.capacity} stored responses in memory, up to "
                f"{self.responses.max_chars // (1024 * 1024)} MiB of text in all; send the full input instead.",
                param="previous_response_id",
            )
        return evolve(request, messages=history + request.messages)
