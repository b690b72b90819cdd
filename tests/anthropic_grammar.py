"""Checks a byte stream against the event grammar Anthropic clients enforce."""

from __future__ import annotations

from typing import Any

import orjson

from switch.protocols.sse import SseDecoder

DELTA_FOR_BLOCK = {
    "text": {"text_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "tool_use": {"input_json_delta"},
}


def parse_events(stream: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    decoder = SseDecoder()
    events = [*decoder.feed(stream), *decoder.flush()]
    return [(event.event, orjson.loads(event.data)) for event in events]


def assert_valid_anthropic_stream(stream: bytes, *, allow_error: bool = False) -> list[dict[str, Any]]:
    """Assert the grammar and return the content blocks it builds."""
    events = parse_events(stream)
    assert events, "empty stream"
    assert all(name == payload["type"] for name, payload in events), "event: line must match the JSON type"
    names = [name for name, _ in events if name != "ping"]
    assert names[0] == "message_start"
    assert names.count("message_start") == 1
    blocks: list[dict[str, Any]] = []
    open_index: int | None = None
    signature_seen = False
    for name, payload in events[1:]:
        if name == "content_block_start":
            assert open_index is None, "a block started while another is open"
            assert payload["index"] == len(blocks), "block indices must be contiguous"
            open_index = payload["index"]
            blocks.append(dict(payload["content_block"]))
            blocks[-1]["_json"] = ""
            signature_seen = False
        elif name == "content_block_delta":
            assert payload["index"] == open_index, "delta for a block that is not open"
            block = blocks[payload["index"]]
            delta = payload["delta"]
            assert delta["type"] in DELTA_FOR_BLOCK[block["type"]], f"{delta['type']} in a {block['type']} block"
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                assert not signature_seen
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
                signature_seen = True
            else:
                block["_json"] += delta["partial_json"]
        elif name == "content_block_stop":
            assert payload["index"] == open_index
            block = blocks[open_index]
            if block["type"] == "thinking":
                assert block["signature"], "thinking block closed without signature"
            if block["type"] == "tool_use":
                block["input"] = orjson.loads(block["_json"] or "{}")
            open_index = None
        elif name == "error":
            assert allow_error, f"unexpected error event: {payload}"
            return blocks
    assert open_index is None
    assert names[-1] == "message_stop"
    assert names[-2] == "message_delta"
    for block in blocks:
        block.pop("_json", None)
    return blocks
