"""Chat Completions as an API we call: IR → request body shaped for the upstream model, response → IR.

`ChatUpstream` describes what differs between chat upstreams (reasoning knob and field name,
output cap, fixed sampling); routing supplies it. Output is deterministic: the same IR always gives
the same bytes, in the caller's order, so a growing conversation keeps the upstream's prefix cache
warm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import orjson

from switch.protocols.carry import decode_reasoning, short_tool_name
from switch.protocols.documents import stand_in
from switch.protocols.ir import (
    REASONING_EFFORTS,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    Reasoning,
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
from switch.protocols.tools import CUSTOM_ARGUMENT, ToolIndex
from switch.protocols.wire import array, count, label, name, obj, optional_text, response_with_usage, text

ReasoningStyle = Literal["reasoning_effort", "chat_template_args", "thinking", "none"]
EMPTY_TOOL_OUTPUT = "(no output)"


class ChatUpstream(Protocol):
    """How to talk to one chat upstream model (routing's `ChatTarget` is one)."""

    @property
    def model(self) -> str: ...
    @property
    def reasoning_style(self) -> ReasoningStyle: ...
    @property
    def reasoning_field(self) -> str: ...
    @property
    def effort_levels(self) -> tuple[str, ...]: ...
    @property
    def max_output_tokens(self) -> int | None: ...
    @property
    def default_output_tokens(self) -> int: ...
    @property
    def fixed_sampling(self) -> bool: ...
    @property
    def send_user(self) -> bool: ...
    @property
    def cache_key_field(self) -> str | None: ...


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
    rank = REASONING_EFFORTS.index(wanted)
    for level in levels:
        if level in REASONING_EFFORTS and REASONING_EFFORTS.index(level) >= rank:
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
    texts = [
        p.text if isinstance(p, TextPart) else stand_in(p).text for p in part.content if not isinstance(p, ImagePart)
    ]
    trailing_images.extend(p for p in part.content if isinstance(p, ImagePart))
    text = "\n".join(texts) or EMPTY_TOOL_OUTPUT
    if part.is_error:
        text = "Error: " + text
    return {"role": "tool", "tool_call_id": part.call_id, "content": text}


def _system_text(parts: tuple[TextPart, ...] | tuple[Any, ...]) -> str:
    return "\n\n".join(p.text for p in parts if isinstance(p, TextPart))


def _messages(
    request: Request, target: ChatUpstream, cached_reasoning: Callable[[str], str | None]
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
            pending.append(stand_in(part))
    content = trailing_images + pending
    if content:
        out.append({"role": "user", "content": _user_content(content)})


def _assistant_turn(
    message: Message,
    target: ChatUpstream,
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
        entry[target.reasoning_field] = "\n".join(reasoning)
    elif reasoning:
        entry[target.reasoning_field] = "\n".join(reasoning)
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
    target: ChatUpstream,
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
    if request.output_format is not None:
        body["response_format"] = write_openai_format(request.output_format, True, "openai-chat")
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


def _apply_reasoning(body: dict[str, Any], reasoning: Reasoning, target: ChatUpstream) -> None:
    style = target.reasoning_style
    if style == "reasoning_effort":
        effort = pick_effort(reasoning, target.effort_levels)
        if effort is not None:
            body["reasoning_effort"] = effort
    elif style == "chat_template_args":
        body["chat_template_args"] = {"enable_thinking": reasoning.enabled}
    elif style == "thinking":
        body["thinking"] = {"type": "enabled" if reasoning.enabled else "disabled"}


# ---- Chat Completions → IR (the upstream's answer) ---------------------------------------------


_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def stop_reason_to_ir(finish_reason: str | None, matched_stop: Any = None) -> StopReason:
    """Map a chat `finish_reason` (and vLLM's matched `stop_reason`) to the IR."""
    if finish_reason == "stop" and isinstance(matched_stop, str):
        return "stop_sequence"
    return _STOP_REASONS.get(finish_reason or "stop", "end_turn")


def usage_to_ir(usage: dict[str, Any]) -> Usage:
    """Chat usage → IR; `prompt_tokens` includes cached tokens, which are split out."""
    prompt = count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = 0
    written = 0
    if type(details) is dict:
        cached = count(details.get("cached_tokens"))
        written = count(details.get("cache_write_tokens"))
    if not cached:
        cached = count(usage.get("cached_tokens"))  # Moonshot reports it at the top level
    completion_details = usage.get("completion_tokens_details")
    reasoning = count(completion_details.get("reasoning_tokens")) if type(completion_details) is dict else 0
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=count(usage.get("completion_tokens")),
        reasoning_tokens=reasoning,
    )


def reasoning_of(fields: dict[str, Any]) -> str | None:
    """Reasoning text under either name upstreams use (`reasoning_content`, vLLM's `reasoning`)."""
    text = fields.get("reasoning_content")
    if text is None:
        text = fields.get("reasoning")
    return text if isinstance(text, str) else None


def response_to_ir(body: dict[str, Any], index: ToolIndex) -> Response:
    """A complete chat completion → IR response; raises `UpstreamFormatError` on a malformed body."""
    return response_with_usage(body, index, usage_to_ir, _response_to_ir)


def _content_text(content: Any, where: str) -> str:
    # Some upstreams answer with a list of text parts instead of a string.
    if type(content) is not list:
        return text(content, where)
    texts = []
    for position, part in enumerate(content):
        part = obj(part, f"{where}[{position}]")
        if part.get("type") == "text":
            texts.append(text(part.get("text"), f"{where}[{position}].text"))
    return "".join(texts)


def _response_to_ir(body: dict[str, Any], index: ToolIndex, usage: Usage) -> Response:
    choices = array(body.get("choices"), "choices")
    choice = obj(choices[0], "choices[0]") if choices else {}
    message = obj(choice.get("message"), "choices[0].message")
    parts: list[Part] = []
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    reasoning = text(reasoning, "choices[0].message.reasoning_content")
    if reasoning:
        parts.append(ReasoningPart(reasoning))
    content = _content_text(message.get("content"), "choices[0].message.content")
    if content:
        parts.append(TextPart(content))
    for position, call in enumerate(array(message.get("tool_calls"), "choices[0].message.tool_calls")):
        where = f"choices[0].message.tool_calls[{position}]"
        call = obj(call, where)
        function = obj(call.get("function"), where + ".function")
        parts.append(
            ToolCallPart(
                optional_text(call.get("id"), where + ".id") or f"call_{position}",
                index.caller_name(name(function.get("name"), where + ".function.name")),
                text(function.get("arguments"), where + ".function.arguments"),
            )
        )
    stop = choice.get("stop_reason")
    stop_sequence = stop if type(stop) is str else None
    return Response(
        id=label(body.get("id")) or "",
        model=label(body.get("model")) or "",
        parts=tuple(parts),
        stop_reason=stop_reason_to_ir(optional_text(choice.get("finish_reason"), "choices[0].finish_reason"), stop),
        usage=usage,
        stop_sequence=stop_sequence,
    )
