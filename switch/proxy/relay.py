"""The only module that talks to upstreams: forward, translate, stream back, meter.

Per call: the client body is read and parsed once, translated once, and the upstream response is
relayed as it arrives: one `send` per upstream read, no task or timer per chunk. One guard per call
(`Exchange.watch_client`, a timer on uvicorn's httptools cycle) cancels it, upstream call included,
when the client hangs up, from the upstream request on; streams extend it with keep-alive pings.
Timings and usage are gathered on the way and handed to the record sink without waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from switch.config import Settings
from switch.errors import ClientRequestError, RoutingError, UpstreamError
from switch.ledger.record import CallRecord, Outcome, RecordSink
from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.collect import ResponseCollector, replay
from switch.protocols.ir import (
    Message,
    ProtocolError,
    Reasoning,
    ReasoningPart,
    Request,
    RequestFormatError,
    Response,
    StreamSink,
    ToolCallPart,
    UpstreamFormatError,
    UpstreamReportedError,
    Usage,
)
from switch.protocols.openai_chat import errors as openai_errors
from switch.protocols.openai_responses.outbound import response_to_ir as responses_response_to_ir
from switch.protocols.sse import SseDecoder
from switch.protocols.tools import CustomCallUnwrapper, ToolIndex, unwrap_response
from switch.protocols.wire import MAX_COUNT, label
from switch.proxy.adapters import (
    ANTHROPIC_INBOUND,
    CHAT_INBOUND,
    RESPONSES_INBOUND,
    UPSTREAMS,
    InboundApi,
    UpstreamApi,
)
from switch.proxy.exchange import Exchange, new_id
from switch.proxy.state import KeyCache, ReasoningCache, ResponseStore, SessionAffinity
from switch.proxy.upstream import UpstreamPool, UpstreamResponse
from switch.routing.classify import CallInfo, classify
from switch.routing.presets import PresetManager, TargetOptions
from switch.routing.resolve import Target, resolve_target

log = logging.getLogger("switch.relay")

_HOP_BY_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
    }
)
CLIENT_LEFT = "the client closed the connection before the answer"
SHUTTING_DOWN = "switch is shutting down; this call was cut short"
_FORWARDED_RESPONSE_HEADERS = frozenset(
    {"content-type", "request-id", "retry-after", "x-should-retry", "content-encoding", "x-request-id"}
)


@dataclass(slots=True)
class Meter:
    """What the relay learns about one call, turned into a `CallRecord` at the end."""

    exchange: Exchange
    inbound_api: str
    requested_model: str = ""
    streamed: bool = False
    target: Target | None = None
    usage: Usage = field(default_factory=Usage)
    usage_reported: bool = False
    stop_reason: str | None = None
    first_token_at: float | None = None
    error: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    attempt: int = 0
    trigger: str | None = None
    harness: str = "other"
    role: str = "orchestrator"
    preset: str = "default"
    recorded: bool = False


@dataclass(slots=True)
class _Call:
    """The meter of the attempt in progress, where the safety net in `Relay.handle` can find it."""

    meter: Meter


@dataclass(frozen=True, slots=True)
class Rejection:
    """A client body refused before routing: the status, message and field to answer with."""

    status: int
    message: str
    param: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """An attempt that failed before any byte reached the client, so the next target may serve."""

    status: int
    message: str
    outcome: Outcome
    trigger: str
    retry_after: str | None = None


def _trigger(error: UpstreamError) -> str:
    return "timeout" if error.kind == "timeout" else "connect"


def _status_trigger(status: int) -> str | None:
    if status >= 500:
        return "5xx"
    if status == 429:
        return "429"
    return None


# What can end an upstream answer early: the transport, or a protocol reading what came back.
_UPSTREAM_FAILURES = (UpstreamError, UpstreamFormatError, UpstreamReportedError)


def _failure_status(error: UpstreamError | ProtocolError) -> tuple[int, Outcome]:
    if isinstance(error, UpstreamReportedError):
        return 529, "upstream_error"
    if isinstance(error, ProtocolError):
        return 502, "incomplete_stream"
    if error.kind == "timeout":
        return 504, "transport_error"
    if error.kind in ("connect", "broken"):
        return 502, "transport_error"
    if error.kind == "in_band":
        return 529, "upstream_error"
    return 502, "incomplete_stream" if error.kind == "protocol" else "upstream_error"


def _scrub(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key and key in text else text


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
    return replace(request, reasoning=reasoning, max_output_tokens=limit)


def _parts_of_output(output: list[dict[str, Any]]) -> tuple[Any, ...]:
    return responses_response_to_ir({"output": output}, ToolIndex()).parts


def _classify(headers: dict[str, str], body: Any) -> CallInfo:
    try:
        return classify(headers, body)
    except Exception:
        # Attribution is best effort: a classifier bug must not cost the caller its answer.
        log.exception("could not classify a call; serving it as an orchestrator call")
        return CallInfo("other", "orchestrator", None, None, None)


def _upstream_object(raw: bytes) -> dict[str, Any]:
    """A complete upstream body, which must be a JSON object."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamFormatError("upstream returned malformed JSON") from exc
    if type(parsed) is not dict:
        raise UpstreamFormatError("upstream returned a non-object body")
    return parsed


def _unreadable(upstream: UpstreamApi) -> str:
    """Log an unforeseen decoding failure (the current exception) and say what the client is told."""
    # Decoders check what they read; reaching here means an upstream shape no check foresaw. The
    # call still ends like any protocol breakage, and the traceback is kept for a fix.
    log.warning("could not read an %s upstream response", upstream.name, exc_info=True)
    return f"upstream sent an {upstream.name} response switch could not read"


def _parse_json(raw: bytes) -> Any:
    if not raw:
        raise ClientRequestError("request body is empty; expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientRequestError(f"request body is not valid JSON: {exc.msg}") from exc


class Relay:
    """Serves each inbound API by forwarding or translating to the routed upstream."""

    def __init__(
        self,
        settings: Settings,
        pool: UpstreamPool,
        sink: RecordSink | None = None,
        presets: PresetManager | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.sink = sink
        self.presets = presets or PresetManager(set(settings.providers), settings.defaults.model)
        self.reasoning = ReasoningCache()
        self.keys = KeyCache({name: provider.api_key_env for name, provider in settings.providers.items()})
        self.responses = ResponseStore()
        self.affinity = SessionAffinity()
        self._targets: dict[tuple[str, str], Target] = {}

    def _resolve(self, reference: str, inbound: InboundApi) -> Target:
        cached = self._targets.get((reference, inbound.name))
        if cached is None:
            cached = resolve_target(self.settings, reference, inbound.name)  # type: ignore[arg-type]
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
        call = _Call(Meter(exchange, inbound.name))
        try:
            await self._handle(exchange, inbound, call)
        except Exception:
            log.exception("switch failed while serving %s %s", inbound.name, exchange.path)
            message = "switch hit an internal error serving this call; see the switch log"
            if exchange.status == 0:
                await self._error(exchange, inbound, 500, message, new_id("req_"))
            elif not exchange.finished:
                await exchange.end_stream()
            if not call.meter.recorded:
                self._finish(call.meter, "proxy_error", message)

    async def _handle(self, exchange: Exchange, inbound: InboundApi, call: _Call) -> None:
        meter = call.meter
        request_id = new_id("req_")
        parsed = await self._read_request(exchange, inbound, meter)
        if isinstance(parsed, Rejection):
            await self._error(exchange, inbound, parsed.status, parsed.message, request_id, param=parsed.param)
            self._finish(meter, "rejected", parsed.message)
            return
        request, info = parsed
        preset = self.presets.active
        if info.session_id and self.settings.routing.affinity == "session":
            # A session keeps the routes it started with: its upstream prefix cache stays warm.
            preset = self.affinity.pin(info.session_id, info.agent_id, preset)
        if request.cache_key is None and info.session_id:
            request = replace(request, cache_key=info.session_id)
        meter.requested_model = request.model
        meter.streamed = request.stream
        meter.preset = preset.name
        chain = preset.chain(info.harness, info.role, info.family)
        trigger: str | None = None
        for attempt, reference in enumerate(chain):
            try:
                target = self._resolve(reference, inbound)
            except RoutingError as exc:
                await self._error(exchange, inbound, 500, exc.message, request_id)
                self._finish(meter, "proxy_error", exc.message)
                return
            attempt_meter = replace(meter, target=target, attempt=attempt, trigger=trigger, usage=Usage())
            call.meter = attempt_meter
            exchange.route = f"{preset.name}; role={info.role}; model={reference}".encode()
            log.debug(
                "route %s %s role=%s preset=%s attempt=%d -> %s",
                info.harness,
                inbound.name,
                info.role,
                preset.name,
                attempt,
                reference,
            )
            can_fall_back = attempt + 1 < len(chain)
            options = preset.options(reference)
            if target.native and target.api == inbound.name:
                attempt_call = self._passthrough(exchange, inbound, target, attempt_meter, request_id, can_fall_back)
                failure = await self._watched(exchange, inbound, attempt_meter, request_id, attempt_call)
            else:
                upstream = UPSTREAMS.get(target.api)
                if upstream is None:
                    message = f"upstream API '{target.api}' cannot serve {inbound.name} requests"
                    await self._error(exchange, inbound, 501, message, request_id)
                    self._finish(attempt_meter, "proxy_error", message)
                    return
                routed = _with_options(request, options)
                attempt_call = self._translate(
                    exchange, inbound, upstream, routed, target, attempt_meter, request_id, can_fall_back
                )
                failure = await self._watched(exchange, inbound, attempt_meter, request_id, attempt_call)
            if failure is None:
                return
            trigger = failure.trigger

    async def _read_request(
        self, exchange: Exchange, inbound: InboundApi, meter: Meter
    ) -> tuple[Request, CallInfo] | Rejection:
        """Read, classify and parse the client's body; what it tells goes on `meter` even if it is rejected."""
        body: Any = None
        rejection: Rejection | None = None
        try:
            body = _parse_json(await exchange.read_body(self.settings.server.max_body_bytes))
        except ClientRequestError as exc:
            rejection = Rejection(exc.status, exc.message, exc.param)
        info = _classify(exchange.headers, body)
        meter.harness = info.harness
        meter.role = info.role
        meter.session_id = info.session_id
        meter.agent_id = info.agent_id
        meter.preset = self.presets.active.name
        if isinstance(body, dict):
            model = body.get("model")
            meter.requested_model = model if isinstance(model, str) else ""
            meter.streamed = body.get("stream") is True
        if rejection is not None:
            return rejection
        try:
            request = inbound.request_to_ir(body)
            previous = request.provider_data.get("previous_response_id")
            if previous:
                request = self._with_previous(request, str(previous))
        except RequestFormatError as exc:
            return Rejection(400, exc.message, exc.param)
        except ClientRequestError as exc:
            return Rejection(exc.status, exc.message, exc.param)
        except Exception as exc:
            # The parsers validate what they read; this is the net under a case they missed, so an
            # odd body still gets a 400 (which SDKs do not retry) rather than a 500.
            log.exception("switch failed parsing a %s request body", inbound.name)
            return Rejection(
                400,
                f"switch could not parse this {inbound.name} request body ({type(exc).__name__} in the request "
                "parser); check the body's field types, and see the switch log",
            )
        return request, info

    async def _watched(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        meter: Meter,
        request_id: str,
        call: Coroutine[Any, Any, Failure | None],
    ) -> Failure | None:
        """Run one attempt; a client that hangs up while it waits cancels it, upstream call included."""
        task = asyncio.current_task()
        assert task is not None
        stop_watch = exchange.watch_client(task)
        try:
            return await call
        except asyncio.CancelledError:
            task.uncancel()
            if exchange.disconnected:
                self._finish(meter, "client_cancelled", CLIENT_LEFT)
                return None
            # Nothing else cancels a call whose client is still connected: the server is stopping
            # and its grace period ran out. Answer in the caller's format, and keep the record.
            if exchange.status == 0:
                await self._error(exchange, inbound, 503, SHUTTING_DOWN, request_id)
            elif not exchange.finished:
                await exchange.end_stream()
            self._finish(meter, "proxy_error", SHUTTING_DOWN, status=503)
            return None
        finally:
            stop_watch()

    def _with_previous(self, request: Request, previous_id: str) -> Request:
        history = self.responses.get(previous_id)
        if history is None:
            raise ClientRequestError(
                f"Previous response with id '{previous_id}' not found. switch keeps the last "
                f"{self.responses.capacity} stored responses in memory; send the full input instead.",
                param="previous_response_id",
            )
        return replace(request, messages=history + request.messages)

    def _store_response(self, request: Request, response_id: str, parts: tuple[Any, ...]) -> None:
        if request.provider_data.get("store") is False:
            return
        self.responses.put(response_id, (*request.messages, Message("assistant", parts)))

    async def _error(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        status: int,
        message: str,
        request_id: str,
        retry_after: str | None = None,
        param: str | None = None,
    ) -> None:
        headers = inbound.error_headers(status, request_id)
        if retry_after:
            headers.append((b"retry-after", retry_after.encode("latin-1")))
        await exchange.respond(status, inbound.error_body(status, message, request_id, param), headers)

    # ---- translated calls ----------------------------------------------------------------------

    async def _translate(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        upstream: UpstreamApi,
        request: Request,
        target: Target,
        meter: Meter,
        request_id: str,
        can_fall_back: bool = False,
    ) -> Failure | None:
        key = self.keys.get(target.provider)
        if not key:
            status, message = self.keys.unavailable(target.provider, target.api_key_env)
            return await self._fail(
                exchange, inbound, meter, request_id, Failure(status, message, "rejected", "no_key"), can_fall_back
            )
        try:
            body = upstream.request_body(request, target, self.reasoning.get)
        except RequestFormatError as exc:
            await self._error(exchange, inbound, 400, exc.message, request_id, param=exc.param)
            self._finish(meter, "rejected", exc.message)
            return None
        except Exception as exc:
            log.exception("switch failed translating a %s request for %s", inbound.name, upstream.name)
            message = (
                f"switch could not translate this request for the {upstream.name} upstream "
                f"({type(exc).__name__} in the request translator); see the switch log"
            )
            await self._error(exchange, inbound, 400, message, request_id)
            self._finish(meter, "rejected", message)
            return None
        url = target.base_url + upstream.path
        try:
            response = await self.pool.request(
                "POST",
                url,
                upstream.auth_headers(key, request.stream),
                body,
                header_timeout=self._first_byte(can_fall_back),
            )
        except UpstreamError as exc:
            status, outcome = _failure_status(exc)
            failure = Failure(status, f"upstream {target.provider}: {exc.message}", outcome, _trigger(exc))
            return await self._fail(exchange, inbound, meter, request_id, failure, can_fall_back)
        try:
            if response.status_code >= 400:
                failure = await self._status_failure(upstream.error_message, response, target, key)
                return await self._fail(exchange, inbound, meter, request_id, failure, can_fall_back)
            if can_fall_back and not await response.wait_body(self.settings.routing.ttft_timeout):
                failure = Failure(
                    504,
                    f"upstream {target.provider} sent nothing within the time-to-first-token limit",
                    "transport_error",
                    "timeout",
                )
                return await self._fail(exchange, inbound, meter, request_id, failure, can_fall_back)
            index = ToolIndex.of(request.tools)
            is_sse = "text/event-stream" in response.headers.get("content-type", "")
            if request.stream:
                await self._stream(exchange, inbound, upstream, request, response, is_sse, index, meter, request_id)
            else:
                await self._complete(
                    exchange, inbound, upstream, request, response, is_sse, index, meter, request_id, key
                )
        finally:
            response.close()
        return None

    def _first_byte(self, can_fall_back: bool) -> float | None:
        return self.settings.routing.ttft_timeout if can_fall_back else None

    async def _fail(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        meter: Meter,
        request_id: str,
        failure: Failure,
        can_fall_back: bool,
    ) -> Failure | None:
        """Record a failed attempt; answer the client unless the next target may serve instead."""
        if can_fall_back and failure.trigger in self.settings.routing.fallback_on:
            log.info("falling back after %s: %s", failure.trigger, failure.message)
            self._finish(meter, failure.outcome, failure.message, status=failure.status)
            return failure
        await self._error(exchange, inbound, failure.status, failure.message, request_id, failure.retry_after)
        self._finish(meter, failure.outcome, failure.message)
        return None

    async def _status_failure(
        self, error_message: Callable[[bytes], str], response: UpstreamResponse, target: Target, key: str | None
    ) -> Failure:
        status = response.status_code
        try:
            raw = await response.read(1 << 20)
        except UpstreamError:
            raw = b""
        message = _scrub(error_message(raw), key)
        text = f"upstream {target.provider} returned {status}: {message}"
        trigger = _status_trigger(status) or "status"
        return Failure(status, text, "upstream_error", trigger, response.headers.get("retry-after"))

    async def _complete(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        upstream: UpstreamApi,
        request: Request,
        response: UpstreamResponse,
        is_sse: bool,
        index: ToolIndex,
        meter: Meter,
        request_id: str,
        key: str,
    ) -> None:
        try:
            raw = await response.read()
            meter.first_token_at = time.perf_counter()
            if is_sse:
                result = self._collect(upstream, raw, index)
            else:
                result = upstream.response_to_ir(_upstream_object(raw), index)
            if upstream.function_only:
                result = unwrap_response(result, index)
        # No exception outlives its handler: one kept in a local would tie this frame into a cycle.
        except _UPSTREAM_FAILURES as exc:
            failure: tuple[int, Outcome, str] | None = (*_failure_status(exc), _scrub(exc.message, key))
            if isinstance(exc, UpstreamFormatError) and exc.usage is not None:
                meter.usage = exc.usage
                meter.usage_reported = True
        except Exception:
            failure = (502, "incomplete_stream", _unreadable(upstream))
        else:
            failure = None
        if failure is not None:
            status, outcome, message = failure
            if not meter.usage_reported:
                # The upstream answered 200, so the prompt was paid for: estimate it like a broken stream.
                meter.usage = Usage(input_tokens=max(1, len(exchange.body) // 4))
            await self._error(exchange, inbound, status, message, request_id)
            self._finish(meter, outcome, message)
            return
        self._remember_reasoning(result)
        meter.usage = result.usage
        meter.usage_reported = True
        meter.stop_reason = result.stop_reason
        headers = [(b"content-type", b"application/json"), (b"request-id", request_id.encode())]
        response_id = new_id(inbound.id_prefix)
        await exchange.respond(200, inbound.response_body(result, request, response_id), headers)
        if inbound is RESPONSES_INBOUND:
            self._store_response(request, response_id, result.parts)
        self._finish(meter, "completed")

    @staticmethod
    def _collect(upstream: UpstreamApi, raw: bytes, index: ToolIndex) -> Response:
        collector = ResponseCollector()
        decoder = upstream.new_decoder(collector, index)
        sse = SseDecoder()
        try:
            for event in [*sse.feed(raw), *sse.flush()]:
                decoder.feed(event.data)
        except UpstreamFormatError as exc:
            if collector.usage_seen:
                exc.usage = collector.final_usage
            raise
        if not (decoder.done or decoder.finished):
            usage = collector.final_usage if collector.usage_seen else None
            raise UpstreamFormatError("upstream stream ended before the response was complete", usage=usage)
        return collector.response(decoder.upstream_id or "", decoder.upstream_model or "")

    async def _stream(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        upstream: UpstreamApi,
        request: Request,
        response: UpstreamResponse,
        is_sse: bool,
        index: ToolIndex,
        meter: Meter,
        request_id: str,
    ) -> None:
        response_id = new_id(inbound.id_prefix)
        encoder = inbound.new_encoder(request, max(1, len(exchange.body) // 4), response_id)
        sink: StreamSink = encoder
        if upstream.function_only and index.custom:
            sink = CustomCallUnwrapper(encoder, index)
        decoder = upstream.new_decoder(sink, index)
        await exchange.start_stream([*inbound.stream_headers, (b"request-id", request_id.encode())])
        outcome: Outcome = "completed"
        task = asyncio.current_task()
        assert task is not None

        def ping() -> bytes:
            encoder.start()
            return encoder.take() + encoder.ping()

        stop_guard = exchange.guard_stream(task, self.settings.server.ping_interval, ping)
        try:
            if is_sse:
                sse = SseDecoder()
                feed_sse = sse.feed
                feed = decoder.feed
                send_chunk = exchange.send_chunk
                async for raw in response.chunks():
                    for event in feed_sse(raw):
                        feed(event.data)
                        if meter.first_token_at is None and encoder.content_started:
                            # Send the first token the moment it exists, not after the whole read.
                            meter.first_token_at = time.perf_counter()
                            await send_chunk(encoder.take())
                    encoder.start()
                    out = encoder.take()
                    if out:
                        await send_chunk(out)
                for event in sse.flush():
                    feed(event.data)
            else:
                whole = upstream.response_to_ir(_upstream_object(await response.read()), index)
                replay(unwrap_response(whole, index) if upstream.function_only else whole, encoder)
                decoder.finished = True
            if decoder.done or decoder.finished:
                encoder.end()
            else:
                outcome = "incomplete_stream"
                meter.error = "upstream stream ended before the response was complete"
                encoder.fail(502, meter.error)
        except asyncio.CancelledError:
            task.uncancel()
            if exchange.disconnected:
                outcome = "client_cancelled"
            else:  # the server is stopping (see `_watched`): end the stream in-band
                outcome = "incomplete_stream"
                meter.error = SHUTTING_DOWN
                encoder.fail(503, SHUTTING_DOWN)
        except _UPSTREAM_FAILURES as exc:
            status, outcome = _failure_status(exc)
            meter.error = exc.message
            encoder.fail(status, meter.error)
        except Exception:
            outcome = "incomplete_stream"
            meter.error = _unreadable(upstream)
            encoder.fail(502, meter.error)
        finally:
            stop_guard()
        if meter.first_token_at is None and encoder.content_started:
            meter.first_token_at = time.perf_counter()
        if outcome != "client_cancelled":
            try:
                await exchange.end_stream(encoder.take())
            except OSError:
                outcome = "client_cancelled"
        if encoder.tool_call_ids and encoder.reasoning_chunks:
            reasoning = "".join(encoder.reasoning_chunks)
            for call_id in encoder.tool_call_ids:
                self.reasoning.put(call_id, reasoning)
        meter.usage = encoder.final_usage
        meter.usage_reported = encoder.usage_seen
        if not encoder.usage_seen:
            # The upstream never said (a cancelled or broken stream): estimate what was used.
            meter.usage = Usage(input_tokens=max(1, len(exchange.body) // 4), output_tokens=encoder.emitted_chars // 4)
        meter.stop_reason = encoder.stop_reason
        if inbound is RESPONSES_INBOUND and outcome == "completed":
            self._store_response(request, response_id, _parts_of_output(getattr(encoder, "output", [])))
        self._finish(meter, outcome)

    def _remember_reasoning(self, response: Response) -> None:
        reasoning = "".join(p.text for p in response.parts if isinstance(p, ReasoningPart))
        if not reasoning:
            return
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                self.reasoning.put(part.call_id, reasoning)

    # ---- native pass-through -------------------------------------------------------------------

    async def _passthrough(
        self,
        exchange: Exchange,
        inbound: InboundApi,
        target: Target,
        meter: Meter,
        request_id: str,
        can_fall_back: bool = False,
    ) -> Failure | None:
        headers = [
            (name, value)
            for name, value in exchange.headers.items()
            if name not in _HOP_BY_HOP and not name.startswith("x-switch-")
        ]
        headers.append(("accept-encoding", "identity"))
        path = exchange.path
        if target.base_url.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        query = exchange.scope.get("query_string", b"").decode("latin-1")
        url = target.base_url + path + ("?" + query if query else "")
        body = exchange.body
        strip_usage = False
        if inbound is CHAT_INBOUND and meter.streamed:
            # Ask for the usage chunk so the call can be metered; hide it from a client that
            # did not ask for it.
            parsed = orjson.loads(body)
            options = parsed.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage")):
                parsed["stream_options"] = {
                    **(options if isinstance(options, dict) else {}),
                    "include_usage": True,
                }
                try:
                    body = orjson.dumps(parsed)
                    strip_usage = True
                except orjson.JSONEncodeError:
                    # Nested deeper than the encoder goes: send the body as it came, unmetered.
                    log.debug("chat body too deep to re-encode; passed through without the usage request")
        try:
            response = await self.pool.request(
                "POST", url, headers, body, header_timeout=self._first_byte(can_fall_back)
            )
        except UpstreamError as exc:
            status, outcome_of_error = _failure_status(exc)
            failure = Failure(status, f"upstream {target.provider}: {exc.message}", outcome_of_error, _trigger(exc))
            return await self._fail(exchange, inbound, meter, request_id, failure, can_fall_back)
        if can_fall_back:
            trigger = _status_trigger(response.status_code)
            if trigger in self.settings.routing.fallback_on:
                failure = await self._status_failure(openai_errors.message_of, response, target, None)
                response.close()
                return await self._fail(exchange, inbound, meter, request_id, failure, can_fall_back)
            if not await response.wait_body(self.settings.routing.ttft_timeout):
                response.close()
                failure = Failure(
                    504,
                    f"upstream {target.provider} sent nothing within the time-to-first-token limit",
                    "transport_error",
                    "timeout",
                )
                return await self._fail(exchange, inbound, meter, request_id, failure, can_fall_back)
        response.decode_content(False)
        response_headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in response.headers.items()
            if name in _FORWARDED_RESPONSE_HEADERS or name.startswith(("anthropic-", "openai-", "x-ratelimit-"))
        ]
        sniffer = None
        if "content-encoding" not in response.headers:
            is_sse = "text/event-stream" in response.headers.get("content-type", "")
            sniffer = UsageSniffer(inbound, is_sse, strip_usage and is_sse)
        outcome: Outcome = "completed" if response.status_code < 400 else "upstream_error"
        task = asyncio.current_task()
        assert task is not None
        stop_guard: Callable[[], None] = lambda: None  # noqa: E731
        try:
            await exchange.start_stream(response_headers, response.status_code)
            # The native upstream sends its own pings; only a departed client needs watching.
            stop_guard = exchange.guard_stream(task, self.settings.server.ping_interval)
            async for chunk in response.chunks():
                if meter.first_token_at is None:
                    meter.first_token_at = time.perf_counter()
                if sniffer is not None:
                    chunk = sniffer.feed(chunk)
                await exchange.send_chunk(chunk)
            await exchange.end_stream(sniffer.flush() if sniffer is not None else b"")
        except asyncio.CancelledError:
            task.uncancel()
            if exchange.disconnected:
                outcome = "client_cancelled"
            else:  # the server is stopping (see `_watched`): end the stream in-band
                outcome = "incomplete_stream"
                meter.error = SHUTTING_DOWN
                in_band = _in_band_error(inbound, SHUTTING_DOWN) if sniffer is not None and sniffer.is_sse else b""
                await exchange.end_stream(in_band)
        except UpstreamError as exc:
            _status, outcome = _failure_status(exc)
            meter.error = exc.message
            in_band = b""
            if sniffer is not None and sniffer.is_sse and inbound is ANTHROPIC_INBOUND:
                in_band = anthropic_errors.error_event(502, exc.message)
            await exchange.end_stream(in_band)
        finally:
            stop_guard()
            response.close()
        if sniffer is not None:
            sniffer.close()
            meter.usage = sniffer.usage
            meter.usage_reported = sniffer.usage_seen
            meter.stop_reason = sniffer.stop_reason
            if outcome == "completed" and sniffer.is_sse and sniffer.seen_events and not sniffer.ended:
                outcome = "incomplete_stream"
        self._finish(meter, outcome)
        return None

    # ---- records -------------------------------------------------------------------------------

    def _finish(self, meter: Meter, outcome: Outcome, error: str | None = None, status: int | None = None) -> None:
        meter.recorded = True
        if self.sink is None:
            return
        exchange = meter.exchange
        now = time.perf_counter()
        target = meter.target
        usage = meter.usage
        ttft = (meter.first_token_at - exchange.started) * 1000 if meter.first_token_at else None
        error_text = error or meter.error
        record = CallRecord(
            started_at=time.time() - (now - exchange.started),
            harness=meter.harness,
            role=meter.role,
            preset=meter.preset,
            requested_model=meter.requested_model,
            provider=target.provider if target else "",
            served_model=(target.model or meter.requested_model) if target else "",
            inbound_api=meter.inbound_api,
            upstream_api=target.api if target else "",
            streamed=meter.streamed,
            outcome=outcome,
            http_status=status if status is not None else exchange.status,
            session_id=meter.session_id,
            agent_id=meter.agent_id,
            fallback_attempt=meter.attempt,
            fallback_trigger=meter.trigger,
            stop_reason=meter.stop_reason,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            usage_reported=meter.usage_reported,
            ttft_ms=ttft,
            duration_ms=(now - exchange.started) * 1000,
            request_bytes=len(exchange.body),
            response_bytes=exchange.response_bytes,
            error=error_text[:300] if error_text else None,
        )
        self.sink.submit(record)


class UsageSniffer:
    """Reads usage and the stop reason out of a response passing through untouched.

    Streams are decoded event by event, and only events that can carry usage or the end of the
    message are parsed; a JSON body is kept (up to `limit` bytes) and read once at the end. With
    `strip_usage`, a chat usage-only chunk the client did not ask for is removed from the stream.
    """

    def __init__(self, inbound: InboundApi, is_sse: bool, strip_usage: bool = False, limit: int = 16 << 20) -> None:
        self.inbound = inbound
        self.is_sse = is_sse
        self.strip_usage = strip_usage
        self._sse = SseDecoder()
        self._body: list[bytes] = []
        self._size = 0
        self._limit = limit
        self.usage = Usage()
        self.usage_seen = False
        self.stop_reason: str | None = None
        self.ended = False
        self.seen_events = False

    def feed(self, chunk: bytes) -> bytes:
        """Inspect one chunk; return the bytes to forward."""
        if not self.is_sse:
            self._size += len(chunk)
            if self._size <= self._limit:
                self._body.append(chunk)
            return chunk
        events = self._sse.feed(chunk)
        if events:
            self.seen_events = True
        if not self.strip_usage:
            for event in events:
                self._inspect(event.event, event.data)
            return chunk
        kept: list[bytes] = []
        for event in events:
            if self._inspect(event.event, event.data):
                continue
            kept.append(b"data: " + event.data + b"\n\n")
        return b"".join(kept)

    def flush(self) -> bytes:
        """Bytes still held when the upstream ended (only when stripping)."""
        if not self.is_sse:
            return b""
        leftover = self._sse.flush()
        for event in leftover:
            self._inspect(event.event, event.data)
        if self.strip_usage:
            return b"".join(b"data: " + e.data + b"\n\n" for e in leftover)
        return b""

    def _inspect(self, name: str | None, data: bytes) -> bool:
        """Track one event; True when it is a usage-only chat chunk to strip.

        The bytes reach the client untouched whatever they hold, so odd values here are skipped,
        never raised: only well-typed usage and stop reasons are taken.
        """
        api = self.inbound.name
        if api == "anthropic":
            if name == "message_stop":
                self.ended = True
            elif name in ("message_start", "message_delta"):
                payload = _loads(data)
                if payload is not None:
                    if name == "message_start":
                        message = payload.get("message")
                        usage = message.get("usage") if type(message) is dict else None
                    else:
                        usage = payload.get("usage")
                        delta = payload.get("delta")
                        if type(delta) is dict:
                            self.stop_reason = label(delta.get("stop_reason"))
                    if type(usage) is dict:
                        self._merge_anthropic(usage)
            return False
        if api == "openai-chat":
            if data == b"[DONE]":
                self.ended = True
                return False
            if b'"finish_reason":"' in data or b'"usage":{' in data:
                payload = _loads(data)
                if payload is not None:
                    choices = payload.get("choices")
                    if type(choices) is list:
                        for choice in choices:
                            if type(choice) is dict and choice.get("finish_reason"):
                                self.stop_reason = label(choice["finish_reason"])
                    usage = payload.get("usage")
                    if type(usage) is dict:
                        self.usage = self.inbound.usage_to_ir(usage)
                        self.usage_seen = True
                        return self.strip_usage and not choices
            return False
        if b'"response.completed"' in data or b'"response.incomplete"' in data or b'"response.failed"' in data:
            payload = _loads(data)
            if payload is not None:
                self.ended = True
                response = payload.get("response")
                if type(response) is dict:
                    self.stop_reason = label(response.get("status"))
                    usage = response.get("usage")
                    if type(usage) is dict:
                        self.usage = self.inbound.usage_to_ir(usage)
                        self.usage_seen = True
        return False

    def close(self) -> None:
        """Read a kept JSON body."""
        if self.is_sse or not self._body or self._size > self._limit:
            return
        payload = _loads(b"".join(self._body))
        if payload is None:
            return
        usage = payload.get("usage")
        if type(usage) is dict:
            if self.inbound.name == "anthropic":
                self._merge_anthropic(usage)
            else:
                self.usage = self.inbound.usage_to_ir(usage)
                self.usage_seen = True
        self.stop_reason = label(payload.get("stop_reason")) or label(payload.get("status"))
        if self.stop_reason is None:
            choices = payload.get("choices")
            if type(choices) is list and choices and type(choices[0]) is dict:
                self.stop_reason = label(choices[0].get("finish_reason"))

    def _merge_anthropic(self, usage: dict[str, Any]) -> None:
        self.usage_seen = True
        current = self.usage
        for wire, attribute in (
            ("input_tokens", "input_tokens"),
            ("cache_read_input_tokens", "cache_read_tokens"),
            ("cache_creation_input_tokens", "cache_write_tokens"),
            ("output_tokens", "output_tokens"),
        ):
            value = usage.get(wire)
            # Later events repeat only some counts; a zero input count means "not repeated".
            if type(value) is int and 0 <= value <= MAX_COUNT and (value or wire == "output_tokens"):
                setattr(current, attribute, value)


def _in_band_error(inbound: InboundApi, message: str) -> bytes:
    """A 503 error event in `inbound`'s stream format, for a pass-through stream switch cuts short."""
    if inbound is ANTHROPIC_INBOUND:
        return anthropic_errors.error_event(503, message)
    if inbound is CHAT_INBOUND:
        error = {"message": message, "type": "server_error", "param": None, "code": None}
        return b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    event = {"type": "error", "code": "server_error", "message": message, "param": None}
    return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"


def _loads(data: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
