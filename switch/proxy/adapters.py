"""The per-API pieces the relay combines: one `InboundApi` per API we serve, one `UpstreamApi` per
API we call. The relay itself is written once against these two shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages import outbound as anthropic_outbound
from switch.protocols.anthropic_messages.request import request_to_ir as anthropic_request_to_ir
from switch.protocols.anthropic_messages.response import response_from_ir as anthropic_response_from_ir
from switch.protocols.anthropic_messages.stream import StreamEncoder as AnthropicStreamEncoder
from switch.protocols.ir import Request, Response, StopReason, StreamSink, Usage
from switch.protocols.openai_chat import errors as openai_errors
from switch.protocols.openai_chat import inbound as chat_inbound
from switch.protocols.openai_chat.request import request_from_ir as chat_request_from_ir
from switch.protocols.openai_chat.response import response_to_ir as chat_response_to_ir
from switch.protocols.openai_chat.response import usage_to_ir as chat_usage_to_ir
from switch.protocols.openai_chat.stream import StreamDecoder as ChatStreamDecoder
from switch.protocols.openai_responses import request as responses_request
from switch.protocols.openai_responses import response as responses_response
from switch.protocols.openai_responses import stream as responses_stream
from switch.protocols.tools import ToolIndex
from switch.proxy.exchange import new_id
from switch.routing.resolve import Target
from switch.upstream_api import PATHS, auth_headers

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


@dataclass(frozen=True, slots=True)
class InboundApi:
    """An API we serve."""

    name: str
    id_prefix: str
    request_to_ir: Callable[[Any], Request]
    error_body: Callable[[int, str, str, str | None], bytes]
    error_headers: Callable[[int, str], Headers]
    response_body: Callable[[Response, Request, str], bytes]
    new_encoder: Callable[[Request, int, str], ClientEncoder]
    usage_to_ir: Callable[[dict[str, Any]], Usage]
    stream_headers: Headers


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


_SSE: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_NO_RETRY = frozenset({400, 401, 403, 404, 413, 422, 501})


# ---- Anthropic Messages, inbound ---------------------------------------------------------------


def _anthropic_error_headers(status: int, request_id: str) -> Headers:
    headers: Headers = [(b"content-type", b"application/json"), (b"request-id", request_id.encode())]
    if status in _NO_RETRY:
        headers.append((b"x-should-retry", b"false"))
    return headers


def _anthropic_error_body(status: int, message: str, request_id: str, param: str | None) -> bytes:
    return anthropic_errors.error_body(status, message, request_id)


def _anthropic_response_body(response: Response, request: Request, response_id: str) -> bytes:
    body = anthropic_response_from_ir(response)
    body["id"] = response_id
    body["model"] = request.model
    return orjson.dumps(body)


def _anthropic_encoder(request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
    return AnthropicStreamEncoder(response_id, request.model, input_estimate)


ANTHROPIC_INBOUND = InboundApi(
    name="anthropic",
    id_prefix="msg_",
    request_to_ir=anthropic_request_to_ir,
    error_body=_anthropic_error_body,
    error_headers=_anthropic_error_headers,
    response_body=_anthropic_response_body,
    new_encoder=_anthropic_encoder,
    usage_to_ir=anthropic_outbound.usage_to_ir,
    stream_headers=_SSE,
)


# ---- OpenAI Chat Completions and Responses, inbound ---------------------------------------------


def _openai_error_body(status: int, message: str, request_id: str, param: str | None) -> bytes:
    return openai_errors.error_body(status, message, param)


def _openai_error_headers(status: int, request_id: str) -> Headers:
    headers: Headers = [(b"content-type", b"application/json"), (b"x-request-id", request_id.encode())]
    if status in _NO_RETRY:
        headers.append((b"x-should-retry", b"false"))
    return headers


def _chat_response_body(response: Response, request: Request, response_id: str) -> bytes:
    return orjson.dumps(chat_inbound.response_from_ir(response, request, response_id))


def _chat_encoder(request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
    return chat_inbound.StreamEncoder(response_id, request)


def _item_id() -> str:
    return new_id("")


def _responses_body(response: Response, request: Request, response_id: str) -> bytes:
    return orjson.dumps(responses_response.response_from_ir(response, request, response_id, _item_id))


def _responses_encoder(request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
    return responses_stream.StreamEncoder(response_id, request, _item_id)


CHAT_INBOUND = InboundApi(
    name="openai-chat",
    id_prefix="chatcmpl-",
    request_to_ir=chat_inbound.request_to_ir,
    error_body=_openai_error_body,
    error_headers=_openai_error_headers,
    response_body=_chat_response_body,
    new_encoder=_chat_encoder,
    usage_to_ir=chat_usage_to_ir,
    stream_headers=_SSE,
)

RESPONSES_INBOUND = InboundApi(
    name="openai-responses",
    id_prefix="resp_",
    request_to_ir=responses_request.request_to_ir,
    error_body=_openai_error_body,
    error_headers=_openai_error_headers,
    response_body=_responses_body,
    new_encoder=_responses_encoder,
    usage_to_ir=responses_response.usage_to_ir,
    stream_headers=_SSE,
)


# ---- upstreams ---------------------------------------------------------------------------------


def _bearer(key: str, stream: bool) -> list[tuple[str, str]]:
    return [
        *auth_headers("openai-chat", key),
        ("content-type", "application/json"),
        ("accept", "text/event-stream" if stream else "application/json"),
        ("accept-encoding", "identity"),
    ]


def _anthropic_key(key: str, stream: bool) -> list[tuple[str, str]]:
    return [
        *auth_headers("anthropic", key),
        ("content-type", "application/json"),
        ("accept", "text/event-stream" if stream else "application/json"),
        ("accept-encoding", "identity"),
    ]


def _chat_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    assert target.chat is not None
    return orjson.dumps(chat_request_from_ir(request, target.chat, lookup))


def _anthropic_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    return orjson.dumps(anthropic_outbound.request_from_ir(request, target.model))


def _responses_upstream_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    return orjson.dumps(responses_request.request_from_ir(request, target.model))


CHAT_UPSTREAM = UpstreamApi(
    name="openai-chat",
    path=PATHS["openai-chat"],
    request_body=_chat_body,
    auth_headers=_bearer,
    response_to_ir=chat_response_to_ir,
    new_decoder=ChatStreamDecoder,
    error_message=openai_errors.message_of,
    function_only=True,
)

ANTHROPIC_UPSTREAM = UpstreamApi(
    name="anthropic",
    path=PATHS["anthropic"],
    request_body=_anthropic_body,
    auth_headers=_anthropic_key,
    response_to_ir=anthropic_outbound.response_to_ir,
    new_decoder=anthropic_outbound.StreamDecoder,
    error_message=openai_errors.message_of,
    function_only=True,
)

RESPONSES_UPSTREAM = UpstreamApi(
    name="openai-responses",
    path=PATHS["openai-responses"],
    request_body=_responses_upstream_body,
    auth_headers=_bearer,
    response_to_ir=responses_response.response_to_ir,
    new_decoder=responses_stream.StreamDecoder,
    error_message=openai_errors.message_of,
    function_only=False,
)

UPSTREAMS: dict[str, UpstreamApi] = {
    "openai-chat": CHAT_UPSTREAM,
    "anthropic": ANTHROPIC_UPSTREAM,
    "openai-responses": RESPONSES_UPSTREAM,
}
