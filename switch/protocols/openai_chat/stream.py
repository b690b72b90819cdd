"""OpenAI Chat Completions SSE → IR stream events.

Tool calls stream by `index`: the first fragment of an index carries the id and name, later ones
only argument text; several indices may share a chunk. The usage chunk arrives *after* the chunk
with `finish_reason`, so the decoder keeps reading until `[DONE]` or the end of the body.

Every field read is type-checked on the way (see `wire`); a chunk of the wrong shape raises
`UpstreamFormatError`.
"""

from __future__ import annotations

from typing import Any

import orjson

from switch.errors import UpstreamError
from switch.protocols.ir import StreamSink
from switch.protocols.openai_chat.response import stop_reason_to_ir, usage_to_ir
from switch.protocols.tools import ToolIndex
from switch.protocols.wire import (
    UpstreamFormatError,
    array,
    array_index,
    label,
    malformed,
    name,
    obj,
    optional_text,
    text,
)


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
            raise UpstreamFormatError("upstream sent a malformed stream chunk") from exc
        if type(chunk) is not dict:
            raise UpstreamFormatError("upstream sent a stream chunk that is not an object")
        self.feed_chunk(chunk)

    def feed_chunk(self, chunk: dict[str, Any]) -> None:
        """Decode one parsed chunk."""
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if type(error) is dict else error
            raise UpstreamError(str(message or "upstream reported an error"), kind="in_band")
        if self.upstream_id is None:
            self.upstream_id = label(chunk.get("id"))
            self.upstream_model = label(chunk.get("model"))
        sink = self.sink
        choices = chunk.get("choices")
        if choices:
            if type(choices) is not list:
                raise malformed("choices", "an array")
            choice = choices[0]
            if type(choice) is not dict:
                raise malformed("choices[0]", "an object")
            delta = choice.get("delta")
            if delta:
                if type(delta) is not dict:
                    raise malformed("choices[0].delta", "an object")
                content = delta.get("content")
                if len(delta) == 1 and type(content) is str:
                    if content:  # the usual token chunk: nothing else to look for
                        sink.text_delta(content)
                else:
                    reasoning = delta.get("reasoning_content")
                    if reasoning is None:
                        reasoning = delta.get("reasoning")
                    if reasoning:
                        sink.reasoning_delta(text(reasoning, "choices[0].delta.reasoning_content"))
                    if content:
                        sink.text_delta(text(content, "choices[0].delta.content"))
                    calls = delta.get("tool_calls")
                    if calls:
                        self._tool_calls(array(calls, "choices[0].delta.tool_calls"))
            finish_reason = choice.get("finish_reason")
            if finish_reason:
                stop = choice.get("stop_reason")
                stop_reason = stop_reason_to_ir(text(finish_reason, "choices[0].finish_reason"), stop)
                self.finished = True
                sink.finish(stop_reason, stop if type(stop) is str else None)
        usage = chunk.get("usage")
        if type(usage) is dict:
            sink.usage(usage_to_ir(usage))

    def _tool_calls(self, calls: list[Any]) -> None:
        sink = self.sink
        for position_in_chunk, call in enumerate(calls):
            where = f"choices[0].delta.tool_calls[{position_in_chunk}]"
            if type(call) is not dict:
                raise malformed(where, "an object")
            index = array_index(call.get("index"), where + ".index", position_in_chunk)
            function = obj(call.get("function"), where + ".function")
            arguments = text(function.get("arguments"), where + ".function.arguments")
            if index not in self._started:
                tool_name = name(function.get("name"), where + ".function.name")
                call_id = optional_text(call.get("id"), where + ".id") or f"call_{index}"
                self._started.add(index)
                sink.tool_call_start(index, call_id, self.index.caller_name(tool_name))
            if arguments:
                sink.tool_call_delta(index, arguments)
