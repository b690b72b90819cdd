"""Checks that a body is a chat completions request a strict upstream (Kimi, vLLM) accepts."""

from __future__ import annotations

import re
from typing import Any

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def assert_valid_chat_request(body: dict[str, Any]) -> None:
    assert isinstance(body["model"], str) and body["model"]
    messages = body["messages"]
    assert messages, "no messages"
    pending_calls: set[str] = set()
    for index, message in enumerate(messages):
        role = message["role"]
        assert role in ("system", "user", "assistant", "tool"), role
        if role == "system":
            assert index == 0, "system message must lead"
            assert "x-anthropic-billing-header" not in message["content"]
        if role == "tool":
            assert message["tool_call_id"] in pending_calls, "tool result without a matching call"
            assert isinstance(message["content"], str) and message["content"], "tool content must be non-empty"
            pending_calls.discard(message["tool_call_id"])
        else:
            assert not pending_calls, f"tool calls {pending_calls} unanswered before message {index}"
        if role == "assistant":
            for call in message.get("tool_calls", []):
                assert call["type"] == "function"
                assert NAME.match(call["function"]["name"])
                assert isinstance(call["function"]["arguments"], str)
                pending_calls.add(call["id"])
            if message.get("tool_calls"):
                assert "reasoning_content" in message
        if role == "user":
            content = message["content"]
            assert content, "empty user content"
    for tool in body.get("tools", []):
        assert tool["type"] == "function"
        function = tool["function"]
        assert NAME.match(function["name"]), function["name"]
        assert function["parameters"]["type"] == "object"
        assert set(function) <= {"name", "description", "parameters"}
    for dropped in ("context_management", "output_config", "thinking", "metadata", "system", "max_tokens"):
        assert dropped not in body, dropped
