"""The codecs of the APIs we serve: one `InboundApi` subclass per API (those we call: `upstream_apis`).

The relay and the paths are written once against these classes' methods.
"""

from __future__ import annotations

import logging
import time
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
from switch.proxy.exchange import new_id
from switch.proxy.sniffers import AnthropicSniffer, ChatSniffer, ResponsesSniffer, UsageSniffer

log = logging.getLogger("switch.relay")

Headers = list[tuple[bytes, bytes]]


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


_SSE: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class InboundApi:
    """An API we serve: how its bodies are read, and its answers, streams and errors written.

    One subclass per API; the relay and the paths call these methods, so a reader follows a call
    from the parser to the answer without a table of stored functions in between.
    """

    name: str
    id_prefix: str
    stream_headers: Headers = _SSE
    stores_responses = False
    """Whether answers are kept for a later call's `previous_response_id`."""
    overflow_code: str | None = CONTEXT_LENGTH_CODE
    overflow_param: str | None = "messages"

    def request_to_ir(self, body: Any) -> Request:
        """The client's body as an IR request (raises `RequestFormatError` or `ClientRequestError`)."""
        raise NotImplementedError

    def error_body(self, status: int, message: str, request_id: str, param: str | None, code: str | None) -> bytes:
        """An error body in this API's format."""
        return openai_errors.error_body(status, message, param, code)

    def error_headers(self, status: int, request_id: str) -> Headers:
        """The headers of an error answer in this API."""
        raise NotImplementedError

    def response_body(self, response: Response, request: Request, response_id: str) -> bytes:
        """A whole (non-streamed) answer in this API's format."""
        raise NotImplementedError

    def new_encoder(self, request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
        """A stream encoder writing IR events as this API's stream."""
        raise NotImplementedError

    def usage_to_ir(self, usage: dict[str, Any]) -> Usage:
        """A usage object of this API in IR."""
        raise NotImplementedError

    def new_sniffer(self, is_sse: bool, strip_usage: bool) -> UsageSniffer:
        """A usage reader for a pass-through response (is the body a stream, strip a usage-only chunk)."""
        raise NotImplementedError

    def error_event(self, status: int, message: str) -> bytes:
        """An in-band error event, for a pass-through stream switch cuts short."""
        raise NotImplementedError

    def metered_body(self, body: dict[str, Any]) -> bytes | None:
        """The body to pass through instead of the client's so a stream reports usage; None to send it as is."""
        return None

    def error_message(self, raw: bytes) -> str:
        """The message in an error body of this API, as a native upstream sends it."""
        # All three APIs' error bodies put the message where `message_of` looks.
        return openai_errors.message_of(raw)

    def overflow_message(self, prompt_tokens: int, limit: int) -> str:
        """How this API says a prompt of N tokens is over a window of M (the wording its harnesses act on)."""
        return openai_overflow_message(prompt_tokens, limit)


def _now() -> int:
    """The Unix time stamped on a response (`created`, `created_at`): protocols take it, never read it."""
    return int(time.time())


def _item_id() -> str:
    return new_id("")


# ---- served APIs -------------------------------------------------------------------------------


class AnthropicInbound(InboundApi):
    """Anthropic Messages, as Claude Code calls it."""

    name = "anthropic"
    id_prefix = "msg_"
    overflow_code = None
    overflow_param = None

    def request_to_ir(self, body: Any) -> Request:
        """The client's body as an IR request."""
        return anthropic_inbound.request_to_ir(body)

    def error_body(self, status: int, message: str, request_id: str, param: str | None, code: str | None) -> bytes:
        """An Anthropic error body."""
        return anthropic_errors.error_body(status, message, request_id)

    def error_headers(self, status: int, request_id: str) -> Headers:
        """An Anthropic error answer's headers."""
        return anthropic_errors.error_headers(status, request_id)

    def response_body(self, response: Response, request: Request, response_id: str) -> bytes:
        """A whole Anthropic message."""
        body = anthropic_inbound.response_from_ir(response)
        body["id"] = response_id
        body["model"] = request.model
        return orjson.dumps(body)

    def new_encoder(self, request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
        """An Anthropic stream encoder."""
        return anthropic_stream.StreamEncoder(response_id, request.model, input_estimate)

    def usage_to_ir(self, usage: dict[str, Any]) -> Usage:
        """Anthropic usage in IR."""
        return anthropic_outbound.usage_to_ir(usage)

    def new_sniffer(self, is_sse: bool, strip_usage: bool) -> UsageSniffer:
        """A usage reader for an Anthropic pass-through."""
        return AnthropicSniffer(is_sse)

    def error_event(self, status: int, message: str) -> bytes:
        """An Anthropic in-band `error` event."""
        return anthropic_errors.error_event(status, message)

    def overflow_message(self, prompt_tokens: int, limit: int) -> str:
        """Anthropic's wording of a prompt over the window."""
        return anthropic_overflow_message(prompt_tokens, limit)


class ChatInbound(InboundApi):
    """OpenAI Chat Completions."""

    name = "openai-chat"
    id_prefix = "chatcmpl-"

    def request_to_ir(self, body: Any) -> Request:
        """The client's body as an IR request."""
        return chat_inbound.request_to_ir(body)

    def error_headers(self, status: int, request_id: str) -> Headers:
        """A chat error answer's headers."""
        return openai_errors.error_headers(status, request_id)

    def response_body(self, response: Response, request: Request, response_id: str) -> bytes:
        """A whole chat completion."""
        return orjson.dumps(chat_inbound.response_from_ir(response, request, response_id, _now()))

    def new_encoder(self, request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
        """A chat stream encoder."""
        return chat_stream.StreamEncoder(response_id, request, _now())

    def usage_to_ir(self, usage: dict[str, Any]) -> Usage:
        """Chat usage in IR."""
        return chat_outbound.usage_to_ir(usage)

    def new_sniffer(self, is_sse: bool, strip_usage: bool) -> UsageSniffer:
        """A usage reader for a chat pass-through."""
        return ChatSniffer(chat_outbound.usage_to_ir, is_sse, strip_usage)

    def error_event(self, status: int, message: str) -> bytes:
        """A chat stream's error chunk."""
        return b"data: " + openai_errors.error_body(status, message) + b"\n\n"

    def metered_body(self, body: dict[str, Any]) -> bytes | None:
        """The body asking for the usage chunk, unless the client already did."""
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


class ResponsesInbound(InboundApi):
    """OpenAI Responses, as Codex calls it."""

    name = "openai-responses"
    id_prefix = "resp_"
    stores_responses = True
    overflow_param = "input"

    def request_to_ir(self, body: Any) -> Request:
        """The client's body as an IR request."""
        return responses_inbound.request_to_ir(body)

    def error_headers(self, status: int, request_id: str) -> Headers:
        """A Responses error answer's headers."""
        return responses_errors.error_headers(status, request_id)

    def response_body(self, response: Response, request: Request, response_id: str) -> bytes:
        """A whole Responses answer."""
        return orjson.dumps(responses_inbound.response_from_ir(response, request, response_id, _item_id, _now()))

    def new_encoder(self, request: Request, input_estimate: int, response_id: str) -> ClientEncoder:
        """A Responses stream encoder (a compaction encoder for a compaction request)."""
        if request.provider_data.get(responses_compaction.COMPACTION_TRIGGER):
            return responses_compaction.CompactionEncoder(response_id, request, _item_id, _now())
        return responses_stream.StreamEncoder(response_id, request, _item_id, _now())

    def usage_to_ir(self, usage: dict[str, Any]) -> Usage:
        """Responses usage in IR."""
        return responses_outbound.usage_to_ir(usage)

    def new_sniffer(self, is_sse: bool, strip_usage: bool) -> UsageSniffer:
        """A usage reader for a Responses pass-through."""
        return ResponsesSniffer(responses_outbound.usage_to_ir, is_sse)

    def error_event(self, status: int, message: str) -> bytes:
        """A Responses stream's `error` event."""
        event = {"type": "error", "code": "server_error", "message": message, "param": None}
        return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"


ANTHROPIC_INBOUND: InboundApi = AnthropicInbound()
CHAT_INBOUND: InboundApi = ChatInbound()
RESPONSES_INBOUND: InboundApi = ResponsesInbound()
