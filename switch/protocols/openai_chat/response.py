"""OpenAI Chat Completions responses and usage → IR."""

from __future__ import annotations

from typing import Any

from switch.protocols.ir import Part, ReasoningPart, Response, StopReason, TextPart, ToolCallPart, Usage
from switch.protocols.tools import ToolIndex

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


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_to_ir(usage: dict[str, Any]) -> Usage:
    """Chat usage → IR; `prompt_tokens` includes cached tokens, which are split out."""
    prompt = _int(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = 0
    written = 0
    if isinstance(details, dict):
        cached = _int(details.get("cached_tokens"))
        written = _int(details.get("cache_write_tokens"))
    if not cached:
        cached = _int(usage.get("cached_tokens"))  # Moonshot reports it at the top level
    completion_details = usage.get("completion_tokens_details")
    reasoning = _int(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else 0
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=_int(usage.get("completion_tokens")),
        reasoning_tokens=reasoning,
    )


def reasoning_of(fields: dict[str, Any]) -> str | None:
    """Reasoning text under either name upstreams use (`reasoning_content`, vLLM's `reasoning`)."""
    text = fields.get("reasoning_content")
    if text is None:
        text = fields.get("reasoning")
    return text if isinstance(text, str) else None


def response_to_ir(body: dict[str, Any], index: ToolIndex) -> Response:
    """A complete chat completion → IR response."""
    choices = body.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    parts: list[Part] = []
    reasoning = reasoning_of(message)
    if reasoning:
        parts.append(ReasoningPart(reasoning))
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append(TextPart(content))
    for position, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        parts.append(
            ToolCallPart(
                str(call.get("id") or f"call_{position}"),
                index.caller_name(name),
                str(function.get("arguments") or ""),
            )
        )
    usage = body.get("usage")
    return Response(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        parts=tuple(parts),
        stop_reason=stop_reason_to_ir(choice.get("finish_reason"), choice.get("stop_reason")),
        usage=usage_to_ir(usage) if isinstance(usage, dict) else Usage(),
        stop_sequence=choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) else None,
    )
