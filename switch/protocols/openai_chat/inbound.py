"""Chat Completions as an API we serve: request body → IR, IR → response body and usage."""

from __future__ import annotations

from typing import Any

from switch.protocols.documents import chat_file
from switch.protocols.fields import (
    EFFORTS,
    block_type,
    field_object,
    field_str,
    missing,
    not_one_of,
    openai_tool_choice,
    optional_bool,
    optional_dict,
    optional_field_str,
    optional_list,
    optional_number,
    optional_str,
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
    ReasoningPart,
    Request,
    RequestFormatError,
    Response,
    StopReason,
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    Usage,
    image_from_url,
)
from switch.protocols.openai_chat.outbound import reasoning_of
from switch.protocols.structured import read_openai_format

FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause": "stop",
}


def _parts(content: Any, message: int) -> list[TextPart | ImagePart | DocumentPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    container = f"messages[{message}].content"
    if not isinstance(content, list):
        raise wrong_type(container, "a string or an array", content)
    parts: list[TextPart | ImagePart | DocumentPart] = []
    for index, block in enumerate(content):
        kind = block_type(block, container, index)
        if kind == "text":
            parts.append(TextPart(field_str(block, "text", container, index)))
        elif kind == "image_url":
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise wrong_type(f"{container}[{index}].image_url.url", "a string", url)
            parts.append(image_from_url(url))
        elif kind == "file":
            parts.append(chat_file(block, container, index))
        # Audio and refusal parts have no equivalent upstream; they are left out.
    return parts


def _tool_calls(value: Any, message: int) -> list[Part]:
    if value is None:
        return []
    container = f"messages[{message}].tool_calls"
    if not isinstance(value, list):
        raise wrong_type(container, "an array", value)
    calls: list[Part] = []
    for index, call in enumerate(value):
        if not isinstance(call, dict):
            raise wrong_type(f"{container}[{index}]", "an object", call)
        call_id = field_str(call, "id", container, index)
        function = field_object(call, "function", container, index)
        name = field_str(function, "name", container, index, "function.")
        arguments = optional_field_str(function, "arguments", container, index, "function.")
        calls.append(ToolCallPart(call_id, name, arguments or ""))
    return calls


def _messages(raw_messages: list[Any]) -> tuple[list[TextPart], list[Message]]:
    system: list[TextPart] = []
    messages: list[Message] = []
    results: list[Part] = []
    for index, raw in enumerate(raw_messages):
        if not isinstance(raw, dict):
            raise wrong_type(f"messages[{index}]", "an object", raw)
        role = raw.get("role")
        if role == "tool":
            call_id = field_str(raw, "tool_call_id", "messages", index)
            results.append(ToolResultPart(call_id, tuple(_parts(raw.get("content"), index))))
            continue
        if results:
            messages.append(Message("user", tuple(results)))
            results = []
        if role in ("system", "developer"):
            texts = [p for p in _parts(raw.get("content"), index) if isinstance(p, TextPart)]
            if messages:
                messages.append(Message("system", tuple(texts)))
            else:
                system.extend(texts)
        elif role == "user":
            messages.append(Message("user", tuple(_parts(raw.get("content"), index))))
        elif role == "assistant":
            parts: list[Part] = []
            reasoning = reasoning_of(raw)
            if reasoning:
                parts.append(ReasoningPart(reasoning))
            parts.extend(_parts(raw.get("content"), index))
            parts.extend(_tool_calls(raw.get("tool_calls"), index))
            messages.append(Message("assistant", tuple(parts)))
        else:
            raise not_one_of(f"messages[{index}].role", "'system', 'developer', 'user', 'assistant' or 'tool'", role)
    if results:
        messages.append(Message("user", tuple(results)))
    return system, messages


def _named_tool(choice: dict[str, Any]) -> ToolChoice | None:
    function = choice.get("function")
    if function is None:
        return None
    if not isinstance(function, dict):
        raise wrong_type("tool_choice.function", "an object", function)
    name = function.get("name")
    if not isinstance(name, str):
        raise wrong_type("tool_choice.function.name", "a string", name)
    return ToolChoice("tool", name)


def request_to_ir(body: Any) -> Request:
    """Validate a chat completions body and convert it to the IR."""
    if not isinstance(body, dict):
        raise RequestFormatError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise missing("model") if model is None else wrong_type("model", "a non-empty string", model)
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise missing("messages") if raw_messages is None else wrong_type("messages", "a non-empty array", raw_messages)
    system, messages = _messages(raw_messages)
    max_tokens = body.get("max_completion_tokens")
    max_tokens_key = "max_completion_tokens"
    if max_tokens is None:
        max_tokens, max_tokens_key = body.get("max_tokens"), "max_tokens"
    stop = body.get("stop")
    effort = optional_str(body, "reasoning_effort")
    known_effort = EFFORTS.get(effort) if effort else None
    options = optional_dict(body, "stream_options")
    include_usage = options.get("include_usage") if options is not None else None
    if include_usage is not None and not isinstance(include_usage, bool):
        raise wrong_type("stream_options.include_usage", "a boolean", include_usage)
    user = optional_str(body, "user") or optional_str(body, "safety_identifier")
    # Read in the order the fields were always checked, so a body with two faults is refused for the same one.
    max_output_tokens = token_count(max_tokens, max_tokens_key)
    stream = optional_bool(body, "stream") is True
    tools: list[ToolSpec] = []
    raw_tools = optional_list(body, "tools")
    if raw_tools:
        read_tools(raw_tools, "tools", tools, "parameters")
    return Request(
        model=model,
        system=tuple(system),
        messages=tuple(messages),
        max_output_tokens=max_output_tokens,
        stream=stream,
        tools=tuple(tools),
        tool_choice=openai_tool_choice(body.get("tool_choice"), _named_tool),
        parallel_tool_calls=optional_bool(body, "parallel_tool_calls"),
        temperature=optional_number(body, "temperature"),
        top_p=optional_number(body, "top_p"),
        stop=(stop,) if isinstance(stop, str) else string_list(stop, "stop"),
        reasoning=Reasoning(known_effort != "none", known_effort) if known_effort is not None else None,
        user=user,
        cache_key=optional_str(body, "prompt_cache_key"),
        output_format=read_openai_format(body.get("response_format"), "response_format", nested=True),
        provider_data={"include_usage": include_usage is True},
    )


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    """Chat usage: `prompt_tokens` includes cached tokens."""
    prompt = usage.prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def response_from_ir(response: Response, request: Request, completion_id: str, created: int) -> dict[str, Any]:
    """The chat completion object for a complete IR response; `created` is its Unix time."""
    texts = [p.text for p in response.parts if isinstance(p, TextPart)]
    reasoning = [p.text for p in response.parts if isinstance(p, ReasoningPart)]
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    stop: StopReason = response.stop_reason
    if calls and stop == "end_turn":
        stop = "tool_use"
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": FINISH_REASONS[stop], "logprobs": None}],
        "usage": usage_to_wire(response.usage),
    }
