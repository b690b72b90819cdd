"""Anthropic Messages as an API we serve: request body → IR, IR → response body and usage.

Every field that is read is type-checked where it is read (a wrong type is a 400 naming its path,
as the real API answers); everything unknown is ignored rather than fatal, because Claude Code adds
fields every release. Claude Code's attribution block (`x-anthropic-billing-header: …`) is lifted
out of the system prompt into `provider_data` so non-Anthropic upstreams never see it (it changes
per conversation and would break their prefix caches).
"""

from __future__ import annotations

from typing import Any

import orjson

from switch.protocols.carry import client_tool_id, encode_reasoning, upstream_tool_id
from switch.protocols.documents import anthropic_document
from switch.protocols.fields import (
    block_type,
    field_object,
    field_str,
    missing,
    not_one_of,
    optional_bool,
    optional_dict,
    optional_field_bool,
    optional_field_object,
    optional_field_str,
    optional_list,
    optional_number,
    read_tools,
    string_list,
    token_count,
    wrong_type,
)
from switch.protocols.ir import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    Reasoning,
    ReasoningEffort,
    ReasoningPart,
    Request,
    RequestFormatError,
    Response,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    UnsupportedFeatureError,
    Usage,
)
from switch.protocols.structured import read_anthropic_format

BILLING_PREFIX = "x-anthropic-billing-header:"
_EFFORTS: dict[str, ReasoningEffort] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
_ROLES = ("user", "assistant", "system")


# The loops below run once per content block of every request, so they get the path of their
# container (one string per message) and build a block's own path only when raising.


def _image(block: dict[str, Any], container: str, index: int) -> ImagePart:
    source = field_object(block, "source", container, index)
    kind = source.get("type")
    if kind == "base64":
        media_type = field_str(source, "media_type", container, index, "source.")
        return ImagePart(media_type=media_type, data=field_str(source, "data", container, index, "source."))
    if kind == "url":
        return ImagePart(url=field_str(source, "url", container, index, "source."))
    if not isinstance(kind, str):
        raise wrong_type(f"{container}[{index}].source.type", "a string", kind)
    at = f"{container}[{index}].source.type"
    raise UnsupportedFeatureError(f"{at}: image source '{kind}' is not supported by this route", param=at)


def _tool_result_content(value: Any, message: int, index: int) -> tuple[TextPart | ImagePart | DocumentPart, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextPart(value),)
    container = f"messages[{message}].content[{index}].content"
    if not isinstance(value, list):
        raise wrong_type(container, "a string or an array", value)
    parts: list[TextPart | ImagePart | DocumentPart] = []
    for inner, block in enumerate(value):
        kind = block_type(block, container, inner)
        if kind == "text":
            parts.append(TextPart(field_str(block, "text", container, inner)))
        elif kind == "image":
            parts.append(_image(block, container, inner))
        elif kind == "document":
            parts.append(anthropic_document(block, container, inner))
        elif kind == "tool_reference":
            name = block.get("tool_name")
            if name is None:
                name = block.get("name")
            if name is not None and not isinstance(name, str):
                raise wrong_type(f"{container}[{inner}].tool_name", "a string", name)
            parts.append(TextPart(f"Tool loaded: {name or ''}"))
    return tuple(parts)


def _parts(content: Any, message: int) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),)
    container = f"messages[{message}].content"
    if not isinstance(content, list):
        raise wrong_type(container, "a string or an array", content)
    parts: list[Part] = []
    for index, block in enumerate(content):
        kind = block_type(block, container, index)
        if kind == "text":
            parts.append(TextPart(field_str(block, "text", container, index)))
        elif kind == "tool_result":
            call_id = field_str(block, "tool_use_id", container, index)
            is_error = optional_field_bool(block, "is_error", container, index)
            content_of = _tool_result_content(block.get("content"), message, index)
            parts.append(ToolResultPart(upstream_tool_id(call_id), content_of, bool(is_error)))
        elif kind == "tool_use":
            parts.append(_tool_use(block, container, index))
        elif kind == "thinking":
            text = optional_field_str(block, "thinking", container, index)
            signature = optional_field_str(block, "signature", container, index)
            parts.append(ReasoningPart(text or "", signature or None))
        elif kind == "redacted_thinking":
            data = optional_field_str(block, "data", container, index)
            parts.append(ReasoningPart("", redacted_data=data or ""))
        elif kind == "image":
            parts.append(_image(block, container, index))
        elif kind == "document":
            parts.append(anthropic_document(block, container, index))
        # Server-tool blocks, container uploads and other Anthropic-only blocks have no
        # equivalent upstream; they are left out.
    return tuple(parts)


def _tool_use(block: dict[str, Any], at: str, index: int) -> ToolCallPart:
    call_id = field_str(block, "id", at, index)
    name = field_str(block, "name", at, index)
    arguments = optional_field_object(block, "input", at, index)
    try:
        encoded = orjson.dumps(arguments or {}).decode()
    except orjson.JSONEncodeError as exc:
        # JSON nested past the encoder's 255 levels, or a body decoded by something laxer than
        # the proxy (lone surrogates, integers past 64 bits).
        raise RequestFormatError(
            f"{at}[{index}].input cannot be encoded as JSON: {exc}", param=f"{at}[{index}].input"
        ) from None
    return ToolCallPart(upstream_tool_id(call_id), name, encoded)


def _system(value: Any) -> tuple[tuple[TextPart, ...], str | None]:
    if value is None:
        return (), None
    if isinstance(value, str):
        return ((TextPart(value),) if value else ()), None
    if not isinstance(value, list):
        raise wrong_type("system", "a string or an array", value)
    billing: str | None = None
    parts: list[TextPart] = []
    for index, block in enumerate(value):
        if block_type(block, "system", index) != "text":
            continue
        text = field_str(block, "text", "system", index)
        if billing is None and text.startswith(BILLING_PREFIX):
            billing = text
            continue
        parts.append(TextPart(text))
    return tuple(parts), billing


# Custom tools are the client's own; versioned server tools (web_search_…, bash_…) run only at Anthropic.
_CLIENT_TOOLS = (None, "custom")


def _server_tool(tool: dict[str, Any], kind: Any, index: int) -> None:
    if not isinstance(kind, str):
        raise wrong_type(f"tools[{index}].type", "a string", kind)


def _tool_choice(value: dict[str, Any] | None) -> tuple[ToolChoice | None, bool | None]:
    if value is None:
        return None, None
    disable_parallel = value.get("disable_parallel_tool_use")
    if disable_parallel is not None and not isinstance(disable_parallel, bool):
        raise wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", disable_parallel)
    parallel = False if disable_parallel else None
    kind = value.get("type")
    if kind == "any":
        return ToolChoice("required"), parallel
    if kind == "tool":
        name = value.get("name")
        if not isinstance(name, str):
            raise wrong_type("tool_choice.name", "a string", name)
        return ToolChoice("tool", name), parallel
    if kind == "none":
        return ToolChoice("none"), parallel
    if kind is not None and not isinstance(kind, str):
        raise wrong_type("tool_choice.type", "a string", kind)
    return ToolChoice("auto"), parallel


def _reasoning(body: dict[str, Any]) -> Reasoning | None:
    thinking = optional_dict(body, "thinking")
    output_config = optional_dict(body, "output_config")
    effort = output_config.get("effort") if output_config is not None else None
    if effort is not None and not isinstance(effort, str):
        raise wrong_type("output_config.effort", "one of " + ", ".join(sorted(_EFFORTS)), effort)
    # An effort level this version does not know is left to the upstream's default.
    known_effort = _EFFORTS.get(effort) if effort else None
    if thinking is not None:
        kind = thinking.get("type")
        if kind is not None and not isinstance(kind, str):
            raise wrong_type("thinking.type", "a string", kind)
        if kind == "disabled":
            return Reasoning(False)
        budget = token_count(thinking.get("budget_tokens"), "thinking.budget_tokens", minimum=0)
        return Reasoning(True, known_effort, budget)
    if known_effort is not None:
        return Reasoning(True, known_effort)
    return None


def _messages(raw_messages: list[Any]) -> tuple[Message, ...]:
    messages: list[Message] = []
    for index, raw in enumerate(raw_messages):
        if not isinstance(raw, dict):
            raise wrong_type(f"messages[{index}]", "an object", raw)
        role = raw.get("role")
        if role not in _ROLES:
            raise not_one_of(f"messages[{index}].role", "'user', 'assistant' or 'system'", role)
        if "content" not in raw:
            raise missing(f"messages[{index}].content")
        messages.append(Message(role, _parts(raw["content"], index)))
    return tuple(messages)


def request_to_ir(body: Any) -> Request:
    """Validate an Anthropic Messages body and convert it to the IR."""
    if not isinstance(body, dict):
        raise RequestFormatError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise missing("model") if model is None else wrong_type("model", "a string", model)
    if body.get("max_tokens") is None:
        raise missing("max_tokens")
    max_tokens = token_count(body["max_tokens"], "max_tokens")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise missing("messages") if raw_messages is None else wrong_type("messages", "an array", raw_messages)
    messages = _messages(raw_messages)
    system, billing = _system(body.get("system"))
    tool_choice, parallel = _tool_choice(optional_dict(body, "tool_choice"))
    metadata = optional_dict(body, "metadata")
    user = metadata.get("user_id") if metadata is not None else None
    if user is not None and not isinstance(user, str):
        raise wrong_type("metadata.user_id", "a string", user)
    provider_data: dict[str, Any] = {}
    if billing is not None:
        provider_data["billing_header"] = billing
    stream = optional_bool(body, "stream") is True
    tools: list[ToolSpec] = []
    raw_tools = optional_list(body, "tools")
    if raw_tools:
        read_tools(raw_tools, "tools", tools, "input_schema", _CLIENT_TOOLS, _server_tool)
    return Request(
        model=model,
        system=system,
        messages=messages,
        max_output_tokens=max_tokens,
        stream=stream,
        tools=tuple(tools),
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        temperature=optional_number(body, "temperature"),
        top_p=optional_number(body, "top_p"),
        stop=string_list(body.get("stop_sequences"), "stop_sequences"),
        reasoning=_reasoning(body),
        user=user,
        output_format=read_anthropic_format(body),
        provider_data=provider_data,
    )


# ---- IR → Anthropic Messages (answers to the client) -------------------------------------------


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
