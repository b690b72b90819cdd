"""Chat Completions as an API we serve: request body → IR, IR → response body and usage."""

from __future__ import annotations

from typing import Any

from switch.protocols.documents import chat_file
from switch.protocols.fields import (
    missing,
    optional_bool,
    optional_dict,
    optional_list,
    optional_number,
    optional_str,
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

_EFFORTS: dict[str, ReasoningEffort] = {
    effort: effort for effort in ("none", "minimal", "low", "medium", "high", "xhigh", "max")
}
_CHOICE_MODES = {"auto": ToolChoice("auto"), "none": ToolChoice("none"), "required": ToolChoice("required")}
FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause": "stop",
}


def _parts(content: Any, where: str) -> list[TextPart | ImagePart | DocumentPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise wrong_type(f"{where}.content", "a string or an array", content)
    parts: list[TextPart | ImagePart | DocumentPart] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise wrong_type(f"{where}.content[{index}]", "an object", block)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise wrong_type(f"{where}.content[{index}].text", "a string", text)
            parts.append(TextPart(text))
        elif kind == "image_url":
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise wrong_type(f"{where}.content[{index}].image_url.url", "a string", url)
            parts.append(image_from_url(url))
        elif kind == "file":
            parts.append(chat_file(block, f"{where}.content", index))
        elif not isinstance(kind, str):
            raise wrong_type(f"{where}.content[{index}].type", "a string", kind)
        # Audio and refusal parts have no equivalent upstream; they are left out.
    return parts


def _tool_calls(value: Any, where: str) -> list[Part]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type(f"{where}.tool_calls", "an array", value)
    calls: list[Part] = []
    for index, call in enumerate(value):
        if not isinstance(call, dict):
            raise wrong_type(f"{where}.tool_calls[{index}]", "an object", call)
        call_id = call.get("id")
        if not isinstance(call_id, str):
            raise wrong_type(f"{where}.tool_calls[{index}].id", "a string", call_id)
        function = call.get("function")
        if not isinstance(function, dict):
            raise wrong_type(f"{where}.tool_calls[{index}].function", "an object", function)
        name = function.get("name")
        if not isinstance(name, str):
            raise wrong_type(f"{where}.tool_calls[{index}].function.name", "a string", name)
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            raise wrong_type(f"{where}.tool_calls[{index}].function.arguments", "a string", arguments)
        calls.append(ToolCallPart(call_id, name, arguments or ""))
    return calls


def _messages(raw_messages: list[Any]) -> tuple[list[TextPart], list[Message]]:
    system: list[TextPart] = []
    messages: list[Message] = []
    results: list[Part] = []
    for index, raw in enumerate(raw_messages):
        if not isinstance(raw, dict):
            raise wrong_type(f"messages[{index}]", "an object", raw)
        where = f"messages[{index}]"
        role = raw.get("role")
        if role == "tool":
            call_id = raw.get("tool_call_id")
            if not isinstance(call_id, str):
                raise wrong_type(f"{where}.tool_call_id", "a string", call_id)
            results.append(ToolResultPart(call_id, tuple(_parts(raw.get("content"), where))))
            continue
        if results:
            messages.append(Message("user", tuple(results)))
            results = []
        if role in ("system", "developer"):
            texts = [p for p in _parts(raw.get("content"), where) if isinstance(p, TextPart)]
            if messages:
                messages.append(Message("system", tuple(texts)))
            else:
                system.extend(texts)
        elif role == "user":
            messages.append(Message("user", tuple(_parts(raw.get("content"), where))))
        elif role == "assistant":
            parts: list[Part] = []
            reasoning = reasoning_of(raw)
            if reasoning:
                parts.append(ReasoningPart(reasoning))
            parts.extend(_parts(raw.get("content"), where))
            parts.extend(_tool_calls(raw.get("tool_calls"), where))
            messages.append(Message("assistant", tuple(parts)))
        else:
            expected = "'system', 'developer', 'user', 'assistant' or 'tool'"
            if not isinstance(role, str):
                raise wrong_type(f"{where}.role", expected, role)
            raise RequestFormatError(f"{where}.role must be {expected}, not '{role}'", param=f"{where}.role")
    if results:
        messages.append(Message("user", tuple(results)))
    return system, messages


def _tools(value: list[Any] | None) -> tuple[ToolSpec, ...]:
    if not value:
        return ()
    tools: list[ToolSpec] = []
    for index, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise wrong_type(f"tools[{index}]", "an object", tool)
        function = tool.get("function")
        if not isinstance(function, dict):
            raise wrong_type(f"tools[{index}].function", "an object", function)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type(f"tools[{index}].function.name", "a non-empty string", name)
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise wrong_type(f"tools[{index}].function.description", "a string", description)
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise wrong_type(f"tools[{index}].function.parameters", "an object", parameters)
        tools.append(ToolSpec(name, description, parameters))
    return tuple(tools)


def _tool_choice(choice: Any) -> ToolChoice | None:
    if choice is None:
        return None
    if isinstance(choice, str):
        return _CHOICE_MODES.get(choice)
    if not isinstance(choice, dict):
        raise wrong_type("tool_choice", "a string or an object", choice)
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
    known_effort = _EFFORTS.get(effort) if effort else None
    options = optional_dict(body, "stream_options")
    include_usage = options.get("include_usage") if options is not None else None
    if include_usage is not None and not isinstance(include_usage, bool):
        raise wrong_type("stream_options.include_usage", "a boolean", include_usage)
    user = optional_str(body, "user") or optional_str(body, "safety_identifier")
    return Request(
        model=model,
        system=tuple(system),
        messages=tuple(messages),
        max_output_tokens=token_count(max_tokens, max_tokens_key),
        stream=optional_bool(body, "stream") is True,
        tools=_tools(optional_list(body, "tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
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
