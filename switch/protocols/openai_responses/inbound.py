"""OpenAI Responses as an API we serve: request body → IR, IR → response body.

Inbound (`request_to_ir`): leading `developer`/`system` messages and `instructions` become the
system prompt; consecutive reasoning, assistant message and call items become one assistant turn;
call outputs become tool results. Reasoning items carry our `encrypted_content` token, from which
the reasoning text is restored. `namespace` tools (and those in an `additional_tools` item) are
flattened to `namespace__name`; hosted tools a chat model cannot run (web_search, …) are dropped.

Codex's own items (compaction, agent_message) are read as `compaction` describes; any other input
item type is noted there as uncarried (a 400 on every route but the native one), never skipped.

Answers (`response_from_ir`) are built from the output items in `items`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switch.protocols.carry import decode_reasoning
from switch.protocols.documents import responses_file
from switch.protocols.fields import (
    EFFORTS,
    block_type,
    field_str,
    missing,
    not_one_of,
    openai_tool_choice,
    optional_bool,
    optional_dict,
    optional_field_str,
    optional_number,
    optional_str,
    read_tools,
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
    TextPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    image_from_url,
)
from switch.protocols.openai_responses.compaction import (
    COMPACTION_TRIGGER,
    codex_item_message,
    compaction_item,
    summary_request,
    summary_text,
)
from switch.protocols.openai_responses.items import call_item, message_item, reasoning_item, response_object, status_of
from switch.protocols.structured import read_openai_format
from switch.protocols.tools import ToolIndex, flat_name

_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_ROLES = ("user", "assistant", "system", "developer")
_FUNCTION_TOOLS = ("function",)
_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


def _content_parts(content: Any, container: str) -> list[TextPart | ImagePart | DocumentPart]:
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise wrong_type(container, "a string or an array", content)
    parts: list[TextPart | ImagePart | DocumentPart] = []
    for index, block in enumerate(content):
        kind = block_type(block, container, index)
        if kind in _TEXT_PARTS:
            parts.append(TextPart(field_str(block, "text", container, index)))
        elif kind == "input_image":
            url = block.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            if isinstance(url, str):
                parts.append(image_from_url(url))
            elif url is None:
                raise RequestFormatError(
                    f"{container}[{index}]: input_image by file_id is not supported by this route; send image_url",
                    param=f"{container}[{index}]",
                )
            else:
                raise wrong_type(f"{container}[{index}].image_url", "a string", url)
        elif kind == "refusal":
            parts.append(TextPart(field_str(block, "refusal", container, index)))
        elif kind == "input_file":
            parts.append(responses_file(block, container, index))
    return parts


def _output_parts(output: Any, item: int) -> tuple[TextPart | ImagePart | DocumentPart, ...]:
    if output is None:
        return ()
    if isinstance(output, str):
        return (TextPart(output),)
    if isinstance(output, list):
        return tuple(_content_parts(output, f"input[{item}].output.content"))
    raise wrong_type(f"input[{item}].output", "a string or an array", output)


def _summary_texts(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type(path, "an array", value)
    texts: list[str] = []
    for index, chunk in enumerate(value):
        if not isinstance(chunk, dict):
            raise wrong_type(f"{path}[{index}]", "an object", chunk)
        text = chunk.get("text", "")
        if not isinstance(text, str):
            raise wrong_type(f"{path}[{index}].text", "a string", text)
        texts.append(text)
    return texts


def _reasoning_part(item: dict[str, Any], index: int) -> ReasoningPart:
    token = optional_field_str(item, "encrypted_content", "input", index)
    text = decode_reasoning(token)
    if text is None:
        chunks = _summary_texts(item.get("content"), f"input[{index}].content")
        chunks = chunks or _summary_texts(item.get("summary"), f"input[{index}].summary")
        text = "".join(chunks)
    return ReasoningPart(text, token)


def _tools(
    raw: Any,
    into: list[ToolSpec],
    path: str,
    namespace: str | None = None,
    ns_description: str | None = None,
) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        raise wrong_type(path, "an array", raw)

    def other(tool: dict[str, Any], kind: Any, index: int) -> None:
        if not isinstance(kind, str):
            raise wrong_type(f"{path}[{index}].type", "a string", kind)
        description = optional_field_str(tool, "description", path, index)
        if kind == "custom":
            read_tools(
                [tool],
                path,
                into,
                "format",
                ("custom",),
                start=index,
                grammar=True,
                namespace=namespace,
                namespace_description=ns_description,
            )
        elif kind == "namespace":
            if namespace is not None:
                raise RequestFormatError(
                    f"{path}[{index}]: a namespace cannot hold another namespace", param=f"{path}[{index}]"
                )
            group = tool.get("name")
            if not isinstance(group, str) or not group:
                raise wrong_type(f"{path}[{index}].name", "a non-empty string", group)
            _tools(tool.get("tools"), into, f"{path}[{index}].tools", group, description)
        # Hosted tools (web_search, file_search, tool_search, …) need OpenAI to run them.

    read_tools(
        raw, path, into, "parameters", _FUNCTION_TOOLS, other, namespace=namespace, namespace_description=ns_description
    )


def _named_tool(value: dict[str, Any]) -> ToolChoice | None:
    if value.get("type") not in ("function", "custom"):
        return None
    name = value.get("name")
    namespace = value.get("namespace")
    if not isinstance(name, str):
        raise wrong_type("tool_choice.name", "a string", name)
    if namespace is not None and not isinstance(namespace, str):
        raise wrong_type("tool_choice.namespace", "a string", namespace)
    return ToolChoice("tool", flat_name(namespace, name)) if name else None


def _call_part(item: dict[str, Any], kind: str, index: int) -> ToolCallPart:
    call_id = field_str(item, "call_id", "input", index)
    name = field_str(item, "name", "input", index)
    namespace = optional_field_str(item, "namespace", "input", index)
    flat = flat_name(namespace, name)
    if kind == "function_call":
        arguments = optional_field_str(item, "arguments", "input", index)
        return ToolCallPart(call_id, flat, arguments or "", "function", namespace)
    text = optional_field_str(item, "input", "input", index)
    return ToolCallPart(call_id, flat, text or "", "custom", namespace)


def _input_items(
    raw_input: list[Any], system: list[TextPart], tools: list[ToolSpec], provider_data: dict[str, Any]
) -> list[Message]:
    messages: list[Message] = []
    assistant: list[Part] = []
    outputs: list[Part] = []

    def flush_assistant() -> None:
        messages.append(Message("assistant", tuple(assistant)))
        assistant.clear()

    def flush_outputs() -> None:
        messages.append(Message("user", tuple(outputs)))
        outputs.clear()

    for index, item in enumerate(raw_input):
        if not isinstance(item, dict):
            raise wrong_type(f"input[{index}]", "an object", item)
        kind = item.get("type", "message")
        if not isinstance(kind, str):
            raise wrong_type(f"input[{index}].type", "a string", kind)
        # The flushes are guarded here, not in them: most items change no turn.
        if kind in _ASSISTANT_ITEMS:
            if outputs:
                flush_outputs()
            if kind == "reasoning":
                assistant.append(_reasoning_part(item, index))
            else:
                assistant.append(_call_part(item, kind, index))
            continue
        if kind in _OUTPUT_ITEMS:
            if assistant:
                flush_assistant()
            outputs.append(
                ToolResultPart(
                    field_str(item, "call_id", "input", index),
                    _output_parts(item.get("output"), index),
                    False,
                    "custom" if kind == "custom_tool_call_output" else "function",
                )
            )
            continue
        if kind == "additional_tools":
            _tools(item.get("tools"), tools, f"input[{index}].tools")
            continue
        if kind == "configuration_update":
            continue  # Codex's per-turn settings echo (reasoning effort): the request's own fields carry them
        if kind == "compaction_trigger":
            provider_data[COMPACTION_TRIGGER] = True
            continue
        if kind != "message":
            # Codex's own items become user messages (a summary, multi-agent mail); any other is noted.
            message = codex_item_message(item, kind, index, provider_data, _content_parts)
            if message is not None:
                if assistant:
                    flush_assistant()
                if outputs:
                    flush_outputs()
                messages.append(message)
            continue
        role = item.get("role")
        if role not in _ROLES:
            raise not_one_of(f"input[{index}].role", "'user', 'assistant', 'system' or 'developer'", role)
        parts = _content_parts(item.get("content"), f"input[{index}].content")
        if role == "assistant":
            if outputs:
                flush_outputs()
            assistant.extend(parts)
            continue
        if assistant:
            flush_assistant()
        if outputs:
            flush_outputs()
        if role in ("system", "developer"):
            text_parts = tuple(p for p in parts if isinstance(p, TextPart))
            if not messages:
                system.extend(text_parts)
            else:
                messages.append(Message("system", text_parts))
        else:
            messages.append(Message("user", tuple(parts)))
    if assistant:
        flush_assistant()
    if outputs:
        flush_outputs()
    return messages


def request_to_ir(body: Any) -> Request:
    """Validate a Responses body and convert it to the IR."""
    if not isinstance(body, dict):
        raise RequestFormatError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise missing("model") if model is None else wrong_type("model", "a non-empty string", model)
    raw_input = body.get("input")
    if raw_input is None:
        raw_input = []
    if isinstance(raw_input, str):
        raw_input = [{"type": "message", "role": "user", "content": raw_input}]
    if not isinstance(raw_input, list):
        raise wrong_type("input", "a string or an array", raw_input)
    system: list[TextPart] = []
    instructions = optional_str(body, "instructions")
    if instructions:
        system.append(TextPart(instructions))
    tools: list[ToolSpec] = []
    _tools(body.get("tools"), tools, "tools")
    provider_data: dict[str, Any] = {}
    messages = _input_items(raw_input, system, tools, provider_data)
    reasoning_config = optional_dict(body, "reasoning")
    effort = reasoning_config.get("effort") if reasoning_config is not None else None
    if effort is not None and not isinstance(effort, str):
        raise wrong_type("reasoning.effort", "one of " + ", ".join(EFFORTS), effort)
    # An effort level this version does not know is left to the upstream's default.
    known_effort = EFFORTS.get(effort) if effort else None
    previous = optional_str(body, "previous_response_id")
    if previous:
        provider_data["previous_response_id"] = previous
    if optional_bool(body, "store") is False:
        provider_data["store"] = False
    text_config = optional_dict(body, "text")
    output_format = read_openai_format(text_config.get("format"), "text.format", nested=False) if text_config else None
    request = Request(
        model=model,
        system=tuple(system),
        messages=tuple(messages),
        max_output_tokens=token_count(body.get("max_output_tokens"), "max_output_tokens"),
        stream=optional_bool(body, "stream") is True,
        tools=tuple(tools),
        tool_choice=openai_tool_choice(body.get("tool_choice"), _named_tool),
        parallel_tool_calls=optional_bool(body, "parallel_tool_calls"),
        temperature=optional_number(body, "temperature"),
        top_p=optional_number(body, "top_p"),
        reasoning=Reasoning(known_effort != "none", known_effort) if known_effort is not None else None,
        user=optional_str(body, "safety_identifier") or optional_str(body, "user"),
        cache_key=optional_str(body, "prompt_cache_key"),
        output_format=output_format,
        provider_data=provider_data,
    )
    return summary_request(request) if provider_data.get(COMPACTION_TRIGGER) else request


# ---- IR → Responses (answers to the client) -----------------------------------------------------


def response_from_ir(
    response: Response, request: Request, response_id: str, next_id: Callable[[], str], created_at: int
) -> dict[str, Any]:
    """The Responses object for a complete IR response; `next_id` supplies fresh item ids."""
    index = ToolIndex.of(request.tools)
    output: list[dict[str, Any]] = []
    if request.provider_data.get(COMPACTION_TRIGGER):
        output.append(compaction_item("cmp_" + next_id(), summary_text(response.parts)))
        usage = response.usage
        return response_object(response_id, request, output, "completed", usage, created_at)
    for part in response.parts:
        if isinstance(part, ReasoningPart):
            if part.text:
                output.append(reasoning_item("rs_" + next_id(), part.text))
        elif isinstance(part, TextPart):
            output.append(message_item("msg_" + next_id(), part.text))
        elif isinstance(part, ToolCallPart):
            output.append(call_item("fc_" + next_id(), part, index))
    status, reason = status_of(response.stop_reason)
    return response_object(response_id, request, output, status, response.usage, created_at, reason)
