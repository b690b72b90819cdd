"""A call served by another API than the caller's: translate the request, call, translate the answer back.

The request is translated once; a streamed answer is decoded into IR events and encoded for the
caller as it arrives, one `send` per upstream read. Responses callers that want their answer kept
for `previous_response_id` get it stored in IR, collected from the same events the encoder saw.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import orjson

from switch.config import Settings
from switch.errors import UpstreamError
from switch.ledger.record import Outcome
from switch.protocols.collect import ResponseCollector, replay
from switch.protocols.ir import (
    Message,
    Part,
    ReasoningPart,
    Request,
    Response,
    StopReason,
    StreamSink,
    TextPart,
    ToolCallPart,
    UpstreamFormatError,
    Usage,
)
from switch.protocols.sse import SseDecoder
from switch.protocols.tools import CustomCallUnwrapper, ToolIndex, unwrap_response
from switch.proxy.exchange import Scope, new_id
from switch.proxy.failures import (
    RESPONSE_ERRORS,
    SHUTTING_DOWN,
    Attempt,
    Failure,
    attach_usage,
    body_trigger,
    cancelled_outcome,
    error_status,
    fail,
    reported_usage,
    scrub,
    silent_failure,
    status_failure,
    transport_failure,
    unreadable,
)
from switch.proxy.scrubbing import MASK, scrub_bytes, secret_bytes
from switch.proxy.state import KeyCache, ReasoningCache, ResponseStore
from switch.proxy.transport import Transport, UpstreamAnswer, UpstreamRequest
from switch.proxy.upstream_apis import UpstreamApi
from switch.proxy.upstream_body import upstream_body
from switch.routing.resolve import Target

log = logging.getLogger("switch.relay")


class TranslatedPath:
    """Serves a call through an upstream of another API (or a non-native target of the same one)."""

    def __init__(
        self,
        settings: Settings,
        keys: KeyCache,
        reasoning: ReasoningCache,
        responses: ResponseStore,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.reasoning = reasoning
        self.responses = responses

    async def serve(
        self, attempt: Attempt, upstream: UpstreamApi, request: Request, target: Target, transport: Transport
    ) -> Failure | None:
        """Translate and serve one attempt over `transport`; a `Failure` when the next target should serve instead."""
        key = self.keys.get(target.provider) or ""
        if not key and upstream.needs_key(target):
            status, message = self.keys.unavailable(target.provider, target.api_key_env)
            return await fail(attempt, Failure(status, message, "rejected", "no_key"))
        body = await upstream_body(attempt, request, upstream, target, self.reasoning.get)
        if body is None:
            return None
        ttft_timeout = self.settings.routing.ttft_timeout
        sent = UpstreamRequest(
            target.base_url + upstream.path,
            upstream.auth_headers(key, request.stream),
            body,
            target,
            key,
            ttft_timeout if attempt.can_fall_back else None,
        )
        try:
            response = await transport.send(sent)
        except UpstreamError as exc:
            return await fail(attempt, transport_failure(exc, target.provider))
        try:
            if response.status_code >= 400:
                failure = await status_failure(upstream.error_message, response, target.provider, key)
                return await fail(attempt, failure)
            if attempt.can_fall_back and not await response.wait_body(ttft_timeout):
                return await fail(attempt, silent_failure(target.provider))
            return await self.answer(attempt, upstream, request, response, key)
        finally:
            response.close()

    async def answer(
        self, attempt: Attempt, upstream: UpstreamApi, request: Request, response: UpstreamAnswer, key: str
    ) -> Failure | None:
        """Translate an upstream's successful answer for the caller, streamed or whole, and record it.

        A `Failure` when a whole answer broke before any byte reached the caller and the next target may serve.
        """
        index = ToolIndex.of(request.tools)
        is_sse = "text/event-stream" in response.headers.get("content-type", "")
        if request.stream:
            await self._stream(attempt, upstream, request, response, is_sse, index, key)
            return None
        return await self._complete(attempt, upstream, request, response, is_sse, index, key)

    async def _complete(
        self,
        attempt: Attempt,
        upstream: UpstreamApi,
        request: Request,
        response: UpstreamAnswer,
        is_sse: bool,
        index: ToolIndex,
        key: str,
    ) -> Failure | None:
        exchange, inbound, meter = attempt.exchange, attempt.inbound, attempt.meter
        try:
            raw = await response.read()
            meter.first_token_at = time.perf_counter()
            if is_sse:
                result = _collect(upstream, raw, index)
            else:
                result = upstream.response_to_ir(_upstream_object(raw), index)
            if upstream.function_only:
                result = unwrap_response(result, index)
        # No exception outlives its handler: one kept in a local would tie this frame into a cycle.
        except RESPONSE_ERRORS as exc:
            status, outcome = error_status(exc)
            failure: Failure | None = Failure(status, scrub(exc.message, key), outcome, body_trigger(exc))
            usage = reported_usage(exc)
            if usage is not None:
                meter.usage = usage
                meter.usage_reported = True
        except Exception:
            failure = Failure(502, unreadable(upstream.name), "incomplete_stream", "5xx")
        else:
            failure = None
        if failure is not None:
            if not meter.usage_reported:
                # The upstream answered 200, so the prompt was paid for: estimate it like a broken stream.
                meter.estimate_usage()
            # Nothing reached the caller yet: the next target may serve, as for a failure before the headers.
            return await fail(attempt, failure)
        self._remember_reasoning(result)
        meter.usage = result.usage
        meter.usage_reported = True
        meter.stop_reason = result.stop_reason
        headers = [(b"content-type", b"application/json"), (b"request-id", attempt.request_id.encode())]
        response_id = new_id(inbound.id_prefix)
        await exchange.respond(200, scrub_bytes(inbound.response_body(result, request, response_id), key), headers)
        if inbound.stores_responses:
            self._store_response(request, response_id, result.parts, exchange.scope)
        meter.finish("completed")
        return None

    async def _stream(
        self,
        attempt: Attempt,
        upstream: UpstreamApi,
        request: Request,
        response: UpstreamAnswer,
        is_sse: bool,
        index: ToolIndex,
        key: str,
    ) -> None:
        exchange, inbound, meter = attempt.exchange, attempt.inbound, attempt.meter
        secret = secret_bytes(key)
        response_id = new_id(inbound.id_prefix)
        encoder = inbound.new_encoder(request, max(1, len(exchange.body) // 4), response_id)
        sink: StreamSink = encoder
        history: ResponseCollector | None = None
        if inbound.stores_responses and _kept(request, exchange.scope):
            # Only for callers that want the answer kept: the others pay nothing per event.
            history = ResponseCollector()
            sink = _Both(encoder, history)
        if upstream.function_only and index.custom:
            sink = CustomCallUnwrapper(sink, index)
        decoder = upstream.new_decoder(sink, index)
        await exchange.start_stream([*inbound.stream_headers, (b"request-id", attempt.request_id.encode())])
        outcome: Outcome = "completed"
        task = exchange.task()

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
                    if meter.first_token_at is not None:
                        meter.last_token_at = time.perf_counter()
                    for event in feed_sse(raw):
                        feed(event.data)
                        if meter.first_token_at is None and encoder.content_started:
                            # Send the first token the moment it exists, not after the whole read.
                            meter.first_token_at = time.perf_counter()
                            await send_chunk(encoder.take())
                    encoder.start()
                    out = encoder.take()
                    if out:
                        if secret is not None and secret in out:
                            out = out.replace(secret, MASK)
                        await send_chunk(out)
                for event in sse.flush():
                    feed(event.data)
            else:
                whole = upstream.response_to_ir(_upstream_object(await response.read()), index)
                if upstream.function_only:
                    whole = unwrap_response(whole, index)
                replay(whole, encoder)
                if history is not None:
                    replay(whole, history)
                decoder.finished = True
            if decoder.done or decoder.finished:
                encoder.end()
            else:
                outcome = "incomplete_stream"
                meter.error = "upstream stream ended before the response was complete"
                encoder.fail(502, meter.error)
        except asyncio.CancelledError:
            outcome = cancelled_outcome(task, exchange, meter)
            if outcome == "incomplete_stream":
                encoder.fail(503, SHUTTING_DOWN)
        except RESPONSE_ERRORS as exc:
            status, outcome = error_status(exc)
            # An upstream's own words (an in-band error event) may quote the key it was called with.
            meter.error = scrub(exc.message, key)
            encoder.fail(status, meter.error)
        except Exception:
            outcome = "incomplete_stream"
            meter.error = unreadable(upstream.name)
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
            meter.estimate_usage(encoder.emitted_chars)
        meter.stop_reason = encoder.stop_reason
        if history is not None and outcome == "completed":
            self._store_response(
                request, response_id, _as_called(history.response("", "").parts, index), exchange.scope
            )
        meter.finish(outcome)

    def _remember_reasoning(self, response: Response) -> None:
        reasoning = "".join(p.text for p in response.parts if isinstance(p, ReasoningPart))
        if not reasoning:
            return
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                self.reasoning.put(part.call_id, reasoning)

    def _store_response(self, request: Request, response_id: str, parts: Sequence[Part], scope: Scope) -> None:
        if not _kept(request, scope):
            return
        self.responses.put(response_id, (*request.messages, Message("assistant", tuple(parts))))


def _kept(request: Request, scope: Scope) -> bool:
    """Whether a Responses answer is kept for `previous_response_id`. Over a WebSocket even a `store: false`
    one is, as OpenAI keeps it for the connection: Codex sends each later turn as new items after it."""
    return request.provider_data.get("store") is not False or scope.get("switch.transport") == "websocket"


class _Both:
    """A `StreamSink` that hands every event to the client's encoder, then to a second sink."""

    __slots__ = ("first", "second")

    def __init__(self, first: StreamSink, second: StreamSink) -> None:
        self.first = first
        self.second = second

    def reasoning_delta(self, text: str) -> None:
        self.first.reasoning_delta(text)
        self.second.reasoning_delta(text)

    def text_delta(self, text: str) -> None:
        self.first.text_delta(text)
        self.second.text_delta(text)

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        self.first.tool_call_start(index, call_id, name)
        self.second.tool_call_start(index, call_id, name)

    def tool_call_delta(self, index: int, fragment: str) -> None:
        self.first.tool_call_delta(index, fragment)
        self.second.tool_call_delta(index, fragment)

    def usage(self, usage: Usage) -> None:
        self.first.usage(usage)
        self.second.usage(usage)

    def finish(self, stop_reason: StopReason, stop_sequence: str | None = None) -> None:
        self.first.finish(stop_reason, stop_sequence)
        self.second.finish(stop_reason, stop_sequence)


def _as_called(parts: tuple[Part, ...], index: ToolIndex) -> tuple[Part, ...]:
    """Collected parts as the caller saw them: custom and namespaced calls marked, empty text left out."""
    kept: list[Part] = []
    for part in parts:
        if isinstance(part, (TextPart, ReasoningPart)) and not part.text:
            continue
        if isinstance(part, ToolCallPart) and (part.name in index.custom or part.name in index.namespaces):
            kind = "custom" if part.name in index.custom else part.kind
            part = ToolCallPart(part.call_id, part.name, part.arguments, kind, index.split(part.name)[0])
        kept.append(part)
    return tuple(kept)


def _collect(upstream: UpstreamApi, raw: bytes, index: ToolIndex) -> Response:
    """A whole streamed body read as one response (for a caller that did not stream)."""
    collector = ResponseCollector()
    decoder = upstream.new_decoder(collector, index)
    sse = SseDecoder()
    try:
        for event in [*sse.feed(raw), *sse.flush()]:
            decoder.feed(event.data)
    except RESPONSE_ERRORS as exc:
        if collector.usage_seen:
            attach_usage(exc, collector.final_usage)
        raise
    if not (decoder.done or decoder.finished):
        usage = collector.final_usage if collector.usage_seen else None
        raise UpstreamFormatError("upstream stream ended before the response was complete", usage=usage)
    return collector.response(decoder.upstream_id or "", decoder.upstream_model or "")


def _upstream_object(raw: bytes) -> dict[str, Any]:
    """A complete upstream body, which must be a JSON object."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamFormatError("upstream returned malformed JSON") from exc
    if type(parsed) is not dict:
        raise UpstreamFormatError("upstream returned a non-object body")
    return parsed
