"""The per-API pieces the relay combines: one `InboundApi` per API we serve, one `UpstreamApi` per
API we call. The relay itself is written once against these two shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages.request import request_to_ir as anthropic_request_to_ir
from switch.protocols.anthropic_messages.response import response_from_ir as anthropic_response_from_ir
from switch.protocols.anthropic_messages.stream import StreamEncoder as AnthropicStreamEncoder
from switch.protocols.ir import Request, Response, StopReason, StreamSink, Usage
from switch.protocols.openai_chat import errors as chat_errors
from switch.protocols.openai_chat.request import request_from_ir as chat_request_from_ir
from switch.protocols.openai_chat.response import response_to_ir as chat_response_to_ir
from switch.protocols.openai_chat.stream import StreamDecoder as ChatStreamDecoder
from switch.proxy.exchange import new_id
from switch.routing.resolve import Target

Headers = list[tuple[bytes, bytes]]
ReasoningLookup = Callable[[str], str | None]


class ClientEncoder(StreamSink, Protocol):
    """A stream encoder for an inbound API, as the relay drives it."""

    final_usage: Usage
    usage_seen: bool
    stop_reason: StopReason | None
    tool_call_ids: list[str]
    reasoning_chunks: list[str]

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
    request_to_ir: Callable[[Any], Request]
    error_body: Callable[[int, str, str], bytes]
    error_headers: Callable[[int, str], Headers]
    response_body: Callable[[Response, Request], bytes]
    new_encoder: Callable[[Request, int], ClientEncoder]
    stream_headers: Headers


@dataclass(frozen=True, slots=True)
class UpstreamApi:
    """An API we call."""

    name: str
    path: str
    request_body: Callable[[Request, Target, ReasoningLookup], bytes]
    auth_headers: Callable[[str, bool], list[tuple[str, str]]]
    response_to_ir: Callable[[dict[str, Any], dict[str, str]], Response]
    new_decoder: Callable[[StreamSink, dict[str, str]], UpstreamDecoder]
    error_message: Callable[[bytes], str]


# ---- Anthropic Messages, inbound ---------------------------------------------------------------

_SSE = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_NO_RETRY = frozenset({400, 401, 403, 404, 413, 422, 501})


def _anthropic_error_headers(status: int, request_id: str) -> Headers:
    headers: Headers = [(b"content-type", b"application/json"), (b"request-id", request_id.encode())]
    if status in _NO_RETRY:
        headers.append((b"x-should-retry", b"false"))
    return headers


def _anthropic_response_body(response: Response, request: Request) -> bytes:
    body = anthropic_response_from_ir(response)
    body["model"] = request.model
    return orjson.dumps(body)


def _anthropic_encoder(request: Request, input_estimate: int) -> ClientEncoder:
    return AnthropicStreamEncoder(new_id("msg_"), request.model, input_estimate)


ANTHROPIC_INBOUND = InboundApi(
    name="anthropic",
    request_to_ir=anthropic_request_to_ir,
    error_body=anthropic_errors.error_body,
    error_headers=_anthropic_error_headers,
    response_body=_anthropic_response_body,
    new_encoder=_anthropic_encoder,
    stream_headers=_SSE,
)


# ---- OpenAI chat, upstream ---------------------------------------------------------------------


def _chat_body(request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
    assert target.chat is not None
    return orjson.dumps(chat_request_from_ir(request, target.chat, lookup))


def _bearer(key: str, stream: bool) -> list[tuple[str, str]]:
    return [
        ("authorization", "Bearer " + key),
        ("content-type", "application/json"),
        ("accept", "text/event-stream" if stream else "application/json"),
        ("accept-encoding", "identity"),
    ]


CHAT_UPSTREAM = UpstreamApi(
    name="openai-chat",
    path="/chat/completions",
    request_body=_chat_body,
    auth_headers=_bearer,
    response_to_ir=chat_response_to_ir,
    new_decoder=ChatStreamDecoder,
    error_message=chat_errors.message_of,
)
