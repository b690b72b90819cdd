"""Chat Completions streams: upstream chunks → IR (`StreamDecoder`), IR → client chunks (`StreamEncoder`).

Tool calls stream by `index`: the first fragment of an index carries the id and name, later ones
only argument text; several indices may share a chunk. The usage chunk arrives *after* the chunk
with `finish_reason`, so the decoder keeps reading until `[DONE]` or the end of the body.

Every field read is type-checked on the way (see `wire`); a chunk of the wrong shape raises
`UpstreamFormatError`.
"""

from __future__ import annotations

from typing import Any

import orjson

from switch.protocols.ir import Request, StopReason, StreamSink, UpstreamFormatError, UpstreamReportedError
from switch.protocols.openai_chat.inbound import FINISH_REASONS, usage_to_wire
from switch.protocols.openai_chat.outbound import stop_reason_to_ir, usage_to_ir
from switch.protocols.outbox import Outbox
from switch.protocols.tools import ToolIndex
from switch.protocols.wire import (
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
            raise UpstreamReportedError(str(message or "upstream reported an error"))
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


_dumps = orjson.dumps


class StreamEncoder(Outbox):
    """Encodes one response stream as chat completion chunks (`data:` lines, `[DONE]` last)."""

    def __init__(self, completion_id: str, request: Request, created: int) -> None:
        super().__init__()
        self.request = request
        self.include_usage = bool(request.provider_data.get("include_usage"))
        self._started = False
        self._done = False
        self._tool_positions: dict[int, int] = {}
        head = _dumps(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": request.model,
            }
        )
        self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,"delta":'
        self._usage_head = b"data: " + head[:-1] + b',"choices":[],"usage":'

    @property
    def content_started(self) -> bool:
        """Whether a content chunk has been sent."""
        return self._started

    def start(self) -> None:
        """Nothing to announce: chat streams begin with their first chunk."""

    def ping(self) -> bytes:
        """An SSE comment (chat has no ping chunk)."""
        return b": keep-alive\n\n"

    def _chunk(self, delta: bytes, finish: bytes = b"null") -> None:
        # `emitted_chars` counts the text the caller gets (its callers add it), never the framing: the
        # output estimate of a stream whose upstream reports no usage is made from it.
        if not self._started:
            self._started = True
            self.out.append(self._head + b'{"role":"assistant","content":""},"finish_reason":null}]}\n\n')
        self.out.append(self._head + delta + b',"finish_reason":' + finish + b"}]}\n\n")

    def reasoning_delta(self, text: str) -> None:
        if text:
            self.reasoning_chunks.append(text)
            self.emitted_chars += len(text)
            self._chunk(b'{"reasoning_content":' + _dumps(text) + b"}")

    def text_delta(self, text: str) -> None:
        if text:
            self.emitted_chars += len(text)
            self._chunk(b'{"content":' + _dumps(text) + b"}")

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        position = len(self._tool_positions)
        self._tool_positions[index] = position
        self.tool_call_ids.append(call_id)
        call = {
            "index": position,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        self._chunk(b'{"tool_calls":[' + _dumps(call) + b"]}")

    def tool_call_delta(self, index: int, fragment: str) -> None:
        if fragment:
            self.emitted_chars += len(fragment)
            position = self._tool_positions.get(index, 0)
            self._chunk(
                b'{"tool_calls":[{"index":'
                + str(position).encode()
                + b',"function":{"arguments":'
                + _dumps(fragment)
                + b"}}]}"
            )

    def end(self) -> None:
        """The finish chunk, the usage chunk when the client asked for it, and `[DONE]`."""
        if self._done:
            return
        stop: StopReason = self.stop_reason or "end_turn"
        if self.tool_call_ids and stop == "end_turn":
            stop = "tool_use"
        elif not self.tool_call_ids and stop == "tool_use":
            stop = "end_turn"
        self._chunk(b"{}", b'"' + FINISH_REASONS[stop].encode() + b'"')
        if self.include_usage:
            self.out.append(self._usage_head + _dumps(usage_to_wire(self.final_usage)) + b"}\n\n")
        self.out.append(b"data: [DONE]\n\n")
        self._done = True

    def fail(self, status: int, message: str) -> None:
        """An error object in the stream (what OpenAI sends on a mid-stream failure), then `[DONE]`."""
        if self._done:
            return
        kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
        self.out.append(
            b"data: " + _dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}) + b"\n\n"
        )
        self.out.append(b"data: [DONE]\n\n")
        self._done = True
