"""OpenAI Responses request bodies ⇄ IR.

Inbound (`request_to_ir`): leading `developer`/`system` messages and `instructions` become the
system prompt; consecutive reasoning, assistant message and call items become one assistant turn;
call outputs become tool results. Reasoning items carry our `encrypted_content` token, from which
the reasoning text is restored. `namespace` tools (and those in an `additional_tools` item) are
flattened to `namespace__name`; hosted tools a chat model cannot run (web_search, …) are dropped.

Outbound (`request_from_ir`): the same in reverse, for a Responses upstream.
"""

from __future__ import annotations

from typing import Any

from switch.errors import ClientRequestError
from switch.protocols.carry import decode_reasoning, is_switch_signature
from switch.protocols.ir import (
    ImagePart,
    Message,
    Part,
    Reasoning,
    ReasoningPart,
    Request,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    image_from_url,
)
from switch.protocols.tools import flat_name

_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


def _content_parts(content: Any, where: str) -> list[TextPart | ImagePart]:
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise ClientRequestError(f"{where}.content: Input should be a string or a list", param=where)
    parts: list[TextPart | ImagePart] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            parts.append(TextPart(str(block.get("text") or "")))
        elif kind == "input_image":
            url = block.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            if isinstance(url, str):
                parts.append(image_from_url(url))
            else:
                raise ClientRequestError(
                    f"{where}: input_image by file_id is not supported by this route; send image_url",
                    param=where,
                )
        elif kind == "refusal":
            parts.append(TextPart(str(block.get("refusal") or "")))
        elif kind == "input_file":
            raise ClientRequestError(f"{where}: input_file is not supported by this route", param=where)
    return parts


def _output_parts(output: Any) -> tuple[TextPart | ImagePart, ...]:
    if isinstance(output, str):
        return (TextPart(output),)
    if isinstance(output, list):
        return tuple(_content_parts(output, "output"))
    return (TextPart("" if output is None else str(output)),)


def _reasoning_part(item: dict[str, Any]) -> ReasoningPart | None:
    token = item.get("encrypted_content")
    text = decode_reasoning(token)
    if text is None:
        chunks = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
        chunks = chunks or [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
        text = "".join(str(c) for c in chunks)
    return ReasoningPart(text, token if isinstance(token, str) else None)


def _tools(raw: Any, into: list[ToolSpec], namespace: str | None = None, ns_description: str | None = None) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        raise ClientRequestError("tools: Input should be a valid list", param="tools")
    for index, tool in enumerate(raw):
        if not isinstance(tool, dict):
            raise ClientRequestError(f"tools.{index}: Input should be an object", param="tools")
        kind = tool.get("type")
        if kind == "namespace":
            _tools(tool.get("tools"), into, str(tool.get("name") or ""), tool.get("description"))
            continue
        if kind not in ("function", "custom"):
            continue  # hosted tools (web_search, file_search, tool_search, …) need OpenAI to run them
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise ClientRequestError(f"tools.{index}.name: Field required", param="tools")
        if kind == "function":
            parameters = tool.get("parameters")
            into.append(
                ToolSpec(
                    flat_name(namespace, name),
                    tool.get("description"),
                    parameters if isinstance(parameters, dict) else None,
                    "function",
                    None,
                    namespace,
                    ns_description,
                )
            )
        else:
            fmt = tool.get("format")
            into.append(
                ToolSpec(
                    flat_name(namespace, name),
                    tool.get("description"),
                    None,
                    "custom",
                    fmt if isinstance(fmt, dict) else None,
                    namespace,
                    ns_description,
                )
            )


def _tool_choice(value: Any) -> ToolChoice | None:
    if value in ("auto", "none", "required"):
        return ToolChoice(value)
    if isinstance(value, dict) and value.get("type") in ("function", "custom") and value.get("name"):
        return ToolChoice("tool", flat_name(value.get("namespace"), str(value["name"])))
    return None


def request_to_ir(body: Any) -> Request:
    """Validate a Responses body and convert it to the IR."""
    if not isinstance(body, dict):
        raise ClientRequestError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ClientRequestError("model: Field required", param="model")
    raw_input = body.get("input")
    if raw_input is None:
        raw_input = []
    if isinstance(raw_input, str):
        raw_input = [{"type": "message", "role": "user", "content": raw_input}]
    if not isinstance(raw_input, list):
        raise ClientRequestError("input: Input should be a string or a list", param="input")
    system: list[TextPart] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        system.append(TextPart(instructions))
    tools: list[ToolSpec] = []
    _tools(body.get("tools"), tools)
    messages: list[Message] = []
    assistant: list[Part] = []
    outputs: list[Part] = []

    def flush_assistant() -> None:
        if assistant:
            messages.append(Message("assistant", tuple(assistant)))
            assistant.clear()

    def flush_outputs() -> None:
        if outputs:
            messages.append(Message("user", tuple(outputs)))
            outputs.clear()

    for index, item in enumerate(raw_input):
        where = f"input.{index}"
        if not isinstance(item, dict):
            raise ClientRequestError(f"{where}: Input should be an object", param="input")
        kind = item.get("type", "message")
        if kind in _ASSISTANT_ITEMS:
            flush_outputs()
            if kind == "reasoning":
                part = _reasoning_part(item)
                if part is not None:
                    assistant.append(part)
            else:
                call_id = item.get("call_id")
                name = item.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise ClientRequestError(f"{where}: {kind} needs string call_id and name", param="input")
                namespace = item.get("namespace")
                flat = flat_name(namespace if isinstance(namespace, str) else None, name)
                if kind == "function_call":
                    assistant.append(
                        ToolCallPart(call_id, flat, str(item.get("arguments") or ""), "function", namespace)
                    )
                else:
                    assistant.append(ToolCallPart(call_id, flat, str(item.get("input") or ""), "custom", namespace))
            continue
        if kind in _OUTPUT_ITEMS:
            flush_assistant()
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise ClientRequestError(f"{where}.call_id: Field required", param="input")
            outputs.append(
                ToolResultPart(
                    call_id,
                    _output_parts(item.get("output")),
                    False,
                    "custom" if kind == "custom_tool_call_output" else "function",
                )
            )
            continue
        if kind == "additional_tools":
            _tools(item.get("tools"), tools)
            continue
        if kind != "message":
            continue  # item_reference, web_search_call and other hosted-tool items
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise ClientRequestError(
                f"{where}.role: Input should be 'user', 'assistant', 'system' or 'developer'", param="input"
            )
        parts = _content_parts(item.get("content"), where)
        if role == "assistant":
            flush_outputs()
            assistant.extend(parts)
            continue
        flush_assistant()
        flush_outputs()
        if role in ("system", "developer"):
            text_parts = tuple(p for p in parts if isinstance(p, TextPart))
            if not messages:
                system.extend(text_parts)
            else:
                messages.append(Message("system", text_parts))
        else:
            messages.append(Message("user", tuple(parts)))
    flush_assistant()
    flush_outputs()
    reasoning_config = body.get("reasoning")
    reasoning = None
    if isinstance(reasoning_config, dict) and reasoning_config.get("effort") in _EFFORTS:
        effort = reasoning_config["effort"]
        reasoning = Reasoning(effort != "none", effort)
    max_output = body.get("max_output_tokens")
    if max_output is not None and (not isinstance(max_output, int) or isinstance(max_output, bool)):
        raise ClientRequestError("max_output_tokens: Input should be a valid integer", param="max_output_tokens")
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    provider_data: dict[str, Any] = {}
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous:
        provider_data["previous_response_id"] = previous
    if body.get("store") is False:
        provider_data["store"] = False
    user = body.get("safety_identifier") or body.get("user")
    cache_key = body.get("prompt_cache_key")
    return Request(
        model=model,
        system=tuple(system),
        messages=tuple(messages),
        max_output_tokens=max_output,
        stream=body.get("stream") is True,
        tools=tuple(tools),
        tool_choice=_tool_choice(body.get("tool_choice")),
        parallel_tool_calls=body.get("parallel_tool_calls")
        if isinstance(body.get("parallel_tool_calls"), bool)
        else None,
        temperature=float(temperature)
        if isinstance(temperature, int | float) and not isinstance(temperature, bool)
        else None,
        top_p=float(top_p) if isinstance(top_p, int | float) and not isinstance(top_p, bool) else None,
        reasoning=reasoning,
        user=user if isinstance(user, str) else None,
        cache_key=cache_key if isinstance(cache_key, str) else None,
        provider_data=provider_data,
    )


# ---- IR → Responses (for a Responses upstream) -------------------------------------------------


def _input_content(parts: tuple[Part, ...], assistant: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "output_text" if assistant else "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = part.url or f"data:{part.media_type or 'image/png'};base64,{part.data or ''}"
            out.append({"type": "input_image", "image_url": url})
    return out


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
            plain = [p for p in message.parts if isinstance(p, TextPart | ImagePart)]
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    text = "\n".join(p.text for p in part.content if isinstance(p, TextPart))
                    kind = "custom_tool_call_output" if part.kind == "custom" else "function_call_output"
                    items.append({"type": kind, "call_id": part.call_id, "output": text})
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
    body["store"] = False
    if request.stream:
        body["stream"] = True
    return body
