"""The codecs of the APIs we call: one `UpstreamApi` subclass per API (those we serve: `adapters`).

The translated path is written once against these classes' methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import orjson

from switch.protocols.anthropic_messages import outbound as anthropic_outbound
from switch.protocols.anthropic_messages import stream as anthropic_stream
from switch.protocols.ir import Request, Response, StreamSink
from switch.protocols.openai_chat import errors as openai_errors
from switch.protocols.openai_chat import outbound as chat_outbound
from switch.protocols.openai_chat import stream as chat_stream
from switch.protocols.openai_responses import errors as responses_errors
from switch.protocols.openai_responses import outbound as responses_outbound
from switch.protocols.openai_responses import stream as responses_stream
from switch.protocols.tools import ToolIndex
from switch.routing.resolve import Target
from switch.upstream_api import PATHS, auth_headers

ReasoningLookup = Callable[[str], str | None]


class UpstreamDecoder(Protocol):
    """A stream decoder for an upstream API, as the relay drives it."""

    done: bool
    finished: bool
    upstream_id: str | None
    upstream_model: str | None

    def feed(self, data: bytes) -> None: ...


class UpstreamApi:
    """An API we call: its request body and headers, and how its answers and errors are read.

    One subclass per API. `wire` is the API whose body shape it sends (LiteLLM takes the chat one).
    """

    name: str
    wire: str
    path: str = ""
    function_only = True
    """Whether it knows function tools only (custom and namespaced tools are wrapped for it)."""

    def request_body(self, request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
        """The IR request as this API's JSON body for `target`."""
        raise NotImplementedError

    def auth_headers(self, key: str, stream: bool) -> list[tuple[str, str]]:
        """The request headers: its key scheme, JSON in, and a stream or JSON back, unencoded."""
        return [
            *auth_headers(self.name, key),
            ("content-type", "application/json"),
            ("accept", "text/event-stream" if stream else "application/json"),
            ("accept-encoding", "identity"),
        ]

    def needs_key(self, target: Target) -> bool:
        """Whether `target` cannot be called without a key."""
        return not target.keyless

    def response_to_ir(self, body: dict[str, Any], index: ToolIndex) -> Response:
        """A whole answer of this API in IR."""
        raise NotImplementedError

    def new_decoder(self, sink: StreamSink, index: ToolIndex) -> UpstreamDecoder:
        """A stream decoder feeding this API's stream events to `sink` as IR events."""
        raise NotImplementedError

    def error_message(self, raw: bytes) -> str:
        """The message in an error body of this API."""
        return openai_errors.message_of(raw)


class ChatUpstream(UpstreamApi):
    """An OpenAI Chat Completions server (Baseten, vLLM, most open-model hosts)."""

    name = wire = "openai-chat"
    path = PATHS["openai-chat"]

    def request_body(self, request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
        """A chat body, shaped for the target's chat server."""
        assert target.chat is not None
        return orjson.dumps(chat_outbound.request_from_ir(request, target.chat, lookup))

    def response_to_ir(self, body: dict[str, Any], index: ToolIndex) -> Response:
        """A chat completion in IR."""
        return chat_outbound.response_to_ir(body, index)

    def new_decoder(self, sink: StreamSink, index: ToolIndex) -> UpstreamDecoder:
        """A chat stream decoder."""
        return chat_stream.StreamDecoder(sink, index)


class AnthropicUpstream(UpstreamApi):
    """An Anthropic Messages server."""

    name = wire = "anthropic"
    path = PATHS["anthropic"]

    def request_body(self, request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
        """An Anthropic Messages body."""
        return orjson.dumps(anthropic_outbound.request_from_ir(request, target.model))

    def response_to_ir(self, body: dict[str, Any], index: ToolIndex) -> Response:
        """An Anthropic message in IR."""
        return anthropic_outbound.response_to_ir(body, index)

    def new_decoder(self, sink: StreamSink, index: ToolIndex) -> UpstreamDecoder:
        """An Anthropic stream decoder."""
        return anthropic_stream.StreamDecoder(sink, index)


class ResponsesUpstream(UpstreamApi):
    """An OpenAI Responses server."""

    name = wire = "openai-responses"
    path = PATHS["openai-responses"]
    function_only = False

    def request_body(self, request: Request, target: Target, lookup: ReasoningLookup) -> bytes:
        """A Responses body."""
        return orjson.dumps(responses_outbound.request_from_ir(request, target.model))

    def response_to_ir(self, body: dict[str, Any], index: ToolIndex) -> Response:
        """A Responses answer in IR."""
        return responses_outbound.response_to_ir(body, index)

    def new_decoder(self, sink: StreamSink, index: ToolIndex) -> UpstreamDecoder:
        """A Responses stream decoder."""
        return responses_stream.StreamDecoder(sink, index)

    def error_message(self, raw: bytes) -> str:
        """The message in a Responses error body."""
        return responses_errors.message_of(raw)


CHAT_UPSTREAM: UpstreamApi = ChatUpstream()
ANTHROPIC_UPSTREAM: UpstreamApi = AnthropicUpstream()
RESPONSES_UPSTREAM: UpstreamApi = ResponsesUpstream()

UPSTREAMS: dict[str, UpstreamApi] = {api.name: api for api in (CHAT_UPSTREAM, ANTHROPIC_UPSTREAM, RESPONSES_UPSTREAM)}
