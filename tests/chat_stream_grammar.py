"""Checks a byte stream against the Chat Completions streaming grammar (what the openai SDK reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from switch.protocols.sse import SseDecoder


@dataclass
class ChatStream:
    """What a valid stream said."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def assert_valid_chat_stream(stream: bytes) -> ChatStream:
    """Assert the grammar and return what the stream assembles to (or its error)."""
    decoder = SseDecoder()
    events = [*decoder.feed(stream), *decoder.flush()]
    assert events, "empty stream"
    assert all(event.event is None for event in events), "chat streams carry no event: lines"
    assert events[-1].data == b"[DONE]", "the stream must end with data: [DONE]"
    assert [e.data for e in events].count(b"[DONE]") == 1
    result = ChatStream()
    completion_id = None
    for position, event in enumerate(events[:-1]):
        chunk = orjson.loads(event.data)
        assert isinstance(chunk, dict)
        if "error" in chunk:
            assert position == len(events) - 2, "only [DONE] may follow an error chunk"
            assert set(chunk["error"]) == {"message", "type", "param", "code"}
            assert isinstance(chunk["error"]["message"], str) and chunk["error"]["message"]
            result.error = chunk["error"]
            break
        assert chunk["object"] == "chat.completion.chunk"
        completion_id = completion_id or chunk["id"]
        assert chunk["id"] == completion_id
        choices = chunk["choices"]
        if not choices:
            assert result.finish_reason is not None, "a usage chunk comes after the finish chunk"
            result.usage = chunk["usage"]
            continue
        assert result.finish_reason is None, "no content after the finish chunk"
        (choice,) = choices
        delta = choice["delta"]
        result.text += delta.get("content") or ""
        result.reasoning += delta.get("reasoning_content") or ""
        for call in delta.get("tool_calls") or []:
            index = call["index"]
            if index == len(result.tool_calls):
                assert call["id"] and call["function"]["name"], "a new tool call starts with id and name"
                result.tool_calls.append({"id": call["id"], "name": call["function"]["name"], "arguments": ""})
            assert 0 <= index < len(result.tool_calls), "tool call indices are contiguous"
            result.tool_calls[index]["arguments"] += call["function"].get("arguments") or ""
        if choice["finish_reason"] is not None:
            assert choice["finish_reason"] in ("stop", "length", "tool_calls", "content_filter")
            result.finish_reason = choice["finish_reason"]
    if result.error is None:
        assert result.finish_reason is not None, "a stream without an error has a finish chunk"
    return result
