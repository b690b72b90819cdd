"""OpenAI Chat Completions SSE → IR stream events.

Tool calls stream by `index`: the first fragment of an index carries the id and name, later ones
only argument text; several indices may share a chunk. The usage chunk arrives *after* the chunk
with `finish_reason`, so the decoder keeps reading until `[DONE]` or the end of the body.
"""

from __future__ import annotations

from typing import Any

import orjson

from switch.errors import UpstreamError
from switch.protocols.ir import StreamSink
from switch.protocols.openai_chat.response import reasoning_of, stop_reason_to_ir, usage_to_ir
from switch.protocols.tools import ToolIndex


class StreamDecoder:
    """Feeds parsed chat chunks into a `StreamSink`."""

    __slots__ = ("sink", "index", "done", "finished", "_started", "upstream_id", "upstream_model")

    def __init__(self, sink: StreamSink, index: ToolIndex) -> None:
        self.sink = sink
        self.index = index
        self.done = False
        self.finished = False
        self._started: set[int] = set()
        self.upstream_id: str | None = None
        self.upstream_model: str | None = None

    def feed(self, data: bytes) -> None:
        """Decode one `data:` payload."""
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError("upstream sent a malformed stream chunk", kind="protocol") from exc
        if not isinstance(chunk, dict):
            raise UpstreamError("upstream sent a malformed stream chunk", kind="protocol")
        self.feed_chunk(chunk)

    def feed_chunk(self, chunk: dict[str, Any]) -> None:
        """Decode one parsed chunk."""
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise UpstreamError(str(message or "upstream reported an error"), kind="in_band")
        if self.upstream_id is None:
            self.upstream_id = chunk.get("id")
            self.upstream_model = chunk.get("model")
        sink = self.sink
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                if len(delta) == 1 and "content" in delta:
                    content = delta["content"]  # the usual token chunk: nothing else to look for
                    if content:
                        sink.text_delta(content)
                else:
                    reasoning = reasoning_of(delta)
                    if reasoning:
                        sink.reasoning_delta(reasoning)
                    content = delta.get("content")
                    if content:
                        sink.text_delta(content)
                    calls = delta.get("tool_calls")
                    if calls:
                        self._tool_calls(calls)
            finish_reason = choice.get("finish_reason")
            if finish_reason:
                self.finished = True
                stop = choice.get("stop_reason")
                sink.finish(stop_reason_to_ir(finish_reason, stop), stop if isinstance(stop, str) else None)
        usage = chunk.get("usage")
        if usage:
            sink.usage(usage_to_ir(usage))

    def _tool_calls(self, calls: list[dict[str, Any]]) -> None:
        sink = self.sink
        for position, call in enumerate(calls):
            index = call.get("index", position)
            function = call.get("function") or {}
            if index not in self._started:
                name = str(function.get("name") or "")
                self._started.add(index)
                sink.tool_call_start(index, str(call.get("id") or f"call_{index}"), self.index.caller_name(name))
            arguments = function.get("arguments")
            if arguments:
                sink.tool_call_delta(index, arguments)
