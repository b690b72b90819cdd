"""IR → Anthropic Messages response bodies and usage objects."""

from __future__ import annotations

from typing import Any

import orjson

from switch.protocols.carry import client_tool_id, encode_reasoning
from switch.protocols.ir import ReasoningPart, Response, TextPart, ToolCallPart, Usage


def usage_to_wire(usage: Usage) -> dict[str, int]:
    """Anthropic usage: `input_tokens` excludes cache reads and writes."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def tool_input(arguments: str) -> dict[str, Any]:
    """Parse tool-call arguments into the object Anthropic requires, never failing."""
    if not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def response_from_ir(response: Response) -> dict[str, Any]:
    """The Anthropic `message` object for a complete IR response."""
    content: list[dict[str, Any]] = []
    for part in response.parts:
        if isinstance(part, ReasoningPart):
            if part.text:
                content.append(
                    {
                        "type": "thinking",
                        "thinking": part.text,
                        "signature": encode_reasoning(part.text),
                    }
                )
        elif isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            content.append(
                {
                    "type": "tool_use",
                    "id": client_tool_id(part.call_id),
                    "name": part.name,
                    "input": tool_input(part.arguments),
                }
            )
    has_tool_use = any(block["type"] == "tool_use" for block in content)
    stop_reason: str = response.stop_reason
    if has_tool_use and stop_reason == "end_turn":
        stop_reason = "tool_use"
    elif not has_tool_use and stop_reason == "tool_use":
        stop_reason = "end_turn"
    return {
        "id": response.id if response.id.startswith("msg_") else "msg_" + response.id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": response.stop_sequence,
        "usage": usage_to_wire(response.usage),
    }
