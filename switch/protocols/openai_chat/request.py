"""IR → OpenAI Chat Completions request body, shaped for the chosen upstream model.

`ChatTarget` holds what differs between chat upstreams (reasoning knob and field name, output cap,
fixed sampling). Output is deterministic: the same IR always gives the same bytes, in the caller's
order, so a growing conversation keeps the upstream's prefix cache warm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from switch.errors import TranslationError
from switch.protocols.carry import decode_reasoning, short_tool_name
from switch.protocols.ir import (
    DocumentPart,
    ImagePart,
    Message,
    Reasoning,
    ReasoningEffort,
    ReasoningPart,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from switch.protocols.tools import CUSTOM_ARGUMENT

ReasoningStyle = Literal["reasoning_effort", "chat_template_args", "thinking", "none"]
_EFFORT_ORDER: tuple[ReasoningEffort, ...] = (
    "none",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)
EMPTY_TOOL_OUTPUT = "(no output)"


@dataclass(frozen=True, slots=True)
class ChatTarget:
    """How to talk to one chat upstream model."""

    model: str
    reasoning_style: ReasoningStyle = "reasoning_effort"
    reasoning_field: str = "reasoning_content"
    effort_levels: tuple[str, ...] = ("low", "medium", "high")
    max_output_tokens: int | None = None
    default_output_tokens: int = 32768
    fixed_sampling: bool = False
    send_user: bool = True
    cache_key_field: str | None = None


def pick_effort(reasoning: Reasoning, levels: tuple[str, ...]) -> str | None:
    """The upstream effort level closest to (not below) what the caller asked for."""
    if not levels:
        return None
    wanted: str | None = reasoning.effort
    if wanted is None and reasoning.budget_tokens is not None:
        budget = reasoning.budget_tokens
        wanted = "low" if budget <= 4096 else "medium" if budget <= 16384 else "high" if budget <= 32768 else "max"
    if not reasoning.enabled:
        wanted = "none"
    if wanted is None:
        return None
    rank = _EFFORT_ORDER.index(wanted)
    for level in levels:
        if level in _EFFORT_ORDER and _EFFORT_ORDER.index(level) >= rank:
            return level
    return levels[-1]


def _image_url(part: ImagePart) -> dict[str, Any]:
    url = part.url if part.url else f"data:{part.media_type or 'image/png'};base64,{part.data or ''}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(parts: list[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts)  # type: ignore[union-attr]
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_url(p) for p in parts]


def _tool_message(part: ToolResultPart, trailing_images: list[TextPart | ImagePart]) -> dict[str, Any]:
    texts = [p.text for p in part.content if isinstance(p, TextPart)]
    trailing_images.extend(p for p in part.content if isinstance(p, ImagePart))
    text = "\n".join(texts) or EMPTY_TOOL_OUTPUT
    if part.is_error:
        text = "Error: " + text
    return {"role": "tool", "tool_call_id": part.call_id, "content": text}


def _system_text(parts: tuple[TextPart, ...] | tuple[Any, ...]) -> str:
    return "\n\n".join(p.text for p in parts if isinstance(p, TextPart))


def _messages(
    request: Request, target: ChatTarget, cached_reasoning: Callable[[str], str | None]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = _system_text(request.system)
    if system:
        out.append({"role": "system", "content": system})
    for message in request.messages:
        if message.role == "system":
            # Chat upstreams reject a non-leading system role; fold it into the conversation where
            # it stands, so earlier turns (and the prefix cache) stay untouched.
            text = _system_text(message.parts)
            if text:
                out.append({"role": "user", "content": f"<system-reminder>\n{text}\n</system-reminder>"})
        elif message.role == "user":
            _user_turn(message, out)
        else:
            _assistant_turn(message, target, cached_reasoning, out)
    return out


def _user_turn(message: Message, out: list[dict[str, Any]]) -> None:
    pending: list[TextPart | ImagePart] = []
    trailing_images: list[TextPart | ImagePart] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            out.append(_tool_message(part, trailing_images))
        elif isinstance(part, TextPart | ImagePart):
            pending.append(part)
        elif isinstance(part, DocumentPart):
            raise TranslationError(
                "document content blocks are not supported by this upstream model; send the document's text instead",
                param="messages",
            )
    content = trailing_images + pending
    if content:
        out.append({"role": "user", "content": _user_content(content)})


def _assistant_turn(
    message: Message,
    target: ChatTarget,
    cached_reasoning: Callable[[str], str | None],
    out: list[dict[str, Any]],
) -> None:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ReasoningPart):
            text = part.text or decode_reasoning(part.signature) or ""
            if text:
                reasoning.append(text)
        elif isinstance(part, ToolCallPart):
            arguments = part.arguments
            if part.kind == "custom":
                arguments = orjson.dumps({CUSTOM_ARGUMENT: arguments}).decode()
            calls.append(
                {
                    "id": part.call_id,
                    "type": "function",
                    "function": {"name": short_tool_name(part.name), "arguments": arguments},
                }
            )
    entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        entry["tool_calls"] = calls
        if not reasoning:
            remembered = cached_reasoning(calls[0]["id"])
            if remembered:
                reasoning.append(remembered)
        # Thinking upstreams (Kimi, DeepSeek) reject a tool-call turn without its reasoning field.
        entry[target.reasoning_field] = "".join(reasoning)
    elif reasoning:
        entry[target.reasoning_field] = "".join(reasoning)
    if entry["content"] is None and not calls:
        entry["content"] = ""
    out.append(entry)


def _tool(spec: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": short_tool_name(spec.name)}
    if spec.kind == "custom":
        hint = "Free-form input for this tool."
        if spec.grammar and spec.grammar.get("definition"):
            hint += " It must follow this grammar:\n" + str(spec.grammar["definition"])
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": hint}},
            "required": ["input"],
        }
        return {"type": "function", "function": function}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = spec.parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def request_from_ir(
    request: Request,
    target: ChatTarget,
    cached_reasoning: Callable[[str], str | None] = lambda _call_id: None,
) -> dict[str, Any]:
    """The chat completions body for `request` on `target`."""
    body: dict[str, Any] = {
        "model": target.model,
        "messages": _messages(request, target, cached_reasoning),
    }
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
        choice = request.tool_choice
        if choice is not None:
            if choice.mode == "tool":
                body["tool_choice"] = {
                    "type": "function",
                    "function": {"name": short_tool_name(choice.name or "")},
                }
            else:
                body["tool_choice"] = choice.mode
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    wanted = request.max_output_tokens or target.default_output_tokens
    if target.max_output_tokens:
        wanted = min(wanted, target.max_output_tokens)
    body["max_completion_tokens"] = wanted
    if not target.fixed_sampling:
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
    if request.stop:
        body["stop"] = list(request.stop)
    if request.reasoning is not None:
        _apply_reasoning(body, request.reasoning, target)
    if request.user and target.send_user:
        body["user"] = request.user
    if request.cache_key and target.cache_key_field:
        body[target.cache_key_field] = request.cache_key
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _apply_reasoning(body: dict[str, Any], reasoning: Reasoning, target: ChatTarget) -> None:
    style = target.reasoning_style
    if style == "reasoning_effort":
        effort = pick_effort(reasoning, target.effort_levels)
        if effort is not None:
            body["reasoning_effort"] = effort
    elif style == "chat_template_args":
        body["chat_template_args"] = {"enable_thinking": reasoning.enabled}
    elif style == "thinking":
        body["thinking"] = {"type": "enabled" if reasoning.enabled else "disabled"}
