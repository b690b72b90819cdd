"""OpenAI Chat Completions responses and usage → IR."""

from __future__ import annotations

from typing import Any

from switch.protocols.ir import Part, ReasoningPart, Response, StopReason, TextPart, ToolCallPart, Usage
from switch.protocols.tools import ToolIndex
from switch.protocols.wire import UpstreamFormatError, array, count, label, name, obj, optional_text, text

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
    raw_usage = body.get("usage")
    usage = usage_to_ir(raw_usage) if type(raw_usage) is dict else Usage()
    try:
        return _response_to_ir(body, index, usage)
    except UpstreamFormatError as exc:
        if type(raw_usage) is dict:
            exc.usage = usage
        raise


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
