"""Incremental Server-Sent Events decoding and encoding.

`SseDecoder.feed` accepts bytes cut anywhere (inside a line, inside a multi-byte character, between
CR and LF) and returns the complete events seen so far; `flush` returns what a stream that ended
without a final blank line still held. Data is kept as bytes so JSON parsers can read it directly.
"""

from __future__ import annotations

from typing import NamedTuple


class SseEvent(NamedTuple):
    """One dispatched event: its `event:` name (None when absent) and its joined `data:` lines."""

    event: str | None
    data: bytes


class SseDecoder:
    """Turns a byte stream into `SseEvent`s."""

    __slots__ = ("_pending", "_event", "_data", "_has_data")

    def __init__(self) -> None:
        self._pending = b""
        self._event: str | None = None
        self._data: list[bytes] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode `chunk` and return every event it completed."""
        buffer = self._pending + chunk if self._pending else chunk
        if b"\r" not in buffer and not self._has_data and self._event is None:
            return self._feed_fast(buffer)
        return self._feed_lines(buffer)

    def _feed_fast(self, buffer: bytes) -> list[SseEvent]:
        # The common case (LF line ends, no event half-parsed): cut whole events at blank lines and
        # read the usual one-`data:`-line shape without walking line by line.
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self._pending = buffer
            return []
        if end + 2 == len(buffer) and buffer.startswith(b"data: ") and buffer.find(b"\n") == end:
            # One whole `data:` event, as most reads of a token stream are.
            self._pending = b""
            return [SseEvent(None, buffer[6:end])]
        self._pending = buffer[end + 2 :]
        events: list[SseEvent] = []
        for block in buffer[:end].split(b"\n\n"):
            if not block:
                continue
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(SseEvent(None, block[6:]))
            elif block.startswith(b"event: "):
                name_line, newline, rest = block.partition(b"\n")
                if newline and rest.startswith(b"data: ") and b"\n" not in rest:
                    events.append(SseEvent(name_line[7:].decode("utf-8", "replace"), rest[6:]))
                else:
                    self._take_block(block, events)
            else:
                self._take_block(block, events)
        return events

    def _take_block(self, block: bytes, events: list[SseEvent]) -> None:
        for line in block.split(b"\n"):
            self._take_line(line, events)
        self._take_line(b"", events)

    def _feed_lines(self, buffer: bytes) -> list[SseEvent]:
        if b"\r" in buffer:
            # A CR at the very end may be the first half of a CRLF; wait for the next byte.
            keep_cr = buffer.endswith(b"\r")
            if keep_cr:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = buffer.split(b"\n")
            self._pending = lines.pop() + (b"\r" if keep_cr else b"")
        else:
            lines = buffer.split(b"\n")
            self._pending = lines.pop()
        events: list[SseEvent] = []
        for line in lines:
            self._take_line(line, events)
        return events

    def flush(self) -> list[SseEvent]:
        """Return the event an unterminated stream left behind, if any."""
        events: list[SseEvent] = []
        if self._pending:
            line = self._pending.rstrip(b"\r")
            self._pending = b""
            self._take_line(line, events)
        self._take_line(b"", events)
        return events

    def _take_line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            if self._has_data:
                events.append(SseEvent(self._event, b"\n".join(self._data)))
            self._event = None
            self._data = []
            self._has_data = False
            return
        if line[0] == 58:  # ':' starts a comment
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        # `id` and `retry` mean nothing to a proxy relaying one response.


def encode_event(name: str, data: bytes) -> bytes:
    """One SSE event with an `event:` line, as Anthropic clients require."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def encode_data(data: bytes) -> bytes:
    """One SSE event with only a `data:` line (the OpenAI convention)."""
    return b"data: " + data + b"\n\n"
