"""OpenAI Responses output items and the `response` object, as switch sends them to a client.

A complete answer (`inbound.response_from_ir`) and a stream (`stream.StreamEncoder`) are built from
the same items, so both live here.
"""

from __future__ import annotations

from typing import Any

from switch.protocols.carry import encode_reasoning
from switch.protocols.ir import Request, StopReason, ToolCallPart, Usage
from switch.protocols.tools import ToolIndex


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    """Responses usage: `input_tokens` includes cached tokens."""
    prompt = usage.prompt_tokens
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": prompt + usage.output_tokens,
    }


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    """A complete reasoning output item carrying its text in `encrypted_content` too."""
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
        "encrypted_content": encode_reasoning(text),
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    """A complete assistant message output item."""
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def call_item(item_id: str, call: ToolCallPart, index: ToolIndex, status: str = "completed") -> dict[str, Any]:
    """A complete function_call or custom_tool_call output item."""
    namespace, name = index.split(call.name)
    if call.kind == "custom" or call.name in index.custom:
        item: dict[str, Any] = {
            "id": item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call.call_id,
            "name": name,
            "input": call.arguments,
        }
    else:
        item = {
            "id": item_id,
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
            "name": name,
            "arguments": call.arguments,
        }
    if namespace:
        item["namespace"] = namespace
    return item


def response_object(
    response_id: str,
    request: Request,
    output: list[dict[str, Any]],
    status: str,
    usage: Usage | None,
    created_at: int,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `response` object (also embedded in stream lifecycle events); `created_at` is its Unix time."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "output": output,
        "parallel_tool_calls": request.parallel_tool_calls if request.parallel_tool_calls is not None else True,
        "previous_response_id": request.provider_data.get("previous_response_id"),
        "reasoning": {"effort": request.reasoning.effort if request.reasoning else None, "summary": None},
        "store": request.provider_data.get("store", True),
        "temperature": request.temperature,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": request.top_p,
        "truncation": "disabled",
        "usage": usage_to_wire(usage) if usage is not None else None,
        "metadata": {},
    }


def status_of(stop_reason: StopReason) -> tuple[str, str | None]:
    """(status, incomplete reason) for a stop reason."""
    if stop_reason == "max_tokens":
        return "incomplete", "max_output_tokens"
    if stop_reason == "refusal":
        return "incomplete", "content_filter"
    return "completed", None
