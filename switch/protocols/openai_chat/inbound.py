"""Chat Completions as an API we serve: request body → IR, IR → response body and stream."""

from __future__ import annotations

import time
from typing import Any

import orjson

from switch.errors import ClientRequestError
from switch.protocols.ir import (
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
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    Usage,
    image_from_url,
)
from switch.protocols.openai_chat.response import reasoning_of

_dumps = orjson.dumps
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause": "stop",
}


def _parts(content: Any, where: str) -> list[TextPart | ImagePart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise ClientRequestError(f"{where}.content: Input should be a string or a list", param=where)
    parts: list[TextPart | ImagePart] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(str(block.get("text") or "")))
        elif kind == "image_url":
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                parts.append(image_from_url(url))
    return parts


def request_to_ir(body: Any) -> Request:
    """Validate a chat completions body and convert it to the IR."""
    if not isinstance(body, dict):
        raise ClientRequestError("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ClientRequestError("model: Field required", param="model")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ClientRequestError("messages: Input should be a non-empty list", param="messages")
    system: list[TextPart] = []
    messages: list[Message] = []
    results: list[Part] = []
    for index, raw in enumerate(raw_messages):
        where = f"messages.{index}"
        if not isinstance(raw, dict):
            raise ClientRequestError(f"{where}: Input should be an object", param="messages")
        role = raw.get("role")
        if role == "tool":
            call_id = raw.get("tool_call_id")
            if not isinstance(call_id, str):
                raise ClientRequestError(f"{where}.tool_call_id: Field required", param="messages")
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
            for call in raw.get("tool_calls") or []:
                function = call.get("function") or {} if isinstance(call, dict) else {}
                name = function.get("name")
                call_id = call.get("id") if isinstance(call, dict) else None
                if not isinstance(name, str) or not isinstance(call_id, str):
                    raise ClientRequestError(f"{where}.tool_calls: id and function.name required", param="messages")
                parts.append(ToolCallPart(call_id, name, str(function.get("arguments") or "")))
            messages.append(Message("assistant", tuple(parts)))
        else:
            raise ClientRequestError(
                f"{where}.role: Input should be 'system', 'developer', 'user', 'assistant' or 'tool'",
                param="messages",
            )
    if results:
        messages.append(Message("user", tuple(results)))
    tools: list[ToolSpec] = []
    for index, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ClientRequestError(f"tools.{index}.function.name: Field required", param="tools")
        parameters = function.get("parameters")
        tools.append(
            ToolSpec(
                function["name"],
                function.get("description"),
                parameters if isinstance(parameters, dict) else None,
            )
        )
    choice = body.get("tool_choice")
    tool_choice = None
    if choice in ("auto", "none", "required"):
        tool_choice = ToolChoice(choice)
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        tool_choice = ToolChoice("tool", str(choice["function"].get("name") or ""))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)):
        raise ClientRequestError("max_tokens: Input should be a valid integer", param="max_tokens")
    stop = body.get("stop")
    stops = (
        (stop,)
        if isinstance(stop, str)
        else tuple(s for s in stop if isinstance(s, str))
        if isinstance(stop, list)
        else ()
    )
    effort = body.get("reasoning_effort")
    reasoning_config = Reasoning(effort != "none", effort) if effort in _EFFORTS else None
    options = body.get("stream_options")
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    user = body.get("user") or body.get("safety_identifier")
    cache_key = body.get("prompt_cache_key")
    return Request(
        model=model,
        system=tuple(system),
        messages=tuple(messages),
        max_output_tokens=max_tokens,
        stream=body.get("stream") is True,
        tools=tuple(tools),
        tool_choice=tool_choice,
        parallel_tool_calls=body.get("parallel_tool_calls")
        if isinstance(body.get("parallel_tool_calls"), bool)
        else None,
        temperature=float(temperature)
        if isinstance(temperature, int | float) and not isinstance(temperature, bool)
        else None,
        top_p=float(top_p) if isinstance(top_p, int | float) and not isinstance(top_p, bool) else None,
        stop=stops,
        reasoning=reasoning_config,
        user=user if isinstance(user, str) else None,
        cache_key=cache_key if isinstance(cache_key, str) else None,
        provider_data={"include_usage": isinstance(options, dict) and options.get("include_usage") is True},
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


def response_from_ir(response: Response, request: Request, completion_id: str) -> dict[str, Any]:
    """The chat completion object for a complete IR response."""
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
        "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": FINISH_REASONS[stop], "logprobs": None}],
        "usage": usage_to_wire(response.usage),
    }


class StreamEncoder:
    """Encodes one response stream as chat completion chunks (`data:` lines, `[DONE]` last)."""

    def __init__(self, completion_id: str, request: Request) -> None:
        self.out: list[bytes] = []
        self.request = request
        self.include_usage = bool(request.provider_data.get("include_usage"))
        self.final_usage = Usage()
        self.usage_seen = False
        self.stop_reason: StopReason | None = None
        self.tool_call_ids: list[str] = []
        self.reasoning_chunks: list[str] = []
        self._started = False
        self._done = False
        self._tool_positions: dict[int, int] = {}
        self.emitted_chars = 0
        head = _dumps(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": request.model,
            }
        )
        self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,"delta":'
        self._usage_head = b"data: " + head[:-1] + b',"choices":[],"usage":'

    @property
    def content_started(self) -> bool:
        """Whether a content chunk has been sent."""
        return self._started

    def start(self) -> None:
        """Nothing to announce: chat streams begin with their first chunk."""

    def ping(self) -> bytes:
        """An SSE comment (chat has no ping chunk)."""
        return b": keep-alive\n\n"

    def _chunk(self, delta: bytes, finish: bytes = b"null") -> None:
        self.emitted_chars += len(delta) - 14
        if not self._started:
            self._started = True
            self.out.append(self._head + b'{"role":"assistant","content":""},"finish_reason":null}]}\n\n')
        self.out.append(self._head + delta + b',"finish_reason":' + finish + b"}]}\n\n")

    def reasoning_delta(self, text: str) -> None:
        if text:
            self.reasoning_chunks.append(text)
            self._chunk(b'{"reasoning_content":' + _dumps(text) + b"}")

    def text_delta(self, text: str) -> None:
        if text:
            self._chunk(b'{"content":' + _dumps(text) + b"}")

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        position = len(self._tool_positions)
        self._tool_positions[index] = position
        self.tool_call_ids.append(call_id)
        call = {
            "index": position,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        self._chunk(b'{"tool_calls":[' + _dumps(call) + b"]}")

    def tool_call_delta(self, index: int, fragment: str) -> None:
        if fragment:
            position = self._tool_positions.get(index, 0)
            self._chunk(
                b'{"tool_calls":[{"index":'
                + str(position).encode()
                + b',"function":{"arguments":'
                + _dumps(fragment)
                + b"}}]}"
            )

    def usage(self, usage: Usage) -> None:
        self.final_usage = usage
        self.usage_seen = True

    def finish(self, stop_reason: StopReason, stop_sequence: str | None = None) -> None:
        self.stop_reason = stop_reason

    def end(self) -> None:
        """The finish chunk, the usage chunk when the client asked for it, and `[DONE]`."""
        if self._done:
            return
        stop: StopReason = self.stop_reason or "end_turn"
        if self.tool_call_ids and stop == "end_turn":
            stop = "tool_use"
        elif not self.tool_call_ids and stop == "tool_use":
            stop = "end_turn"
        self._chunk(b"{}", b'"' + FINISH_REASONS[stop].encode() + b'"')
        if self.include_usage:
            self.out.append(self._usage_head + _dumps(usage_to_wire(self.final_usage)) + b"}\n\n")
        self.out.append(b"data: [DONE]\n\n")
        self._done = True

    def fail(self, status: int, message: str) -> None:
        """An error object in the stream (what OpenAI sends on a mid-stream failure), then `[DONE]`."""
        if self._done:
            return
        kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
        self.out.append(
            b"data: " + _dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}) + b"\n\n"
        )
        self.out.append(b"data: [DONE]\n\n")
        self._done = True

    def take(self) -> bytes:
        """Everything encoded since the last call."""
        if not self.out:
            return b""
        data = b"".join(self.out)
        self.out.clear()
        return data
