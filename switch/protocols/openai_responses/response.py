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
from switch.protocols.wire import UpstreamFormatError, array, count, label, name, obj, optional_text, text


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


def usage_to_ir(usage: dict[str, Any]) -> Usage:
    """Responses usage → IR (cached tokens split out of `input_tokens`)."""
    details = usage.get("input_tokens_details")
    cached = count(details.get("cached_tokens")) if type(details) is dict else 0
    written = count(details.get("cache_write_tokens")) if type(details) is dict else 0
    out_details = usage.get("output_tokens_details")
    return Usage(
        input_tokens=max(count(usage.get("input_tokens")) - cached - written, 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=count(usage.get("output_tokens")),
        reasoning_tokens=count(out_details.get("reasoning_tokens")) if type(out_details) is dict else 0,
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
    """A complete Responses object → IR; raises `UpstreamFormatError` on a malformed body."""
    raw_usage = body.get("usage")
    usage = usage_to_ir(raw_usage) if type(raw_usage) is dict else Usage()
    try:
        return _response_to_ir(body, index, usage)
    except UpstreamFormatError as exc:
        if type(raw_usage) is dict:
            exc.usage = usage
        raise


def _texts(items: Any, where: str, kind: str | None = None) -> str:
    """The joined `text` of the parts in `items` (only those of type `kind`, when given)."""
    chunks = []
    for position, raw in enumerate(array(items, where)):
        part = obj(raw, f"{where}[{position}]")
        if kind is None or part.get("type") == kind:
            chunks.append(text(part.get("text"), f"{where}[{position}].text"))
    return "".join(chunks)


def _output_part(item: Any, where: str, index: ToolIndex) -> Part | None:
    # One output item → an IR part (None for items that carry nothing switch relays).
    item = obj(item, where)
    kind = item.get("type")
    if kind == "reasoning":
        reasoning = _texts(item.get("content"), where + ".content") or _texts(item.get("summary"), where + ".summary")
        return ReasoningPart(reasoning, optional_text(item.get("encrypted_content"), where + ".encrypted_content"))
    if kind == "message":
        message = _texts(item.get("content"), where + ".content", "output_text")
        return TextPart(message) if message else None
    if kind in ("function_call", "custom_tool_call"):
        namespace = optional_text(item.get("namespace"), where + ".namespace")
        tool_name = flat_name(namespace, name(item.get("name"), where + ".name"))
        custom = kind == "custom_tool_call"
        call_id = optional_text(item.get("call_id"), where + ".call_id") or label(item.get("id")) or "call_0"
        return ToolCallPart(
            call_id,
            index.caller_name(tool_name),
            text(item.get("input" if custom else "arguments"), where + (".input" if custom else ".arguments")),
            "custom" if custom else "function",
            namespace,
        )
    return None


def _response_to_ir(body: dict[str, Any], index: ToolIndex, usage: Usage) -> Response:
    parts: list[Part] = []
    has_calls = False
    for position, item in enumerate(array(body.get("output"), "output")):
        part = _output_part(item, f"output[{position}]", index)
        if part is not None:
            parts.append(part)
            has_calls = has_calls or isinstance(part, ToolCallPart)
    status = body.get("status")
    details = body.get("incomplete_details")
    stop: StopReason = "tool_use" if has_calls else "end_turn"
    if status == "incomplete":
        stop = "refusal" if type(details) is dict and details.get("reason") == "content_filter" else "max_tokens"
    return Response(label(body.get("id")) or "", label(body.get("model")) or "", tuple(parts), stop, usage)
