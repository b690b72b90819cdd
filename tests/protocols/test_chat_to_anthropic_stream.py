"""Chat upstream stream → Anthropic client stream, checked against the client grammar."""

from __future__ import annotations

import orjson
import pytest

from switch.protocols.anthropic_messages.stream import StreamEncoder
from switch.protocols.carry import decode_reasoning, upstream_tool_id
from switch.protocols.ir import UpstreamFormatError
from switch.protocols.openai_chat.stream import StreamDecoder
from switch.protocols.sse import SseDecoder
from switch.protocols.tools import ToolIndex
from tests.anthropic_grammar import assert_valid_anthropic_stream, parse_events


def chunk(delta: dict[str, object] | None = None, finish: str | None = None, usage: object = None) -> bytes:
    body: dict[str, object] = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage is not None:
        body = {"choices": [], "usage": usage}
    return b"data: " + orjson.dumps(body) + b"\n\n"


UPSTREAM = b"".join(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Thinking über "}),
        chunk({"reasoning": "café"}),
        chunk({"content": "Result: 😀"}),
        chunk({"tool_calls": [{"index": 0, "id": "functions.Bash:0", "function": {"name": "Bash", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls é"}'}}]}),
        chunk(
            {"tool_calls": [{"index": 1, "id": "functions.Read:1", "function": {"name": "Read", "arguments": "{}"}}]}
        ),
        chunk({}, "tool_calls"),
        chunk(
            usage={
                "prompt_tokens": 90,
                "completion_tokens": 15,
                "prompt_tokens_details": {"cached_tokens": 30},
            }
        ),
        b"data: [DONE]\n\n",
    ]
)


def translate(pieces: list[bytes]) -> bytes:
    encoder = StreamEncoder("msg_test", "claude-test", 42)
    decoder = StreamDecoder(encoder, ToolIndex())
    sse = SseDecoder()
    output = []
    for piece in pieces:
        for event in sse.feed(piece):
            decoder.feed(event.data)
        output.append(encoder.take())
    for event in sse.flush():
        decoder.feed(event.data)
    assert decoder.done
    encoder.end()
    output.append(encoder.take())
    return b"".join(output)


def test_full_stream_obeys_grammar_and_keeps_everything() -> None:
    stream = translate([UPSTREAM])
    blocks = assert_valid_anthropic_stream(stream)
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use", "tool_use"]
    assert blocks[0]["thinking"] == "Thinking über café"
    assert decode_reasoning(blocks[0]["signature"]) == "Thinking über café"
    assert blocks[1]["text"] == "Result: 😀"
    assert blocks[2]["input"] == {"command": "ls é"}
    assert upstream_tool_id(blocks[2]["id"]) == "functions.Bash:0"
    assert blocks[3]["name"] == "Read"
    events = parse_events(stream)
    message_delta = next(p for n, p in events if n == "message_delta")
    assert message_delta["delta"]["stop_reason"] == "tool_use"
    assert message_delta["usage"] == {
        "input_tokens": 60,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 30,
        "output_tokens": 15,
    }
    assert events[0][1]["message"]["usage"]["input_tokens"] == 42


def test_every_byte_split_gives_identical_output() -> None:
    expected = translate([UPSTREAM])
    for cut in range(1, len(UPSTREAM)):
        assert translate([UPSTREAM[:cut], UPSTREAM[cut:]]) == expected, cut


def test_usage_chunk_after_finish_is_read() -> None:
    stream = translate([UPSTREAM])
    delta = next(p for n, p in parse_events(stream) if n == "message_delta")
    assert delta["usage"]["output_tokens"] == 15


def test_tool_finish_without_tool_blocks_is_end_turn() -> None:
    upstream = chunk({"content": "no tools really"}) + chunk({}, "tool_calls") + b"data: [DONE]\n\n"
    delta = next(p for n, p in parse_events(translate([upstream])) if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn"


def test_length_finish_is_max_tokens() -> None:
    upstream = chunk({"content": "cut"}) + chunk({}, "length") + b"data: [DONE]\n\n"
    delta = next(p for n, p in parse_events(translate([upstream])) if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "max_tokens"


def test_tool_call_before_text_opens_blocks_in_order() -> None:
    upstream = (
        chunk({"tool_calls": [{"index": 0, "id": "functions.Glob:0", "function": {"name": "Glob", "arguments": "{}"}}]})
        + chunk({"content": "after the call"})
        + chunk({}, "tool_calls")
        + b"data: [DONE]\n\n"
    )
    blocks = assert_valid_anthropic_stream(translate([upstream]))
    assert [b["type"] for b in blocks] == ["tool_use", "text"]


def test_interleaved_arguments_for_a_closed_tool_are_refused() -> None:
    upstream = (
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "A", "arguments": "{"}}]})
        + chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "B", "arguments": "{}"}}]})
        + chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})
    )
    with pytest.raises(UpstreamFormatError):
        translate([upstream])


def test_failure_event_after_start() -> None:
    encoder = StreamEncoder("msg_x", "m", 1)
    encoder.text_delta("partial")
    encoder.fail(529, "upstream overloaded")
    stream = encoder.take()
    blocks = assert_valid_anthropic_stream(stream, allow_error=True)
    assert blocks[0]["text"] == "partial"
    assert parse_events(stream)[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "upstream overloaded"}},
    )
