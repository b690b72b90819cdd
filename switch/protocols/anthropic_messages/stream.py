"""Anthropic Messages streams: upstream SSE → IR (`StreamDecoder`), IR → client SSE (`StreamEncoder`).

The encoder is an explicit state machine. It holds one `BlockState`; `_TRANSITIONS` says, for each
state and each kind of incoming content, whether the open block continues or is closed and a new
one opened. Output is appended to `self.out` (bytes) for the relay to send once per upstream chunk.

Grammar kept (what the Anthropic SDK and Claude Code enforce): exactly one `message_start` first;
block indices contiguous from 0; every delta belongs to the open block and matches its type; a
thinking block gets its `signature_delta` right before it stops; `message_delta` carries the final
stop reason and the full usage (with `input_tokens` > 0 when known, since Claude Code keeps the
`message_start` figure otherwise); `message_stop` last. Every event has its `event:` line.
"""

from __future__ import annotations

from enum import Enum

import orjson

from switch.protocols.anthropic_messages.errors import error_event
from switch.protocols.anthropic_messages.inbound import usage_to_wire
from switch.protocols.anthropic_messages.outbound import stop_reason_to_ir, usage_to_ir
from switch.protocols.carry import client_tool_id, encode_reasoning
from switch.protocols.ir import StopReason, StreamSink, UpstreamFormatError, UpstreamReportedError, Usage
from switch.protocols.outbox import Outbox
from switch.protocols.tools import ToolIndex
from switch.protocols.wire import array_index, label, malformed, name, obj, optional_text, text

_dumps = orjson.dumps


# Which deltas belong in which kind of content block.
_DELTA_BLOCKS = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
}


class StreamDecoder:
    """Feeds an Anthropic upstream's SSE events into a `StreamSink`.

    Block starts are remembered by index so a delta for a block never started, or of the wrong
    kind for its block, is caught as the format error it is.
    """

    def __init__(self, sink: StreamSink, index: ToolIndex) -> None:
        self.sink = sink
        self.index = index
        self.done = False
        self.finished = False
        self.upstream_id: str | None = None
        self.upstream_model: str | None = None
        self._usage = Usage()
        self._blocks: dict[int, str] = {}

    def feed(self, data: bytes) -> None:
        """Decode one `data:` payload."""
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError("upstream sent a malformed stream event") from exc
        if type(event) is not dict:
            raise UpstreamFormatError("upstream sent a stream event that is not an object")
        kind = event.get("type")
        sink = self.sink
        if kind == "content_block_delta":
            block_index = event.get("index")
            delta = event.get("delta")
            if type(delta) is not dict:
                raise malformed("content_block_delta.delta", "an object")
            if type(block_index) is not int:
                raise malformed("content_block_delta.index", "an integer")
            delta_kind = delta.get("type")
            block_kind = self._blocks.get(block_index)
            expected = _DELTA_BLOCKS.get(delta_kind) if type(delta_kind) is str else None
            if block_kind is None or (expected is not None and expected != block_kind):
                raise UpstreamFormatError(
                    f"upstream sent a {str(delta_kind)[:40]} for content block {block_index}, "
                    "which is not an open block of that kind"
                )
            if delta_kind == "text_delta":
                sink.text_delta(text(delta.get("text"), "text_delta.text"))
            elif delta_kind == "thinking_delta":
                sink.reasoning_delta(text(delta.get("thinking"), "thinking_delta.thinking"))
            elif delta_kind == "input_json_delta":
                sink.tool_call_delta(block_index, text(delta.get("partial_json"), "input_json_delta.partial_json"))
        elif kind == "content_block_start":
            block_index = array_index(event.get("index"), "content_block_start.index")
            block = obj(event.get("content_block"), "content_block_start.content_block")
            block_kind = block.get("type")
            self._blocks[block_index] = block_kind if type(block_kind) is str else ""
            if block_kind == "tool_use":
                tool_name = self.index.caller_name(name(block.get("name"), "content_block_start.content_block.name"))
                call_id = text(block.get("id"), "content_block_start.content_block.id") or f"toolu_{block_index}"
                sink.tool_call_start(block_index, call_id, tool_name)
        elif kind == "content_block_stop":
            if type(event.get("index")) is int:
                self._blocks.pop(event["index"], None)
        elif kind == "message_start":
            message = obj(event.get("message"), "message_start.message")
            self.upstream_id = label(message.get("id"))
            self.upstream_model = label(message.get("model"))
            usage = message.get("usage")
            if type(usage) is dict:
                self._usage = usage_to_ir(usage)
        elif kind == "message_delta":
            delta = obj(event.get("delta"), "message_delta.delta")
            stop_reason = optional_text(delta.get("stop_reason"), "message_delta.delta.stop_reason")
            stop_sequence = optional_text(delta.get("stop_sequence"), "message_delta.delta.stop_sequence")
            usage = event.get("usage")
            if type(usage) is dict:
                update = usage_to_ir(usage)
                merged = Usage(
                    update.input_tokens or self._usage.input_tokens,
                    update.cache_read_tokens or self._usage.cache_read_tokens,
                    update.cache_write_tokens or self._usage.cache_write_tokens,
                    update.output_tokens,
                )
                self._usage = merged
                sink.usage(merged)
            sink.finish(stop_reason_to_ir(stop_reason), stop_sequence)
            self.finished = True
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            reported = event.get("error")
            said = reported.get("message") if type(reported) is dict else None
            raise UpstreamReportedError(str(said or "upstream reported an error"))


class BlockState(Enum):
    """What the encoder has open."""

    IDLE = "idle"  # message_start not yet sent
    NONE = "none"  # between blocks
    THINKING = "thinking"
    TEXT = "text"
    TOOL = "tool"
    DONE = "done"


# (state, incoming) → True when the open block continues, False when it must close first.
_TRANSITIONS: dict[tuple[BlockState, BlockState], bool] = {
    (BlockState.THINKING, BlockState.THINKING): True,
    (BlockState.TEXT, BlockState.TEXT): True,
}

_DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_PING = b'event: ping\ndata: {"type":"ping"}\n\n'
_DELTA_KIND = {
    BlockState.THINKING: b',"delta":{"type":"thinking_delta","thinking":',
    BlockState.TEXT: b',"delta":{"type":"text_delta","text":',
    BlockState.TOOL: b',"delta":{"type":"input_json_delta","partial_json":',
}
_SKELETON = {
    BlockState.THINKING: b'{"type":"thinking","thinking":"","signature":""}',
    BlockState.TEXT: b'{"type":"text","text":""}',
}


def _is_tool_input(arguments: str) -> bool:
    """Whether streamed tool arguments make a `tool_use` input (an object; nothing reads as `{}`)."""
    if not arguments.strip():
        return True
    try:
        return type(orjson.loads(arguments)) is dict
    except orjson.JSONDecodeError:
        return False


class StreamEncoder(Outbox):
    """Encodes one response stream for an Anthropic client."""

    def __init__(self, message_id: str, model: str, input_estimate: int) -> None:
        super().__init__()
        self.state = BlockState.IDLE
        self.message_id = message_id
        self.model = model
        self.input_estimate = input_estimate
        self._index = -1
        self._block_reasoning: list[str] = []
        self._tool_json: list[str] = []
        self._tool_index_to_block: dict[int, int] = {}
        self._open_tool: int | None = None
        self._delta_prefix = b""

    @property
    def content_started(self) -> bool:
        """Whether any content block has been emitted (the first token reached the client)."""
        return self._index >= 0

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self, usage: Usage | None = None) -> None:
        """Emit `message_start` (idempotent); `usage` is used when the upstream gave it early."""
        if self.state is not BlockState.IDLE:
            return
        if usage is None and self.usage_seen:
            usage = self.final_usage
        start_usage = (
            usage_to_wire(usage)
            if usage
            else {
                "input_tokens": self.input_estimate,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 0,
            }
        )
        if usage:
            self.final_usage = usage
            self.usage_seen = True
        message: dict[str, object] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        self.out.append(
            b"event: message_start\ndata: " + _dumps({"type": "message_start", "message": message}) + b"\n\n"
        )
        self.state = BlockState.NONE

    def ping(self) -> bytes:
        """A keep-alive event (only valid once the message has started)."""
        return _PING if self.state not in (BlockState.IDLE, BlockState.DONE) else b""

    def end(self) -> None:
        """Close the open block and finish the message with stop reason and usage."""
        self.start()
        self._close()
        has_tools = bool(self.tool_call_ids)
        stop_reason: StopReason = self.stop_reason or "end_turn"
        if has_tools and stop_reason == "end_turn":
            stop_reason = "tool_use"
        elif not has_tools and stop_reason == "tool_use":
            stop_reason = "end_turn"
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": self.stop_sequence},
            "usage": usage_to_wire(self.final_usage),
        }
        self.out.append(b"event: message_delta\ndata: " + _dumps(delta) + b"\n\n")
        self.out.append(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        self.state = BlockState.DONE

    def fail(self, status: int, message: str) -> None:
        """Report an upstream failure in-band; the stream ends after it."""
        self.start()
        if self.state is BlockState.TOOL and not _is_tool_input("".join(self._tool_json)):
            self.state = BlockState.NONE  # stopping it would hand the client arguments it cannot parse
        self._close()
        self.out.append(error_event(status, message))
        self.state = BlockState.DONE

    # ---- StreamSink ----------------------------------------------------------------------------

    def reasoning_delta(self, text: str) -> None:
        """Continue or open a thinking block."""
        if not text:
            return
        if self.state is not BlockState.THINKING:
            self._enter(BlockState.THINKING)
        self._block_reasoning.append(text)
        self.reasoning_chunks.append(text)
        self.emitted_chars += len(text)
        self.out.append(self._delta_prefix + _dumps(text) + b"}}\n\n")

    def text_delta(self, text: str) -> None:
        """Continue or open a text block."""
        if not text:
            return
        if self.state is not BlockState.TEXT:
            self._enter(BlockState.TEXT)
        self.emitted_chars += len(text)
        self.out.append(self._delta_prefix + _dumps(text) + b"}}\n\n")

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        """Open a tool_use block."""
        self._enter(BlockState.TOOL, force_new=True)
        self._tool_index_to_block[index] = self._index
        self._open_tool = index
        self.tool_call_ids.append(call_id)
        block = {"type": "tool_use", "id": client_tool_id(call_id), "name": name, "input": {}}
        self.out.append(
            b"event: content_block_start\ndata: "
            + _dumps({"type": "content_block_start", "index": self._index, "content_block": block})
            + b"\n\n"
        )

    def tool_call_delta(self, index: int, fragment: str) -> None:
        """Stream a fragment of the open tool call's JSON arguments."""
        if not fragment:
            return
        if index != self._open_tool or self.state is not BlockState.TOOL:
            raise UpstreamFormatError(f"upstream interleaved arguments for tool call {index} after it ended")
        self.emitted_chars += len(fragment)
        self._tool_json.append(fragment)
        self.out.append(self._delta_prefix + _dumps(fragment) + b"}}\n\n")

    # ---- blocks --------------------------------------------------------------------------------

    def _enter(self, kind: BlockState, force_new: bool = False) -> None:
        if self.state is BlockState.IDLE:
            self.start()
        if not force_new and _TRANSITIONS.get((self.state, kind), False):
            return
        self._close()
        self._index += 1
        self.state = kind
        index = str(self._index).encode()
        # Each block's deltas share one prefix, built once here rather than per delta.
        self._delta_prefix = _DELTA_HEAD + index + _DELTA_KIND[kind]
        if kind is BlockState.TOOL:
            return  # tool_use blocks are opened by tool_call_start with their id and name
        self.out.append(
            b'event: content_block_start\ndata: {"type":"content_block_start","index":'
            + index
            + b',"content_block":'
            + _SKELETON[kind]
            + b"}\n\n"
        )

    def _close(self) -> None:
        state = self.state
        if state in (BlockState.IDLE, BlockState.NONE, BlockState.DONE):
            return
        index = str(self._index).encode()
        if state is BlockState.THINKING:
            signature = encode_reasoning("".join(self._block_reasoning))
            self._block_reasoning = []
            self.out.append(
                _DELTA_HEAD + index + b',"delta":{"type":"signature_delta","signature":' + _dumps(signature) + b"}}\n\n"
            )
        elif state is BlockState.TOOL:
            arguments = "".join(self._tool_json)
            if not _is_tool_input(arguments):
                # Clients parse the joined fragments at the block's stop; they must make an object.
                raise UpstreamFormatError("upstream sent tool-call arguments that are not a JSON object")
            self._tool_json = []
            self._open_tool = None
        self.out.append(b'event: content_block_stop\ndata: {"type":"content_block_stop","index":' + index + b"}\n\n")
        self.state = BlockState.NONE
