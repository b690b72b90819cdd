"""Anthropic Messages as an API we call: IR → request body, response body → IR.

Thinking blocks go back to Anthropic only with a signature Anthropic issued; blocks switch minted
(other upstreams' reasoning) would be rejected, so they are left out, and thinking is turned off
for a request whose history has tool calls without valid thinking (Anthropic requires it then).
"""

from __future__ import annotations

from typing import Any

import orjson

from switch.protocols.anthropic_messages.inbound import BILLING_PREFIX
from switch.protocols.carry import client_tool_id, is_switch_signature, short_tool_name
from switch.protocols.documents import PDF
from switch.protocols.ir import (
    DocumentPart,
    ImagePart,
    Part,
    ReasoningPart,
    Request,
    Response,
    StopReason,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from switch.protocols.structured import write_anthropic_format
from switch.protocols.tools import ToolIndex
from switch.protocols.wire import array, count, label, name, obj, optional_text, response_with_usage, text

_STOPS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "refusal": "refusal",
    "pause_turn": "pause",
    "model_context_window_exceeded": "max_tokens",
}
_BUDGETS = {
    "none": 0,
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 24576,
    "max": 32000,
}


def _image(part: ImagePart) -> dict[str, Any]:
    if part.url:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type or "image/png", "data": part.data or ""},
    }


def _document(part: DocumentPart) -> dict[str, Any]:
    if part.anthropic_block is not None:
        return part.anthropic_block
    source: dict[str, Any]
    if part.url is not None:
        source = {"type": "url", "url": part.url}
    elif part.file_id is not None:
        source = {"type": "file", "file_id": part.file_id}
    elif part.text is not None:
        source = {"type": "text", "media_type": "text/plain", "data": part.text}
    else:
        source = {"type": "base64", "media_type": part.media_type or PDF, "data": part.data or ""}
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.name:
        block["title"] = part.name
    return block


def _result_item(item: TextPart | ImagePart | DocumentPart) -> dict[str, Any]:
    if isinstance(item, TextPart):
        return {"type": "text", "text": item.text}
    if isinstance(item, ImagePart):
        return _image(item)
    return _document(item)


def _blocks(parts: tuple[Part, ...], index: ToolIndex) -> tuple[list[dict[str, Any]], bool]:
    blocks: list[dict[str, Any]] = []
    signed_thinking = False
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
        elif isinstance(part, DocumentPart):
            blocks.append(_document(part))
        elif isinstance(part, ReasoningPart):
            if part.redacted_data:
                blocks.append({"type": "redacted_thinking", "data": part.redacted_data})
                signed_thinking = True
            elif part.signature and not is_switch_signature(part.signature):
                blocks.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
                signed_thinking = True
        elif isinstance(part, ToolCallPart):
            arguments: Any
            if part.kind == "custom":
                arguments = {"input": part.arguments}
            else:
                try:
                    arguments = orjson.loads(part.arguments) if part.arguments.strip() else {}
                except orjson.JSONDecodeError:
                    arguments = {"_raw_arguments": part.arguments}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": client_tool_id(part.call_id),
                    "name": short_tool_name(part.name),
                    "input": arguments,
                }
            )
        elif isinstance(part, ToolResultPart):
            content = [_result_item(item) for item in part.content]
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": client_tool_id(part.call_id),
                "content": content,
            }
            if part.is_error:
                block["is_error"] = True
            blocks.append(block)
    return blocks, signed_thinking


def request_from_ir(request: Request, model: str) -> dict[str, Any]:
    """The Anthropic Messages body for `request` on `model`."""
    index = ToolIndex.of(request.tools)
    messages: list[dict[str, Any]] = []
    unsigned_tool_turn = False
    for message in request.messages:
        if message.role == "system":
            text = "\n\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}],
                }
            )
            continue
        blocks, signed = _blocks(message.parts, index)
        if message.role == "assistant" and any(b["type"] == "tool_use" for b in blocks) and not signed:
            unsigned_tool_turn = True
        if blocks:
            messages.append({"role": message.role, "content": blocks})
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_output_tokens or 8192,
        "messages": messages,
    }
    system = [{"type": "text", "text": p.text} for p in request.system]
    billing = request.provider_data.get("billing_header")
    if isinstance(billing, str) and billing.startswith(BILLING_PREFIX):
        system.insert(0, {"type": "text", "text": billing})
    if system:
        body["system"] = system
    if request.tools:
        tools = []
        for spec in request.tools:
            schema = spec.parameters or {"type": "object", "properties": {}}
            if spec.kind == "custom":
                schema = {
                    "type": "object",
                    "properties": {"input": {"type": "string"}},
                    "required": ["input"],
                }
            tool: dict[str, Any] = {"name": short_tool_name(spec.name), "input_schema": schema}
            if spec.description:
                tool["description"] = spec.description
            tools.append(tool)
        body["tools"] = tools
        choice = request.tool_choice
        if choice is not None:
            kind = {"auto": "auto", "required": "any", "none": "none", "tool": "tool"}[choice.mode]
            tool_choice: dict[str, Any] = {"type": kind}
            if choice.mode == "tool":
                tool_choice["name"] = short_tool_name(choice.name or "")
            if request.parallel_tool_calls is False and kind != "none":
                tool_choice["disable_parallel_tool_use"] = True
            body["tool_choice"] = tool_choice
    thinking = False
    reasoning = request.reasoning
    if reasoning is not None and reasoning.enabled and not unsigned_tool_turn:
        budget = reasoning.budget_tokens or _BUDGETS.get(reasoning.effort or "medium", 8192)
        if budget >= 1024:
            body["max_tokens"] = max(body["max_tokens"], budget + 1024)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            thinking = True
    if not thinking:
        if request.temperature is not None:
            body["temperature"] = min(max(request.temperature, 0.0), 1.0)
        if request.top_p is not None:
            body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.output_format is not None:
        body["output_config"] = {"format": write_anthropic_format(request.output_format)}
    if request.user:
        body["metadata"] = {"user_id": request.user[:256]}
    if request.stream:
        body["stream"] = True
    return body


def stop_reason_to_ir(stop_reason: str | None) -> StopReason:
    """Anthropic's stop reason → IR (absent reads as `end_turn`)."""
    return _STOPS.get(stop_reason or "end_turn", "end_turn")


def usage_to_ir(usage: dict[str, Any]) -> Usage:
    """Anthropic usage → IR (already in disjoint buckets)."""
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        cache_read_tokens=count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=count(usage.get("cache_creation_input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
    )


def response_to_ir(body: dict[str, Any], index: ToolIndex) -> Response:
    """A complete Anthropic message → IR; raises `UpstreamFormatError` on a malformed body."""
    return response_with_usage(body, index, usage_to_ir, _response_to_ir)


def _response_to_ir(body: dict[str, Any], index: ToolIndex, usage: Usage) -> Response:
    parts: list[Part] = []
    for position, raw_block in enumerate(array(body.get("content"), "content")):
        where = f"content[{position}]"
        block = obj(raw_block, where)
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text(block.get("text"), where + ".text")))
        elif kind == "thinking":
            parts.append(
                ReasoningPart(
                    text(block.get("thinking"), where + ".thinking"),
                    optional_text(block.get("signature"), where + ".signature"),
                )
            )
        elif kind == "redacted_thinking":
            parts.append(ReasoningPart("", redacted_data=text(block.get("data"), where + ".data")))
        elif kind == "tool_use":
            tool_name = index.caller_name(name(block.get("name"), where + ".name"))
            arguments = orjson.dumps(obj(block.get("input"), where + ".input")).decode()
            call_id = text(block.get("id"), where + ".id") or f"toolu_{position}"
            parts.append(ToolCallPart(call_id, tool_name, arguments))
    return Response(
        label(body.get("id")) or "",
        label(body.get("model")) or "",
        tuple(parts),
        stop_reason_to_ir(optional_text(body.get("stop_reason"), "stop_reason")),
        usage,
        optional_text(body.get("stop_sequence"), "stop_sequence"),
    )
