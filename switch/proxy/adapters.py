"""The per-API pieces the relay combines: one `InboundApi` per API we serve, one `UpstreamApi` per
API we call. The relay itself is written once against these two shapes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages import inbound as anthropic_inbound
from switch.protocols.anthropic_messages import outbound as anthropic_outbound
from switch.protocols.anthropic_messages import stream as anthropic_stream
from switch.protocols.ir import Request, Response, StopReason, StreamSink, Usage
from switch.protocols.openai_chat import errors as openai_errors
from switch.protocols.openai_chat import inbound as chat_inbound
from switch.protocols.openai_chat import outbound as chat_outbound
from switch.protocols.openai_chat import stream as chat_stream
from switch.protocols.openai_responses import compaction as responses_compaction
from switch.protocols.openai_responses import errors as responses_errors
from switch.protocols.openai_responses import inbound as responses_inbound
from switch.protocols.openai_responses import outbound as responses_outbound
from switch.protocols.openai_responses import stream as responses_stream
from switch.protocols.overflow import CONTEXT_LENGTH_CODE, anthropic_overflow_message, openai_overflow_message
from switch.protocols.tools import ToolIndex
from switch.proxy.exchange import new_id
from switch.proxy.sniffers import AnthropicSniffer, ChatSniffer, ResponsesSniffer, UsageSniffer
from switch.routing.resolve import Target
from switch.upstream_api import PATHS, auth_headers

log = logging.getLogger("switch.relay")

Headers = list[tuple[bytes, bytes]]
ReasoningLookup = Callable[[str], str | None]


class ClientEncoder(StreamSink, Protocol):
    """A stream encoder for an inbound API, as the relay drives it."""

    final_usage: Usage
    usage_seen: bool
    stop_reason: StopReason | None
    tool_call_ids: list[str]
    reasoning_chunks: list[str]
    emitted_chars: int

    @property
    def content_started(self) -> bool: ...

    def start(self) -> None: ...

    def ping(self) -> bytes: ...

    def end(self) -> None: ...

    def fail(self, status: int, message: str) -> None: ...

    def take(self) -> bytes: ...


class UpstreamDecoder(Protocol):
    """A stream decoder for an upstream API, as the relay drives it."""

    done: bool
    finished: bool
    upstream_id: str | None
    upstream_model: str | None

    def feed(self, data: bytes) -> None: ...


_SSE: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _as_sent(body: dict[str, Any]) -> bytes | None:
    return None


@dataclass(frozen=True, slots=True)
class InboundApi:
    """An API we serve."""

    name: str
    id_prefix: str
    request_to_ir: Callable[[Any], Request]
    error_body: Callable[[int, str, str, str | None, str | None], bytes]
    """(status, message, request id, param, code): an error body in this API's format."""
    error_headers: Callable[[int, str], Headers]
    response_body: Callable[[Response, Request, str], bytes]
    new_encoder: Callable[[Request, int, str], ClientEncoder]
    usage_to_ir: Callable[[dict[str, Any]], Usage]
    new_sniffer: Callable[[bool, bool], UsageSniffer]
    """A usage reader for a pass-through response: (is the body a stream, strip a usage-only chunk)."""
    error_event: Callable[[int, str], bytes]
    """An in-band error event, for a pass-through stream switch cuts short."""
    metered_body: Callable[[dict[str, Any]], bytes | None] = _as_sent
    """The body to pass through instead of the client's so a stream reports usage; None to send it as is."""
    # All three APIs' error bodies put the message where `message_of` looks.
    error_message: Callable[[bytes], str] = openai_errors.message_of
    """The message in an error body of this API, as a native upstream sends it."""
    stream_headers: Headers = field(default_factory=lambda: _SSE)
    stores_responses: bool = False
    """Whether answers are kept for a later call's `previous_response_id`."""
    overflow_message: Callable[[int, int], str] = openai_overflow_message
    """How this API says a prompt of N tokens is over a window of M (the wording its harnesses act on)."""
    overflow_code: str | None = CONTEXT_LENGTH_CODE
    overflow_param: str | None = "messages"


@dataclass(frozen=True, slots=True)
class UpstreamApi:
    """An API we call."""

    name: str
    path: str
    request_body: Callable[[Request, Target, ReasoningLookup], bytes]
    auth_headers: Callable[[str, bool], list[tuple[str, str]]]
    response_to_ir: Callable[[dict[str, Any], ToolIndex], Response]
    new_decoder: Callable[[StreamSink, ToolIndex], UpstreamDecoder]
    error_message: Callable[[bytes], str]
    function_only: bool


def _now() -> int:
    """The Unix time stamped on a response (`created`, `created_at`): protocols take it, never read it."""
    return int(time.time())


# ---- Anthropic Messages, inbound ---------------------------------------------------------------


def _anthropic_error_body(status: int, message: str, request_id: str, param: str | None, code: str | None) -> bytes:
    return anthropic_errors.error_body(status, message, request_id)


def _anthropic_response_body(response: Response, request: Request, response_id: str) -> bytes:
    body = anthropic_inbound.response_from_ir(response)
    body["id"] = response_id
    body["model"] = request.model
    return orjson.dumps(body)


def _anthropic_encoder(request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
    return anthropic_stream.StreamEncoder(response_id, request.model, input_estimate)


def _anthropic_sniffer(is_sse: bool, strip_usage: bool) -> UsageSniffer:
    return AnthropicSniffer(is_sse)


ANTHROPIC_INBOUND = InboundApi(
    name="anthropic",
    id_prefix="msg_",
    request_to_ir=anthropic_inbound.request_to_ir,
    error_body=_anthropic_error_body,
    error_headers=anthropic_errors.error_headers,
    response_body=_anthropic_response_body,
    new_encoder=_anthropic_encoder,
    usage_to_ir=anthropic_outbound.usage_to_ir,
    new_sniffer=_anthropic_sniffer,
    error_event=anthropic_errors.error_event,
    overflow_message=anthropic_overflow_message,
    overflow_code=None,
    overflow_param=None,
)


# ---- OpenAI Chat Completions and Responses, inbound ---------------------------------------------


def _openai_error_body(status: int, message: str, request_id: str, param: str | None, code: str | None) -> bytes:
    return openai_errors.error_body(status, message, param, code)


def _chat_response_body(response: Response, request: Request, response_id: str) -> bytes:
    return orjson.dumps(chat_inbound.response_from_ir(response, request, response_id, _now()))


def _chat_encoder(request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
    return chat_stream.StreamEncoder(response_id, request, _now())


def _item_id() -> str:
    return new_id("")


def _responses_body(response: Response, request: Request, response_id: str) -> bytes:
    return orjson.dumps(responses_inbound.response_from_ir(response, request, response_id, _item_id, _now()))


def _responses_encoder(request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
    if request.provider_data.get(responses_compaction.COMPACTION_TRIGGER):
        return responses_compaction.CompactionEncoder(response_id, request, _item_id, _now())
    return responses_stream.StreamEncoder(response_id, request, _item_id, _now())


def _chat_sniffer(is_sse: bool, strip_usage: bool) -> UsageSniffer:
    return ChatSniffer(chat_outbound.usage_to_ir, is_sse, strip_usage)


def _responses_sniffer(is_sse: bool, strip_usage: bool) -> UsageSniffer:
    return ResponsesSniffer(responses_outbound.usage_to_ir, is_sse)


def _chat_metered_body(body: dict[str, Any]) -> bytes | None:
    # A chat stream reports usage only when asked: ask for it so the call can be metered (the
    # sniffer hides the usage chunk from a client that did not ask for it).
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        return None
    included = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    try:
        return orjson.dumps({**body, "stream_options": included})
    except orjson.JSONEncodeError:
        # Nested deeper than the encoder goes: send the body as it came, unmetered.
        log.debug("chat body too deep to re-encode; passed through without the usage request")
        return None


def _chat_error_event(status: int, message: str) -> bytes:
    return b"data: " + openai_errors.error_body(status, message) + b"\n\n"


def _responses_error_event(status: int, message: str) -> bytes:
    event = {"type": "error", "code": "server_error", "message": message, "param": None}
    return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"


CHAT_INBOUND = InboundApi(
    name="openai-chat",
    id_prefix="chatcmpl-",
    request_to_ir=chat_inbound.request_to_ir,
    error_body=_openai_error_body,
    error_headers=openai_errors.error_headers,
    response_body=_chat_response_body,
    new_encoder=_chat_encoder,
    usage_to_ir=chat_outbound.usage_to_ir,
    new_sniffer=_chat_sniffer,
    metered_body=_chat_metered_body,
    error_event=_chat_error_event,
)

RESPONSES_INBOUND = InboundApi(
    name="openai-responses",
    id_prefix="resp_",
    request_to_ir=responses_inbound.request_to_ir,
    error_body=_openai_error_body,
    error_headers=responses_errors.error_headers,
    response_body=_responses_body,
    new_encoder=_responses_encoder,
    usage_to_ir=responses_outbound.usage_to_ir,
    new_sniffer=_responses_sniffer,
    error_event=_responses_error_event,
    stores_responses=True,
    overflow_param="input",
)


# ---- upstreams ---------------------------------------------------------------------------------


def _json_headers(api: str) -> Callable[[str, bool], list[tuple[str, str]]]:
    """The request headers for `api`: its key scheme, JSON in, and a stream or JSON back, unencoded."""

    def headers(key: str, stream: bool) -> list[tuple[str, str]]:
        return [
            *auth_headers(api, key),
            ("content-type", "application/json"),
            ("accept", "text/event-stream" if stream else "application/json"),
            ("accept-encoding", "identity"),
        ]

    return headers


def _chat_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    assert target.chat is not None
    return orjson.dumps(chat_outbound.request_from_ir(request, target.chat, lookup))


def _anthropic_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    return orjson.dumps(anthropic_outbound.request_from_ir(request, target.model))


def _responses_upstream_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    return orjson.dumps(responses_outbound.request_from_ir(request, target.model))


def _upstream(
    name: str,
    request_body: Callable[[Request, Target, ReasoningLookup], bytes],
    response_to_ir: Callable[[dict[str, Any], ToolIndex], Response],
    new_decoder: Callable[[StreamSink, ToolIndex], UpstreamDecoder],
    error_message: Callable[[bytes], str],
    function_only: bool,
) -> UpstreamApi:
    """An upstream API, with the path and key headers `switch.upstream_api` defines for `name`."""
    return UpstreamApi(
        name, PATHS[name], request_body, _json_headers(name), response_to_ir, new_decoder, error_message, function_only
    )


CHAT_UPSTREAM = _upstream(
    "openai-chat", _chat_body, chat_outbound.response_to_ir, chat_stream.StreamDecoder, openai_errors.message_of, True
)
ANTHROPIC_UPSTREAM = _upstream(
    "anthropic",
    _anthropic_body,
    anthropic_outbound.response_to_ir,
    anthropic_stream.StreamDecoder,
    openai_errors.message_of,
    True,
)
RESPONSES_UPSTREAM = _upstream(
    "openai-responses",
    _responses_upstream_body,
    responses_outbound.response_to_ir,
    responses_stream.StreamDecoder,
    responses_errors.message_of,
    False,
)

UPSTREAMS: dict[str, UpstreamApi] = {api.name: api for api in (CHAT_UPSTREAM, ANTHROPIC_UPSTREAM, RESPONSES_UPSTREAM)}
