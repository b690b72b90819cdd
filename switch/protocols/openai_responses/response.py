"""IR ⇄ OpenAI Responses response objects and usage."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from switch.protocols.carry import encode_reasoning
from switch.protocols.ir import (
    Part,
    ReasoningPart,
    Request,
    Response,
    StopReason,
    TextPart,
    ToolCallPart,
    Usage,
)
from switch.protocols.tools import ToolIndex, flat_name


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


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_to_ir(usage: dict[str, Any]) -> Usage:
    """Responses usage → IR (cached tokens split out of `input_tokens`)."""
    details = usage.get("input_tokens_details") or {}
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    written = _int(details.get("cache_write_tokens")) if isinstance(details, dict) else 0
    out_details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=max(_int(usage.get("input_tokens")) - cached - written, 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=_int(usage.get("output_tokens")),
        reasoning_tokens=_int(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else 0,
    )


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
    created_at: int | None = None,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `response` object (also embedded in stream lifecycle events)."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at if created_at is not None else int(time.time()),
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


def response_from_ir(
    response: Response, request: Request, response_id: str, next_id: Callable[[], str]
) -> dict[str, Any]:
    """The Responses object for a complete IR response; `next_id` supplies fresh item ids."""
    index = ToolIndex.of(request.tools)
    output: list[dict[str, Any]] = []
    for part in response.parts:
        if isinstance(part, ReasoningPart):
            if part.text:
                output.append(reasoning_item("rs_" + next_id(), part.text))
        elif isinstance(part, TextPart):
            output.append(message_item("msg_" + next_id(), part.text))
        elif isinstance(part, ToolCallPart):
            output.append(call_item("fc_" + next_id(), part, index))
    status, reason = status_of(response.stop_reason)
    return response_object(response_id, request, output, status, response.usage, incomplete_reason=reason)


def response_to_ir(body: dict[str, Any], index: ToolIndex) -> Response:
    """A complete Responses object → IR."""
    parts: list[Part] = []
    has_calls = False
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            chunks = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
            chunks = chunks or [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
            parts.append(ReasoningPart("".join(chunks), item.get("encrypted_content")))
        elif kind == "message":
            text = "".join(
                str(c.get("text", ""))
                for c in item.get("content") or []
                if isinstance(c, dict) and c.get("type") == "output_text"
            )
            if text:
                parts.append(TextPart(text))
        elif kind in ("function_call", "custom_tool_call"):
            has_calls = True
            namespace = item.get("namespace")
            name = flat_name(namespace if isinstance(namespace, str) else None, str(item.get("name") or ""))
            custom = kind == "custom_tool_call"
            parts.append(
                ToolCallPart(
                    str(item.get("call_id") or item.get("id") or ""),
                    index.caller_name(name),
                    str(item.get("input" if custom else "arguments") or ""),
                    "custom" if custom else "function",
                    namespace if isinstance(namespace, str) else None,
                )
            )
    status = body.get("status")
    details = body.get("incomplete_details") or {}
    stop: StopReason = "tool_use" if has_calls else "end_turn"
    if status == "incomplete":
        stop = "refusal" if isinstance(details, dict) and details.get("reason") == "content_filter" else "max_tokens"
    usage = body.get("usage")
    return Response(
        str(body.get("id") or ""),
        str(body.get("model") or ""),
        tuple(parts),
        stop,
        usage_to_ir(usage) if isinstance(usage, dict) else Usage(),
    )
