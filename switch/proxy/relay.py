"""The only module that talks to upstreams: forward, translate, stream back, meter.

Per call: the client body is read and parsed once, translated once, and the upstream response is
relayed as it arrives. Timings and usage are gathered on the way and handed to the record sink
without waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from switch.config import Settings
from switch.errors import ClientRequestError, KeyMissingError, RoutingError, UpstreamError
from switch.ledger.record import CallRecord, Outcome, RecordSink
from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages.request import request_to_ir as anthropic_request_to_ir
from switch.protocols.anthropic_messages.response import response_from_ir as anthropic_response
from switch.protocols.anthropic_messages.stream import BlockState, StreamEncoder, StreamFormatError
from switch.protocols.ir import ReasoningPart, Request, Response, TextPart, ToolCallPart, Usage
from switch.protocols.openai_chat import errors as chat_errors
from switch.protocols.openai_chat.request import request_from_ir as chat_request_from_ir
from switch.protocols.openai_chat.request import tool_name_map
from switch.protocols.openai_chat.response import response_to_ir as chat_response_to_ir
from switch.protocols.openai_chat.stream import StreamDecoder as ChatStreamDecoder
from switch.protocols.sse import SseDecoder
from switch.proxy.exchange import JSON_HEADERS, SSE_HEADERS, Exchange
from switch.proxy.state import KeyCache, ReasoningCache
from switch.proxy.upstream import UpstreamPool
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
_FORWARDED_RESPONSE_HEADERS = frozenset(
    {"content-type", "request-id", "retry-after", "x-should-retry", "content-encoding"}
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
    harness: str = "other"
    role: str = "orchestrator"
    preset: str = "default"


class Relay:
    """Serves each inbound API by forwarding or translating to the routed upstream."""

    def __init__(self, settings: Settings, pool: UpstreamPool, sink: RecordSink | None = None) -> None:
        self.settings = settings
        self.pool = pool
        self.sink = sink
        self.reasoning = ReasoningCache()
        self.keys = KeyCache()

    # ---- /v1/messages --------------------------------------------------------------------------

    async def messages(self, exchange: Exchange) -> None:
        """Serve Anthropic Messages."""
        meter = Meter(exchange, "anthropic")
        request_id = "req_" + secrets.token_hex(12)
        try:
            raw = await exchange.read_body(self.settings.server.max_body_bytes)
            body = _parse_json(raw)
            request = anthropic_request_to_ir(body)
        except ClientRequestError as exc:
            await self._anthropic_error(exchange, exc.status, exc.message, request_id)
            self._finish(meter, "rejected", exc.message)
            return
        meter.requested_model = request.model
        meter.streamed = request.stream
        meter.session_id = exchange.headers.get("x-claude-code-session-id")
        try:
            target = resolve_target(self.settings, self.settings.defaults.model)
        except RoutingError as exc:
            await self._anthropic_error(exchange, 500, exc.message, request_id)
            self._finish(meter, "proxy_error", exc.message)
            return
        meter.target = target
        if target.native:
            await self._anthropic_passthrough(exchange, target, meter, request_id)
        elif target.chat is not None:
            await self._anthropic_via_chat(exchange, request, target, meter, request_id)
        else:
            message = f"upstream API '{target.api}' is not supported for /v1/messages yet"
            await self._anthropic_error(exchange, 501, message, request_id)
            self._finish(meter, "proxy_error", message)

    async def _anthropic_error(
        self, exchange: Exchange, status: int, message: str, request_id: str, retry_after: str | None = None
    ) -> None:
        headers = [*JSON_HEADERS, (b"request-id", request_id.encode())]
        if retry_after:
            headers.append((b"retry-after", retry_after.encode()))
        if status in (400, 401, 403, 404, 413, 501):
            headers.append((b"x-should-retry", b"false"))
        await exchange.respond(status, anthropic_errors.error_body(status, message, request_id), headers)

    async def _anthropic_via_chat(
        self, exchange: Exchange, request: Request, target: Target, meter: Meter, request_id: str
    ) -> None:
        assert target.chat is not None
        key = self.keys.get(target.provider, target.api_key_env)
        if not key:
            missing = KeyMissingError(target.provider, target.api_key_env)
            await self._anthropic_error(exchange, 401, missing.message, request_id)
            self._finish(meter, "rejected", missing.message)
            return
        try:
            upstream_body = orjson.dumps(chat_request_from_ir(request, target.chat, self.reasoning.get))
        except ClientRequestError as exc:
            await self._anthropic_error(exchange, exc.status, exc.message, request_id)
            self._finish(meter, "rejected", exc.message)
            return
        tool_names = tool_name_map(request.tools)
        client = self.pool.client(target.provider)
        upstream_request = client.build_request(
            "POST",
            target.base_url + "/chat/completions",
            content=upstream_body,
            headers={
                "authorization": "Bearer " + key,
                "content-type": "application/json",
                "accept": "text/event-stream" if request.stream else "application/json",
            },
        )
        try:
            response = await client.send(upstream_request, stream=True)
        except httpx.TransportError as exc:
            status, message, outcome = _transport_failure(exc, target)
            await self._anthropic_error(exchange, status, message, request_id)
            self._finish(meter, outcome, message)
            return
        try:
            if response.status_code >= 400:
                error_raw = await response.aread()
                message = _scrub(chat_errors.message_of(error_raw), key)
                status = response.status_code
                await self._anthropic_error(
                    exchange,
                    status,
                    f"upstream {target.provider} returned {status}: {message}",
                    request_id,
                    response.headers.get("retry-after"),
                )
                self._finish(meter, "upstream_error", f"{status}: {message}"[:300])
                return
            is_sse = "text/event-stream" in response.headers.get("content-type", "")
            if request.stream:
                await self._stream_chat_as_anthropic(
                    exchange, request, response, is_sse, tool_names, meter, request_id
                )
            else:
                await self._complete_chat_as_anthropic(
                    exchange, request, response, is_sse, tool_names, meter, request_id, key
                )
        finally:
            await response.aclose()

    async def _complete_chat_as_anthropic(
        self,
        exchange: Exchange,
        request: Request,
        response: httpx.Response,
        is_sse: bool,
        tool_names: dict[str, str],
        meter: Meter,
        request_id: str,
        key: str,
    ) -> None:
        try:
            raw = await response.aread()
            if is_sse:
                result = _collect_chat_stream(raw, tool_names)
            else:
                parsed = orjson.loads(raw)
                if not isinstance(parsed, dict):
                    raise UpstreamError("upstream returned a non-object body", kind="protocol")
                result = chat_response_to_ir(parsed, tool_names)
        except (httpx.TransportError, orjson.JSONDecodeError, UpstreamError) as exc:
            message = _scrub(_describe_failure(exc), key)
            await self._anthropic_error(exchange, 502, message, request_id)
            self._finish(
                meter,
                "transport_error" if isinstance(exc, httpx.TransportError) else "upstream_error",
                message,
            )
            return
        meter.first_token_at = time.perf_counter()
        body = anthropic_response(result)
        body["model"] = request.model
        self._remember_reasoning(result)
        meter.usage = result.usage
        meter.usage_reported = True
        meter.stop_reason = body["stop_reason"]
        await exchange.respond(200, orjson.dumps(body), [*JSON_HEADERS, (b"request-id", request_id.encode())])
        self._finish(meter, "completed")

    async def _stream_chat_as_anthropic(
        self,
        exchange: Exchange,
        request: Request,
        response: httpx.Response,
        is_sse: bool,
        tool_names: dict[str, str],
        meter: Meter,
        request_id: str,
    ) -> None:
        encoder = StreamEncoder(
            "msg_" + secrets.token_hex(12), request.model, max(1, len(exchange.body) // 4)
        )
        decoder = ChatStreamDecoder(encoder, tool_names)
        sse = SseDecoder()
        await exchange.start_stream([*SSE_HEADERS, (b"request-id", request_id.encode())])
        outcome: Outcome = "completed"
        task = asyncio.current_task()
        assert task is not None
        watcher = asyncio.create_task(exchange.watch_disconnect(task))
        pinger = asyncio.create_task(self._ping(exchange, encoder))
        try:
            if is_sse:
                async for raw in response.aiter_raw():
                    for event in sse.feed(raw):
                        decoder.feed(event.data)
                    if encoder.state is BlockState.IDLE:
                        encoder.start()
                    out = encoder.take()
                    if out:
                        if meter.first_token_at is None and encoder.state is not BlockState.NONE:
                            meter.first_token_at = time.perf_counter()
                        await exchange.send_chunk(out)
                for event in sse.flush():
                    decoder.feed(event.data)
            else:
                raw_body = await response.aread()
                parsed = orjson.loads(raw_body)
                if not isinstance(parsed, dict):
                    raise UpstreamError("upstream returned a non-object body", kind="protocol")
                _replay(chat_response_to_ir(parsed, tool_names), encoder)
                decoder.finished = True
            if decoder.done or decoder.finished:
                encoder.end()
            else:
                outcome = "incomplete_stream"
                meter.error = "upstream stream ended before the response was complete"
                encoder.fail(502, meter.error)
        except asyncio.CancelledError:
            if not exchange.disconnected:
                raise
            task.uncancel()
            outcome = "client_cancelled"
        except (httpx.TransportError, UpstreamError, StreamFormatError, orjson.JSONDecodeError) as exc:
            outcome = "transport_error" if isinstance(exc, httpx.TransportError) else "upstream_error"
            if isinstance(exc, UpstreamError) and exc.kind == "protocol":
                outcome = "incomplete_stream"
            meter.error = _describe_failure(exc)
            status = (
                504
                if isinstance(exc, httpx.TimeoutException)
                else 529
                if isinstance(exc, UpstreamError) and exc.kind == "in_band"
                else 502
            )
            encoder.fail(status, meter.error)
        finally:
            pinger.cancel()
            watcher.cancel()
        if meter.first_token_at is None and encoder.state is not BlockState.IDLE and encoder.tool_call_ids:
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
        meter.stop_reason = encoder.stop_reason
        self._finish(meter, outcome)

    async def _ping(self, exchange: Exchange, encoder: StreamEncoder) -> None:
        interval = self.settings.server.ping_interval
        while True:
            await asyncio.sleep(interval)
            if time.perf_counter() - exchange.last_send >= interval and not exchange.finished:
                encoder.start()
                await exchange.send_chunk(encoder.take() + encoder.ping())

    def _remember_reasoning(self, response: Response) -> None:
        reasoning = "".join(p.text for p in response.parts if isinstance(p, ReasoningPart))
        if not reasoning:
            return
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                self.reasoning.put(part.call_id, reasoning)

    # ---- native pass-through -------------------------------------------------------------------

    async def _anthropic_passthrough(
        self, exchange: Exchange, target: Target, meter: Meter, request_id: str
    ) -> None:
        headers = {
            name: value
            for name, value in exchange.headers.items()
            if name not in _HOP_BY_HOP and not name.startswith("x-switch-")
        }
        headers["accept-encoding"] = "identity"
        query = exchange.scope.get("query_string", b"").decode("latin-1")
        url = target.base_url + exchange.path + ("?" + query if query else "")
        client = self.pool.client(target.provider)
        upstream_request = client.build_request("POST", url, content=exchange.body, headers=headers)
        try:
            response = await client.send(upstream_request, stream=True)
        except httpx.TransportError as exc:
            status, message, failure = _transport_failure(exc, target)
            await self._anthropic_error(exchange, status, message, request_id)
            self._finish(meter, failure, message)
            return
        response_headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in response.headers.items()
            if name in _FORWARDED_RESPONSE_HEADERS or name.startswith("anthropic-")
        ]
        sniffer = AnthropicUsageSniffer() if "content-encoding" not in response.headers else None
        outcome: Outcome = "completed" if response.status_code < 400 else "upstream_error"
        task = asyncio.current_task()
        assert task is not None
        watcher = asyncio.create_task(exchange.watch_disconnect(task))
        try:
            await exchange.start_stream(response_headers, response.status_code)
            async for chunk in response.aiter_raw():
                if meter.first_token_at is None:
                    meter.first_token_at = time.perf_counter()
                if sniffer is not None:
                    sniffer.feed(chunk)
                await exchange.send_chunk(chunk)
            await exchange.end_stream()
        except asyncio.CancelledError:
            if not exchange.disconnected:
                raise
            task.uncancel()
            outcome = "client_cancelled"
        except httpx.TransportError as exc:
            outcome = "transport_error"
            meter.error = _describe_failure(exc)
            if sniffer is not None and sniffer.is_sse:
                await exchange.end_stream(anthropic_errors.error_event(502, meter.error))
            else:
                await exchange.end_stream()
        finally:
            watcher.cancel()
            await response.aclose()
        if sniffer is not None:
            meter.usage = sniffer.usage
            meter.usage_reported = sniffer.usage_seen
            meter.stop_reason = sniffer.stop_reason
            if outcome == "completed" and sniffer.is_sse and not sniffer.stopped:
                outcome = "incomplete_stream"
        self._finish(meter, outcome)

    # ---- records -------------------------------------------------------------------------------

    def _finish(self, meter: Meter, outcome: Outcome, error: str | None = None) -> None:
        if self.sink is None:
            return
        exchange = meter.exchange
        now = time.perf_counter()
        target = meter.target
        usage = meter.usage
        ttft = (meter.first_token_at - exchange.started) * 1000 if meter.first_token_at else None
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
            http_status=exchange.status,
            session_id=meter.session_id,
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
            error=(error or meter.error or None) and str(error or meter.error)[:300],
        )
        self.sink.submit(record)


class AnthropicUsageSniffer:
    """Reads usage and the stop reason out of a passing Anthropic stream without re-encoding it."""

    def __init__(self) -> None:
        self._sse = SseDecoder()
        self.usage = Usage()
        self.usage_seen = False
        self.stop_reason: str | None = None
        self.stopped = False
        self.is_sse = True

    def feed(self, chunk: bytes) -> None:
        """Inspect one chunk of the stream."""
        for event in self._sse.feed(chunk):
            name = event.event
            if name == "message_start" or name == "message_delta":
                try:
                    payload = orjson.loads(event.data)
                except orjson.JSONDecodeError:
                    continue
                usage = (
                    (payload.get("message") or {}).get("usage")
                    if name == "message_start"
                    else payload.get("usage")
                )
                if isinstance(usage, dict):
                    self._merge(usage)
                if name == "message_delta":
                    self.stop_reason = (payload.get("delta") or {}).get("stop_reason")
            elif name == "message_stop":
                self.stopped = True

    def _merge(self, usage: dict[str, Any]) -> None:
        self.usage_seen = True
        current = self.usage
        for wire, attribute in (
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cache_read_input_tokens", "cache_read_tokens"),
            ("cache_creation_input_tokens", "cache_write_tokens"),
        ):
            value = usage.get(wire)
            if isinstance(value, int) and (value or wire == "output_tokens"):
                setattr(current, attribute, value)


def _parse_json(raw: bytes) -> Any:
    if not raw:
        raise ClientRequestError("request body is empty; expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientRequestError(f"request body is not valid JSON: {exc.msg}") from exc


def _scrub(text: str, key: str | None) -> str:
    if key and key in text:
        text = text.replace(key, "***")
    return text


def _transport_failure(exc: httpx.TransportError, target: Target) -> tuple[int, str, Outcome]:
    host = httpx.URL(target.base_url).host
    if isinstance(exc, httpx.TimeoutException):
        return 504, f"upstream {target.provider} ({host}) timed out", "transport_error"
    if isinstance(exc, httpx.ConnectError):
        return 502, f"could not connect to upstream {target.provider} ({host})", "transport_error"
    return (
        502,
        f"connection to upstream {target.provider} ({host}) failed: {type(exc).__name__}",
        "transport_error",
    )


def _describe_failure(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "upstream stopped responding (timeout)"
    if isinstance(exc, httpx.TransportError):
        return f"upstream connection broke mid-response ({type(exc).__name__})"
    if isinstance(exc, orjson.JSONDecodeError):
        return "upstream returned malformed JSON"
    if isinstance(exc, UpstreamError | StreamFormatError):
        return str(exc)
    return type(exc).__name__


class _Collector:
    """A StreamSink that assembles a whole response (for clients that did not ask to stream)."""

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.text: list[str] = []
        self.calls: dict[int, list[str]] = {}
        self.names: dict[int, tuple[str, str]] = {}
        self.final_usage = Usage()
        self.stop_reason: Any = "end_turn"

    def reasoning_delta(self, text: str) -> None:
        self.reasoning.append(text)

    def text_delta(self, text: str) -> None:
        self.text.append(text)

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        self.names[index] = (call_id, name)
        self.calls[index] = []

    def tool_call_delta(self, index: int, fragment: str) -> None:
        self.calls.setdefault(index, []).append(fragment)

    def usage(self, usage: Usage) -> None:
        self.final_usage = usage

    def finish(self, stop_reason: Any, stop_sequence: str | None = None) -> None:
        self.stop_reason = stop_reason


def _collect_chat_stream(raw: bytes, tool_names: dict[str, str]) -> Response:
    collector = _Collector()
    decoder = ChatStreamDecoder(collector, tool_names)
    sse = SseDecoder()
    for event in [*sse.feed(raw), *sse.flush()]:
        decoder.feed(event.data)
    parts: list[Any] = []
    if collector.reasoning:
        parts.append(ReasoningPart("".join(collector.reasoning)))
    if collector.text:
        parts.append(TextPart("".join(collector.text)))
    for index, (call_id, name) in collector.names.items():
        parts.append(ToolCallPart(call_id, name, "".join(collector.calls.get(index, []))))
    return Response(
        decoder.upstream_id or "",
        decoder.upstream_model or "",
        tuple(parts),
        collector.stop_reason,
        collector.final_usage,
    )


def _replay(response: Response, encoder: StreamEncoder) -> None:
    """Drive a stream encoder from a complete response (an upstream that ignored `stream`)."""
    for index, part in enumerate(response.parts):
        if isinstance(part, ReasoningPart):
            encoder.reasoning_delta(part.text)
        elif isinstance(part, TextPart):
            encoder.text_delta(part.text)
        elif isinstance(part, ToolCallPart):
            encoder.tool_call_start(index, part.call_id, part.name)
            encoder.tool_call_delta(index, part.arguments)
    encoder.usage(response.usage)
    encoder.finish(response.stop_reason, response.stop_sequence)
