"""Responses streams: upstream SSE → IR (`StreamDecoder`), IR → client SSE (`StreamEncoder`).

`StreamEncoder` is an explicit state machine over `ItemState` (one output item open at a time)
emitting the full documented event sequence with increasing `sequence_number`: lifecycle events,
`output_item.added`/`done` for every item, content parts, text, reasoning-summary, function-call
and custom-tool deltas, and a terminal `response.completed` / `response.incomplete` /
`response.failed` carrying usage. Codex records the `output_item.done` items and needs
`response.completed`; the SDK's typed stream needs the rest.

`StreamDecoder` reads a Responses upstream's events into a `StreamSink`.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

import orjson

from switch.protocols.ir import (
    Request,
    StopReason,
    StreamSink,
    ToolCallPart,
    UpstreamFormatError,
    UpstreamReportedError,
)
from switch.protocols.openai_responses.errors import failure_code
from switch.protocols.openai_responses.items import call_item, message_item, reasoning_item, response_object, status_of
from switch.protocols.openai_responses.outbound import usage_to_ir
from switch.protocols.outbox import Outbox
from switch.protocols.tools import ToolIndex, flat_name
from switch.protocols.wire import array_index, label, name, obj, optional_text, text

_dumps = orjson.dumps


class ItemState(Enum):
    """What the encoder has open."""

    IDLE = "idle"
    NONE = "none"
    REASONING = "reasoning"
    TEXT = "text"
    TOOL = "tool"
    DONE = "done"


_CONTINUES: frozenset[ItemState] = frozenset({ItemState.REASONING, ItemState.TEXT})


class StreamEncoder(Outbox):
    """Encodes one response stream for a Responses client."""

    def __init__(self, response_id: str, request: Request, next_id: Callable[[], str], created_at: int) -> None:
        super().__init__()
        self.state = ItemState.IDLE
        self.response_id = response_id
        self.request = request
        self.index = ToolIndex.of(request.tools)
        self.created_at = created_at
        self.output: list[dict[str, Any]] = []
        self._next_id = next_id
        self._seq = 0
        self._item_id = ""
        self._texts: list[str] = []
        self._delta_head = b""
        self._delta_tail = b""
        self._call: tuple[str, str, bool] | None = None  # call_id, name, custom

    @property
    def content_started(self) -> bool:
        """Whether an output item has been opened."""
        return bool(self.output) or self.state in (ItemState.REASONING, ItemState.TEXT, ItemState.TOOL)

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        self._seq += 1
        body = {"type": kind, "sequence_number": self._seq, **payload}
        self.out.append(b"event: " + kind.encode() + b"\ndata: " + _dumps(body) + b"\n\n")

    def _delta(self, text: str) -> None:
        self._seq += 1
        self.emitted_chars += len(text)
        self.out.append(self._delta_head + str(self._seq).encode() + self._delta_mid + _dumps(text) + self._delta_tail)

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Emit `response.created` and `response.in_progress` (idempotent)."""
        if self.state is not ItemState.IDLE:
            return
        snapshot = response_object(self.response_id, self.request, [], "in_progress", None, self.created_at)
        self._emit("response.created", {"response": snapshot})
        self._emit("response.in_progress", {"response": snapshot})
        self.state = ItemState.NONE

    def ping(self) -> bytes:
        """An SSE comment: Responses has no ping event, and parsers skip comments."""
        return b": keep-alive\n\n"

    def end(self) -> None:
        """Close the open item and send the terminal event with usage."""
        self.start()
        self._close()
        stop = self.stop_reason or ("tool_use" if self.tool_call_ids else "end_turn")
        status, reason = status_of(stop)
        final = response_object(
            self.response_id, self.request, self.output, status, self.final_usage, self.created_at, reason
        )
        self._emit("response.completed" if status == "completed" else "response.incomplete", {"response": final})
        self.state = ItemState.DONE

    def fail(self, status: int, message: str) -> None:
        """Report a failure as `response.failed`; the stream ends after it."""
        self.start()
        self._close()
        error = {"code": failure_code(status, message), "message": message}
        failed = response_object(
            self.response_id,
            self.request,
            self.output,
            "failed",
            self.final_usage,
            self.created_at,
            error=error,
        )
        self._emit("response.failed", {"response": failed})
        self.state = ItemState.DONE

    # ---- StreamSink ----------------------------------------------------------------------------

    def reasoning_delta(self, text: str) -> None:
        """Continue or open a reasoning item (shown as its summary)."""
        if not text:
            return
        if self.state is not ItemState.REASONING:
            self._open(ItemState.REASONING)
        self._texts.append(text)
        self.reasoning_chunks.append(text)
        self._delta(text)

    def text_delta(self, text: str) -> None:
        """Continue or open an assistant message item."""
        if not text:
            return
        if self.state is not ItemState.TEXT:
            self._open(ItemState.TEXT)
        self._texts.append(text)
        self._delta(text)

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        """Open a function_call or custom_tool_call item."""
        self.tool_call_ids.append(call_id)
        self._open(ItemState.TOOL, (call_id, name, name in self.index.custom))

    def tool_call_delta(self, index: int, fragment: str) -> None:
        """Stream argument (or custom input) text of the open call."""
        if fragment and self.state is ItemState.TOOL:
            self._texts.append(fragment)
            self._delta(fragment)

    # ---- items ---------------------------------------------------------------------------------

    def _open(self, kind: ItemState, call: tuple[str, str, bool] | None = None) -> None:
        self.start()
        self._close()
        self._call = call
        self.state = kind
        self._texts = []
        output_index = len(self.output)
        position = b',"output_index":' + str(output_index).encode()
        if kind is ItemState.REASONING:
            self._item_id = "rs_" + self._next_id()
            self._emit(
                "response.output_item.added",
                {
                    "output_index": output_index,
                    "item": {"id": self._item_id, "type": "reasoning", "summary": []},
                },
            )
            self._emit(
                "response.reasoning_summary_part.added",
                {
                    "item_id": self._item_id,
                    "output_index": output_index,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                },
            )
            self._set_delta("response.reasoning_summary_text.delta", position + b',"summary_index":0', b"}\n\n")
        elif kind is ItemState.TEXT:
            self._item_id = "msg_" + self._next_id()
            item = {
                "id": self._item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            self._emit("response.output_item.added", {"output_index": output_index, "item": item})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            self._emit(
                "response.content_part.added",
                {"item_id": self._item_id, "output_index": output_index, "content_index": 0, "part": part},
            )
            self._set_delta("response.output_text.delta", position + b',"content_index":0', b',"logprobs":[]}\n\n')
        else:
            assert self._call is not None
            call_id, name, custom = self._call
            self._item_id = ("ctc_" if custom else "fc_") + self._next_id()
            skeleton = ToolCallPart(call_id, name, "", "custom" if custom else "function")
            self._emit(
                "response.output_item.added",
                {
                    "output_index": output_index,
                    "item": call_item(self._item_id, skeleton, self.index, "in_progress"),
                },
            )
            kind_name = "response.custom_tool_call_input.delta" if custom else "response.function_call_arguments.delta"
            self._set_delta(kind_name, position, b"}\n\n")

    def _set_delta(self, kind: str, position: bytes, tail: bytes) -> None:
        self._delta_head = b"event: " + kind.encode() + b'\ndata: {"type":"' + kind.encode() + b'","sequence_number":'
        self._delta_mid = b',"item_id":' + _dumps(self._item_id) + position + b',"delta":'
        self._delta_tail = tail

    def _close(self) -> None:
        state = self.state
        if state not in (ItemState.REASONING, ItemState.TEXT, ItemState.TOOL):
            return
        text = "".join(self._texts)
        output_index = len(self.output)
        item_id = self._item_id
        if state is ItemState.REASONING:
            base = {"item_id": item_id, "output_index": output_index, "summary_index": 0}
            self._emit("response.reasoning_summary_text.done", {**base, "text": text})
            self._emit(
                "response.reasoning_summary_part.done",
                {**base, "part": {"type": "summary_text", "text": text}},
            )
            item = reasoning_item(item_id, text)
        elif state is ItemState.TEXT:
            base = {"item_id": item_id, "output_index": output_index, "content_index": 0}
            self._emit("response.output_text.done", {**base, "text": text, "logprobs": []})
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            self._emit("response.content_part.done", {**base, "part": part})
            item = message_item(item_id, text)
        else:
            assert self._call is not None
            call_id, name, custom = self._call
            call = ToolCallPart(call_id, name, text, "custom" if custom else "function")
            item = call_item(item_id, call, self.index)
            base = {"item_id": item_id, "output_index": output_index}
            if custom:
                self._emit("response.custom_tool_call_input.done", {**base, "input": text})
            else:
                self._emit("response.function_call_arguments.done", {**base, "name": item["name"], "arguments": text})
            self._call = None
        self._emit("response.output_item.done", {"output_index": output_index, "item": item})
        self.output.append(item)
        self.state = ItemState.NONE
        self._texts = []

    _delta_mid = b""


class StreamDecoder:
    """Feeds a Responses upstream's SSE events into a `StreamSink`.

    Argument deltas must belong to a call item already added; anything of the wrong type raises
    `UpstreamFormatError`.
    """

    def __init__(self, sink: StreamSink, index: ToolIndex) -> None:
        self.sink = sink
        self.index = index
        self.done = False
        self.finished = False
        self.upstream_id: str | None = None
        self.upstream_model: str | None = None
        self._calls: dict[int, bool] = {}  # output_index → arguments streamed as deltas
        self._has_calls = False

    def feed(self, data: bytes) -> None:
        """Decode one `data:` payload."""
        if data == b"[DONE]":
            self.done = True
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("upstream sent a malformed stream event") from exc
        if type(event) is not dict:
            raise UpstreamFormatError("upstream sent a stream event that is not an object")
        kind = event.get("type")
        sink = self.sink
        if kind == "response.output_text.delta":
            sink.text_delta(text(event.get("delta"), "response.output_text.delta.delta"))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            sink.reasoning_delta(text(event.get("delta"), f"{kind}.delta"))
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            output_index = array_index(event.get("output_index"), f"{kind}.output_index")
            if output_index not in self._calls:
                raise UpstreamFormatError(f"upstream sent {kind} for output item {output_index}, which is not a call")
            self._calls[output_index] = True
            sink.tool_call_delta(output_index, text(event.get("delta"), f"{kind}.delta"))
        elif kind == "response.output_item.added":
            item = obj(event.get("item"), "response.output_item.added.item")
            if item.get("type") in ("function_call", "custom_tool_call"):
                where = "response.output_item.added.item"
                output_index = array_index(event.get("output_index"), "response.output_item.added.output_index")
                namespace = optional_text(item.get("namespace"), where + ".namespace")
                tool_name = flat_name(namespace, name(item.get("name"), where + ".name"))
                call_id = text(item.get("call_id"), where + ".call_id") or f"call_{output_index}"
                self._calls[output_index] = False
                self._has_calls = True
                sink.tool_call_start(output_index, call_id, self.index.caller_name(tool_name))
        elif kind in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            output_index = array_index(event.get("output_index"), f"{kind}.output_index")
            if not self._calls.get(output_index, True):
                # Some backends send arguments only in the final event.
                field = "arguments" if "arguments" in event else "input"
                sink.tool_call_delta(output_index, text(event.get(field), f"{kind}.{field}"))
                self._calls[output_index] = True
        elif kind == "response.created":
            response = obj(event.get("response"), "response.created.response")
            self.upstream_id = label(response.get("id"))
            self.upstream_model = label(response.get("model"))
        elif kind in ("response.completed", "response.incomplete"):
            response = obj(event.get("response"), f"{kind}.response")
            usage = response.get("usage")
            if type(usage) is dict:
                sink.usage(usage_to_ir(usage))
            stop: StopReason = "tool_use" if self._has_calls else "end_turn"
            if kind == "response.incomplete":
                details = obj(response.get("incomplete_details"), "response.incomplete.response.incomplete_details")
                stop = "refusal" if details.get("reason") == "content_filter" else "max_tokens"
            sink.finish(stop)
            self.finished = True
            self.done = True
        elif kind in ("response.failed", "error"):
            failed = event.get("response")
            reported = failed.get("error") if type(failed) is dict else None
            if type(reported) is not dict:
                reported = event.get("error")
            if type(reported) is not dict:
                reported = event
            message = reported.get("message")
            raise UpstreamReportedError(str(message or "upstream reported a failure"))
