"""Anthropic Messages request body → IR.

Validation covers what the real API rejects (missing or mistyped `model`, `max_tokens`,
`messages`); everything unknown is ignored rather than fatal, because Claude Code adds fields every
release. Claude Code's attribution block (`x-anthropic-billing-header: …`) is lifted out of the
system prompt into `provider_data` so non-Anthropic upstreams never see it (it changes per
conversation and would break their prefix caches).
"""

from __future__ import annotations

from typing import Any

import orjson

from switch.errors import ClientRequestError
from switch.protocols.carry import upstream_tool_id
from switch.protocols.ir import (
    DocumentPart,
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
)

BILLING_PREFIX = "x-anthropic-billing-header:"
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})


def _require(body: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(key)
    if value is None:
        raise ClientRequestError(f"{key}: Field required", param=key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ClientRequestError(f"{key}: Input should be {what}", param=key)
    return value


def _text_of(block: dict[str, Any], where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise ClientRequestError(f"{where}.text: Input should be a valid string", param=where)
    return text


def _image(block: dict[str, Any], where: str) -> ImagePart:
    source = block.get("source")
    if not isinstance(source, dict):
        raise ClientRequestError(f"{where}.source: Field required", param=where)
    kind = source.get("type")
    if kind == "base64":
        return ImagePart(media_type=source.get("media_type"), data=source.get("data"))
    if kind == "url":
        return ImagePart(url=source.get("url"))
    raise ClientRequestError(f"{where}.source.type: image source '{kind}' is not supported by this route", param=where)


def _tool_result_content(value: Any, where: str) -> tuple[TextPart | ImagePart, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextPart(value),)
    if not isinstance(value, list):
        raise ClientRequestError(f"{where}.content: Input should be a string or a list", param=where)
    parts: list[TextPart | ImagePart] = []
    for index, block in enumerate(value):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(_text_of(block, f"{where}.content.{index}")))
        elif kind == "image":
            parts.append(_image(block, f"{where}.content.{index}"))
        elif kind == "tool_reference":
            name = block.get("tool_name") or block.get("name") or ""
            parts.append(TextPart(f"Tool loaded: {name}"))
    return tuple(parts)


def _parts(content: Any, role: str, where: str) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),)
    if not isinstance(content, list):
        raise ClientRequestError(f"{where}.content: Input should be a string or a list", param=where)
    parts: list[Part] = []
    for index, block in enumerate(content):
        at = f"{where}.content.{index}"
        if not isinstance(block, dict):
            raise ClientRequestError(f"{at}: Input should be an object", param=at)
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(_text_of(block, at)))
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind == "document":
            source = block.get("source") or {}
            parts.append(DocumentPart(source.get("media_type"), str(source.get("type"))))
        elif kind == "thinking":
            parts.append(ReasoningPart(str(block.get("thinking") or ""), block.get("signature") or None))
        elif kind == "redacted_thinking":
            parts.append(ReasoningPart("", redacted_data=str(block.get("data") or "")))
        elif kind == "tool_use":
            call_id = block.get("id")
            name = block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise ClientRequestError(f"{at}: tool_use needs string id and name", param=at)
            arguments = orjson.dumps(block.get("input") or {}).decode()
            parts.append(ToolCallPart(upstream_tool_id(call_id), name, arguments))
        elif kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise ClientRequestError(f"{at}.tool_use_id: Field required", param=at)
            parts.append(
                ToolResultPart(
                    upstream_tool_id(call_id),
                    _tool_result_content(block.get("content"), at),
                    bool(block.get("is_error")),
                )
            )
        # Server-tool blocks, container uploads and other Anthropic-only blocks have no
        # equivalent upstream; they are left out.
    return tuple(parts)


def _system(value: Any) -> tuple[tuple[TextPart, ...], str | None]:
    if value is None:
        return (), None
    if isinstance(value, str):
        return ((TextPart(value),) if value else ()), None
    if not isinstance(value, list):
        raise ClientRequestError("system: Input should be a string or a list", param="system")
    billing: str | None = None
    parts: list[TextPart] = []
    for index, block in enumerate(value):
        if not isinstance(block, dict) or block.get("type") != "text":
            continue
        text = _text_of(block, f"system.{index}")
        if billing is None and text.startswith(BILLING_PREFIX):
            billing = text
            continue
        parts.append(TextPart(text))
    return tuple(parts), billing


def _tools(value: Any) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ClientRequestError("tools: Input should be a valid list", param="tools")
    specs: list[ToolSpec] = []
    for index, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise ClientRequestError(f"tools.{index}: Input should be an object", param="tools")
        if tool.get("type") not in (None, "custom"):
            continue  # versioned server tools (web_search_…, bash_…) run only at Anthropic
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise ClientRequestError(f"tools.{index}.name: Field required", param="tools")
        schema = tool.get("input_schema")
        specs.append(ToolSpec(name, tool.get("description"), schema if isinstance(schema, dict) else None))
    return tuple(specs)


def _tool_choice(value: Any) -> tuple[ToolChoice | None, bool | None]:
    if not isinstance(value, dict):
        return None, None
    parallel = False if value.get("disable_parallel_tool_use") else None
    kind = value.get("type")
    if kind == "any":
        return ToolChoice("required"), parallel
    if kind == "tool":
        return ToolChoice("tool", str(value.get("name") or "")), parallel
    if kind == "none":
        return ToolChoice("none"), parallel
    return ToolChoice("auto"), parallel


def _reasoning(body: dict[str, Any]) -> Reasoning | None:
    thinking = body.get("thinking")
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    effort = effort if effort in _EFFORTS else None
    if isinstance(thinking, dict):
        kind = thinking.get("type")
        if kind == "disabled":
            return Reasoning(False)
        budget = thinking.get("budget_tokens")
        return Reasoning(True, effort, budget if isinstance(budget, int) else None)
    if effort is not None:
        return Reasoning(True, effort)
    return None


def request_to_ir(body: Any) -> Request:
    """Validate an Anthropic Messages body and convert it to the IR."""
    if not isinstance(body, dict):
        raise ClientRequestError("request body must be a JSON object")
    model = _require(body, "model", str, "a valid string")
    max_tokens = _require(body, "max_tokens", int, "a valid integer")
    raw_messages = _require(body, "messages", list, "a valid list")
    messages: list[Message] = []
    for index, raw in enumerate(raw_messages):
        where = f"messages.{index}"
        if not isinstance(raw, dict):
            raise ClientRequestError(f"{where}: Input should be an object", param=where)
        role = raw.get("role")
        if role not in ("user", "assistant", "system"):
            raise ClientRequestError(f"{where}.role: Input should be 'user', 'assistant' or 'system'", param=where)
        if "content" not in raw:
            raise ClientRequestError(f"{where}.content: Field required", param=where)
        messages.append(Message(role, _parts(raw["content"], role, where)))
    system, billing = _system(body.get("system"))
    tool_choice, parallel = _tool_choice(body.get("tool_choice"))
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, dict) else None
    stop = body.get("stop_sequences")
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    provider_data: dict[str, Any] = {}
    if billing is not None:
        provider_data["billing_header"] = billing
    return Request(
        model=model,
        system=system,
        messages=tuple(messages),
        max_output_tokens=max_tokens,
        stream=body.get("stream") is True,
        tools=_tools(body.get("tools")),
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        top_p=float(top_p) if isinstance(top_p, int | float) else None,
        stop=tuple(s for s in stop if isinstance(s, str)) if isinstance(stop, list) else (),
        reasoning=_reasoning(body),
        user=user if isinstance(user, str) else None,
        provider_data=provider_data,
    )
