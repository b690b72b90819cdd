"""Incremental Server-Sent Events decoding and encoding.

`SseDecoder.feed` accepts bytes cut anywhere (inside a line, inside a multi-byte character, between
CR and LF) and returns the complete events seen so far; `flush` returns what a stream that ended
without a final blank line still held. Data is kept as bytes so JSON parsers can read it directly.
An unfinished line is held in pieces and joined once its end arrives (linear in its size, however
many reads it spans), and no line or event may grow past `MAX_EVENT_BYTES`.
"""

from __future__ import annotations

from typing import NamedTuple, NoReturn

from switch.protocols.ir import UpstreamFormatError

MAX_EVENT_BYTES = 16 << 20
"""Longest SSE line or event kept (a Responses `response.completed` repeats the whole answer: MiBs are legitimate)."""
_LINE_WALK_FROM = 64 << 10  # an unfinished event longer than this is read line by line instead of re-copied


class SseEvent(NamedTuple):
    """One dispatched event: its `event:` name (None when absent) and its joined `data:` lines."""

    event: str | None
    data: bytes


class SseDecoder:
    """Turns a byte stream into `SseEvent`s."""

    __slots__ = ("_pending", "_event", "_data", "_has_data", "_held", "_held_size", "_data_size", "limit")

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self._pending = b""
        self._event: str | None = None
        self._data: list[bytes] = []
        self._has_data = False
        self._held: list[bytes] = []
        self._held_size = 0
        self._data_size = 0
        self.limit = limit

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode `chunk` and return every event it completed."""
        if self._pending or self._held:
            if b"\n" not in chunk and b"\r" not in chunk:
                return self._hold(chunk)
            if self._held:
                self._held.append(chunk)
                buffer = b"".join(self._held)
                self._held = []
                self._held_size = 0
            else:
                buffer = self._pending + chunk
        else:
            buffer = chunk
        if b"\r" not in buffer and not self._has_data and self._event is None:
            events = self._feed_fast(buffer)
        else:
            events = self._feed_lines(buffer)
        if len(self._pending) > self.limit:
            self._too_long()
        return events

    def _hold(self, chunk: bytes) -> list[SseEvent]:
        # More of a line whose end has not come: keep the piece, copy nothing until the end arrives.
        if not self._held:
            self._held.append(self._pending)
            self._held_size = len(self._pending)
            self._pending = b""
        self._held.append(chunk)
        self._held_size += len(chunk)
        if self._held_size > self.limit:
            self._too_long()
        return []

    def _too_long(self) -> NoReturn:
        self._held = []
        self._pending = b""
        raise UpstreamFormatError(f"upstream sent an SSE line or event longer than {self.limit} bytes")

    def _feed_fast(self, buffer: bytes) -> list[SseEvent]:
        # The common case (LF line ends, no event half-parsed): cut whole events at blank lines and
        # read the usual one-`data:`-line shape without walking line by line.
        end = buffer.rfind(b"\n\n")
        if end < 0:
            if len(buffer) > _LINE_WALK_FROM:
                return self._feed_lines(buffer)
            self._pending = buffer
            return []
        if end + 2 == len(buffer) and buffer.startswith(b"data: ") and buffer.find(b"\n") == end:
            # One whole `data:` event, as most reads of a token stream are.
            self._pending = b""
            if end - 6 > self.limit:
                self._too_long()
            return [SseEvent(None, buffer[6:end])]
        self._pending = buffer[end + 2 :]
        events: list[SseEvent] = []
        for block in buffer[:end].split(b"\n\n"):
            if not block:
                continue
            if len(block) > self.limit:
                self._take_block(block, events)  # checked line by line, and refused if its data is too long
            elif block.startswith(b"data: ") and b"\n" not in block:
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
        if self._held:
            self._pending = b"".join(self._held)
            self._held = []
            self._held_size = 0
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
            self._data_size = 0
            return
        if line[0] == 58:  # ':' starts a comment
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
            self._data_size += len(value) + 1  # with the newline that joins it to the next line
            if self._data_size - 1 > self.limit:
                self._too_long()
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        # `id` and `retry` mean nothing to a proxy relaying one response.


def encode_event(name: str, data: bytes) -> bytes:
    """One SSE event with an `event:` line, as Anthropic clients require."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


def encode_data(data: bytes) -> bytes:
    """One SSE event with only a `data:` line (the OpenAI convention)."""
    return b"data: " + data + b"\n\n"
