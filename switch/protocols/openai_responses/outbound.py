"""OpenAI Responses as an API we call: IR → request body, response body and usage → IR.

Requests are the inbound reading in reverse: the system prompt becomes `instructions`, assistant
turns become reasoning, message and call items, tool results become call outputs, and flattened
`namespace__name` tools are grouped back into their `namespace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from switch.protocols.carry import is_switch_signature
from switch.protocols.documents import PDF, stand_in
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
    ToolSpec,
    Usage,
)
from switch.protocols.structured import write_openai_format
from switch.protocols.tools import ToolIndex, flat_name
from switch.protocols.wire import array, count, label, name, obj, optional_text, response_with_usage, text


def _input_file(part: DocumentPart) -> dict[str, Any]:
    if part.text is not None or part.problem is not None:
        return {"type": "input_text", "text": stand_in(part).text}
    if part.url is not None:
        return {"type": "input_file", "file_url": part.url}
    if part.file_id is not None:
        return {"type": "input_file", "file_id": part.file_id}
    media_type = part.media_type or PDF
    # OpenAI requires a filename with inline file data.
    filename = part.name or ("document.pdf" if media_type == PDF else "document")
    return {"type": "input_file", "file_data": f"data:{media_type};base64,{part.data or ''}", "filename": filename}


def _input_content(parts: Sequence[Part], assistant: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "output_text" if assistant else "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = part.url or f"data:{part.media_type or 'image/png'};base64,{part.data or ''}"
            out.append({"type": "input_image", "image_url": url})
        elif isinstance(part, DocumentPart) and not assistant:
            out.append(_input_file(part))
    return out


def _tool_output(part: ToolResultPart) -> str | list[dict[str, Any]]:
    if any(isinstance(item, DocumentPart) for item in part.content):
        return _input_content(part.content, False)
    return "\n".join(p.text for p in part.content if isinstance(p, TextPart))


def _tool_out(spec: ToolSpec) -> dict[str, Any]:
    name = spec.name[len(spec.namespace) + 2 :] if spec.namespace else spec.name
    if spec.kind == "custom":
        tool: dict[str, Any] = {"type": "custom", "name": name}
        if spec.description:
            tool["description"] = spec.description
        if spec.grammar:
            tool["format"] = spec.grammar
        return tool
    tool = {"type": "function", "name": name, "strict": False}
    if spec.description:
        tool["description"] = spec.description
    tool["parameters"] = spec.parameters or {"type": "object", "properties": {}}
    return tool


def _tools_out(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    namespaces: dict[str, dict[str, Any]] = {}
    for spec in tools:
        if spec.namespace:
            group = namespaces.get(spec.namespace)
            if group is None:
                group = {
                    "type": "namespace",
                    "name": spec.namespace,
                    "description": spec.namespace_description or "",
                    "tools": [],
                }
                namespaces[spec.namespace] = group
                out.append(group)
            group["tools"].append(_tool_out(spec))
        else:
            out.append(_tool_out(spec))
    return out


def request_from_ir(request: Request, model: str) -> dict[str, Any]:
    """The Responses body for `request` on a Responses upstream serving `model`."""
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            text = "\n\n".join(p.text for p in message.parts if isinstance(p, TextPart))
            items.append({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]})
        elif message.role == "user":
            plain = [p for p in message.parts if isinstance(p, TextPart | ImagePart | DocumentPart)]
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    kind = "custom_tool_call_output" if part.kind == "custom" else "function_call_output"
                    items.append({"type": kind, "call_id": part.call_id, "output": _tool_output(part)})
            if plain:
                items.append({"type": "message", "role": "user", "content": _input_content(tuple(plain), False)})
        else:
            texts: list[Part] = []
            for part in message.parts:
                if isinstance(part, ReasoningPart):
                    # Only OpenAI's own encrypted reasoning can go back to OpenAI.
                    if part.signature and not is_switch_signature(part.signature):
                        items.append({"type": "reasoning", "summary": [], "encrypted_content": part.signature})
                elif isinstance(part, TextPart):
                    texts.append(part)
                elif isinstance(part, ToolCallPart):
                    name = part.name[len(part.namespace) + 2 :] if part.namespace else part.name
                    if part.kind == "custom":
                        call: dict[str, Any] = {
                            "type": "custom_tool_call",
                            "call_id": part.call_id,
                            "name": name,
                            "input": part.arguments,
                        }
                    else:
                        call = {
                            "type": "function_call",
                            "call_id": part.call_id,
                            "name": name,
                            "arguments": part.arguments,
                        }
                    if part.namespace:
                        call["namespace"] = part.namespace
                    items.append(call)
            if texts:
                items.append({"type": "message", "role": "assistant", "content": _input_content(tuple(texts), True)})
    body: dict[str, Any] = {"model": model, "input": items}
    instructions = "\n\n".join(p.text for p in request.system)
    if instructions:
        body["instructions"] = instructions
    if request.tools:
        body["tools"] = _tools_out(request.tools)
        choice = request.tool_choice
        if choice is not None:
            if choice.mode == "tool":
                body["tool_choice"] = {"type": "function", "name": choice.name}
            else:
                body["tool_choice"] = choice.mode
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.max_output_tokens:
        body["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.reasoning is not None:
        body["reasoning"] = {"effort": request.reasoning.effort or ("medium" if request.reasoning.enabled else "none")}
        body["include"] = ["reasoning.encrypted_content"]
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    if request.output_format is not None:
        body["text"] = {"format": write_openai_format(request.output_format, False, "openai-responses")}
    body["store"] = False
    if request.stream:
        body["stream"] = True
    return body


# ---- Responses → IR (the upstream's answer) -----------------------------------------------------


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


def response_to_ir(body: dict[str, Any], index: ToolIndex) -> Response:
    """A complete Responses object → IR; raises `UpstreamFormatError` on a malformed body."""
    return response_with_usage(body, index, usage_to_ir, _response_to_ir)


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
