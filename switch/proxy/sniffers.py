"""Usage and stop reasons read out of a native response passing through untouched, one reader per API.

Streams are decoded event by event, and only events that can carry usage or the end of the
message are parsed (a byte check comes first); a JSON body is kept (up to `limit` bytes) and read
once at the end. The bytes reach the client untouched whatever they hold, so odd values are
skipped, never raised: only well-typed usage and stop reasons are taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from switch.protocols.ir import Usage
from switch.protocols.sse import SseDecoder
from switch.protocols.wire import MAX_COUNT, label

UsageReader = Callable[[dict[str, Any]], Usage]
BODY_LIMIT = 16 << 20


class UsageSniffer:
    """Reads usage out of one pass-through response; each API's subclass knows where it is."""

    def __init__(self, is_sse: bool, strip_usage: bool = False, limit: int = BODY_LIMIT) -> None:
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

    def close(self) -> None:
        """Read a kept JSON body."""
        if self.is_sse or not self._body or self._size > self._limit:
            return
        payload = _loads(b"".join(self._body))
        if payload is not None:
            self._read_body(payload)

    def _inspect(self, name: str | None, data: bytes) -> bool:
        """Track one event; True when it is an event to strip from the stream."""
        raise NotImplementedError

    def _read_body(self, payload: dict[str, Any]) -> None:
        raise NotImplementedError

    def _take_usage(self, usage: Any, read: UsageReader) -> None:
        if type(usage) is dict:
            self.usage = read(usage)
            self.usage_seen = True


class AnthropicSniffer(UsageSniffer):
    """Anthropic Messages: usage in `message_start` and `message_delta`, the end at `message_stop`."""

    def _inspect(self, name: str | None, data: bytes) -> bool:
        if name == "message_stop":
            self.ended = True
        elif name == "message_start" or name == "message_delta":
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
                    self._merge(usage)
        return False

    def _read_body(self, payload: dict[str, Any]) -> None:
        usage = payload.get("usage")
        if type(usage) is dict:
            self._merge(usage)
        self.stop_reason = label(payload.get("stop_reason"))

    def _merge(self, usage: dict[str, Any]) -> None:
        self.usage_seen = True
        current = self.usage
        for wire, attribute in _ANTHROPIC_COUNTS:
            value = usage.get(wire)
            # Later events repeat only some counts; a zero input count means "not repeated".
            if type(value) is int and 0 <= value <= MAX_COUNT and (value or wire == "output_tokens"):
                setattr(current, attribute, value)


_ANTHROPIC_COUNTS = (
    ("input_tokens", "input_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
    ("output_tokens", "output_tokens"),
)


class ChatSniffer(UsageSniffer):
    """Chat Completions: usage in a chunk of its own (asked for with `stream_options`), the end at `[DONE]`."""

    def __init__(self, read_usage: UsageReader, is_sse: bool, strip_usage: bool = False) -> None:
        super().__init__(is_sse, strip_usage)
        self._read_usage = read_usage

    def _inspect(self, name: str | None, data: bytes) -> bool:
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
                    self._take_usage(usage, self._read_usage)
                    # A usage-only chunk is there because switch asked for it: the client did not.
                    return self.strip_usage and not choices
        return False

    def _read_body(self, payload: dict[str, Any]) -> None:
        self._take_usage(payload.get("usage"), self._read_usage)
        choices = payload.get("choices")
        if type(choices) is list and choices and type(choices[0]) is dict:
            self.stop_reason = label(choices[0].get("finish_reason"))


class ResponsesSniffer(UsageSniffer):
    """OpenAI Responses: usage and the status in the terminal `response.*` event."""

    def __init__(self, read_usage: UsageReader, is_sse: bool, strip_usage: bool = False) -> None:
        super().__init__(is_sse, strip_usage)
        self._read_usage = read_usage

    def _inspect(self, name: str | None, data: bytes) -> bool:
        if b'"response.completed"' in data or b'"response.incomplete"' in data or b'"response.failed"' in data:
            payload = _loads(data)
            if payload is not None:
                self.ended = True
                response = payload.get("response")
                if type(response) is dict:
                    self.stop_reason = label(response.get("status"))
                    self._take_usage(response.get("usage"), self._read_usage)
        return False

    def _read_body(self, payload: dict[str, Any]) -> None:
        self._take_usage(payload.get("usage"), self._read_usage)
        self.stop_reason = label(payload.get("status"))


def _loads(data: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
