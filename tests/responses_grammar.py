"""Checks a byte stream against the OpenAI Responses event grammar (what Codex and the SDK rely on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from switch.protocols.sse import SseDecoder

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# Deltas and part events that must name the open item: event type → item type.
ITEM_EVENTS = {
    "response.output_text.delta": "message",
    "response.output_text.done": "message",
    "response.content_part.added": "message",
    "response.content_part.done": "message",
    "response.reasoning_summary_part.added": "reasoning",
    "response.reasoning_summary_part.done": "reasoning",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_summary_text.done": "reasoning",
    "response.function_call_arguments.delta": "function_call",
    "response.function_call_arguments.done": "function_call",
    "response.custom_tool_call_input.delta": "custom_tool_call",
    "response.custom_tool_call_input.done": "custom_tool_call",
}


@dataclass
class ResponsesStream:
    """What a valid stream said."""

    status: str
    output: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None


def assert_valid_responses_stream(stream: bytes) -> ResponsesStream:
    """Assert the grammar and return the terminal status, the finished items and the error."""
    decoder = SseDecoder()
    events = [*decoder.feed(stream), *decoder.flush()]
    assert events, "empty stream"
    payloads = []
    for event in events:
        assert event.data != b"[DONE]", "Responses streams have no [DONE] sentinel"
        payload = orjson.loads(event.data)
        assert isinstance(payload, dict)
        assert event.event == payload["type"], "event: line must match the JSON type"
        payloads.append(payload)
    assert [p["sequence_number"] for p in payloads] == list(range(1, len(payloads) + 1))
    assert payloads[0]["type"] == "response.created"
    response_id = payloads[0]["response"]["id"]
    terminals = [p for p in payloads if p["type"] in TERMINAL]
    assert len(terminals) == 1 and payloads[-1] is terminals[0], "exactly one terminal event, last"
    done_items: list[dict[str, Any]] = []
    open_item: dict[str, Any] | None = None
    for payload in payloads[1:-1]:
        kind = payload["type"]
        if kind == "response.in_progress":
            assert payload["response"]["id"] == response_id
        elif kind == "response.output_item.added":
            assert open_item is None, "an item was added while another is open"
            assert payload["output_index"] == len(done_items)
            open_item = payload["item"]
            assert open_item["id"]
        elif kind == "response.output_item.done":
            assert open_item is not None, "output_item.done without an open item"
            assert payload["output_index"] == len(done_items)
            item = payload["item"]
            assert item["id"] == open_item["id"] and item["type"] == open_item["type"]
            if item["type"] == "function_call":
                assert isinstance(item["arguments"], str) and item["call_id"] and item["name"] is not None
            done_items.append(item)
            open_item = None
        elif kind in ITEM_EVENTS:
            assert open_item is not None, f"{kind} outside an item"
            assert open_item["type"] == ITEM_EVENTS[kind], f"{kind} in a {open_item['type']} item"
            assert payload["item_id"] == open_item["id"]
            assert payload["output_index"] == len(done_items)
            if kind.endswith(".delta"):
                assert isinstance(payload["delta"], str)
        else:
            raise AssertionError(f"unexpected event {kind}")
    assert open_item is None, "the stream ended with an item still open"
    final = terminals[0]["response"]
    assert final["id"] == response_id
    status = final["status"]
    assert status == terminals[0]["type"].removeprefix("response."), "terminal status matches its event"
    assert final["output"] == done_items, "the terminal response lists the finished items"
    if status == "failed":
        error = final["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"]
        return ResponsesStream(status, done_items, error, final.get("usage"))
    assert final["error"] is None
    return ResponsesStream(status, done_items, None, final["usage"])
