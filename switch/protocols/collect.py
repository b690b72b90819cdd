"""Bridges between whole responses and stream events, both pure.

`ResponseCollector` is a `StreamSink` that assembles a complete IR `Response` (for a client that
did not stream while the upstream did); `replay` drives any sink from a complete `Response` (for
an upstream that ignored `stream: true`).
"""

from __future__ import annotations

from switch.protocols.ir import (
    Part,
    ReasoningPart,
    Response,
    StreamSink,
    TextPart,
    ToolCallPart,
)
from switch.protocols.outbox import Reported


class ResponseCollector(Reported):
    """Accumulates stream events into one response, keeping the order parts began in."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[tuple[str, list[str], int]] = []
        self._calls: dict[int, tuple[str, str, list[str]]] = {}

    def _append(self, kind: str, text: str) -> None:
        if self._parts and self._parts[-1][0] == kind:
            self._parts[-1][1].append(text)
        else:
            self._parts.append((kind, [text], -1))

    def reasoning_delta(self, text: str) -> None:
        self._append("reasoning", text)

    def text_delta(self, text: str) -> None:
        self._append("text", text)

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        self._calls[index] = (call_id, name, [])
        self._parts.append(("tool", [], index))

    def tool_call_delta(self, index: int, fragment: str) -> None:
        if index in self._calls:
            self._calls[index][2].append(fragment)

    def response(self, response_id: str, model: str) -> Response:
        """The assembled response."""
        parts: list[Part] = []
        for kind, texts, index in self._parts:
            if kind == "reasoning":
                parts.append(ReasoningPart("".join(texts)))
            elif kind == "text":
                parts.append(TextPart("".join(texts)))
            else:
                call_id, name, fragments = self._calls[index]
                parts.append(ToolCallPart(call_id, name, "".join(fragments)))
        return Response(
            response_id, model, tuple(parts), self.stop_reason or "end_turn", self.final_usage, self.stop_sequence
        )


def replay(response: Response, sink: StreamSink) -> None:
    """Emit a complete response as stream events."""
    tool_index = 0
    for part in response.parts:
        if isinstance(part, ReasoningPart):
            sink.reasoning_delta(part.text)
        elif isinstance(part, TextPart):
            sink.text_delta(part.text)
        elif isinstance(part, ToolCallPart):
            sink.tool_call_start(tool_index, part.call_id, part.name)
            sink.tool_call_delta(tool_index, part.arguments)
            tool_index += 1
    sink.usage(response.usage)
    sink.finish(response.stop_reason, response.stop_sequence)
