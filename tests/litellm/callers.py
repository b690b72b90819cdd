"""The three inbound APIs as real SDK callers, each reduced to what a user sees: text, reasoning and tool calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

INBOUNDS = ("anthropic", "openai-chat", "openai-responses")
TOOL_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


@dataclass
class Answer:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(id, name, arguments) per tool call, in order."""


def ask(inbound: str, url: str, stream: bool, prompt: str = "Read a and b.", role: str | None = None) -> Answer:
    """Ask the proxy at `url` one question offering a `read` tool, as a real SDK client of `inbound` would."""
    headers = {"x-switch-role": role} if role else None
    if inbound == "anthropic":
        return _anthropic(url, stream, prompt, headers)
    if inbound == "openai-chat":
        return _chat(url, stream, prompt, headers)
    return _responses(url, stream, prompt, headers)


def _anthropic(url: str, stream: bool, prompt: str, headers: dict[str, str] | None) -> Answer:
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-caller", max_retries=0, default_headers=headers)
    arguments: dict[str, Any] = {
        "model": "claude-opus-5-5",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": prompt}],
        "tools": [{"name": "read", "description": "Read a file.", "input_schema": TOOL_SCHEMA}],
    }
    if stream:
        with client.messages.stream(**arguments) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**arguments)
    answer = Answer()
    for block in message.content:
        if block.type == "text":
            answer.text += block.text
        elif block.type == "thinking":
            answer.reasoning += block.thinking
        elif block.type == "tool_use":
            answer.calls.append((block.id, block.name, dict(block.input)))  # type: ignore[call-overload]
    return answer


def _chat(url: str, stream: bool, prompt: str, headers: dict[str, str] | None) -> Answer:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-caller", max_retries=0, default_headers=headers)
    tools: Any = [{"type": "function", "function": {"name": "read", "description": "Read.", "parameters": TOOL_SCHEMA}}]
    messages: Any = [{"role": "user", "content": prompt}]
    answer = Answer()
    if not stream:
        completion = client.chat.completions.create(model="gpt-5.5", messages=messages, tools=tools)
        message = completion.choices[0].message
        answer.text = message.content or ""
        answer.reasoning = getattr(message, "reasoning_content", None) or ""
        for call in message.tool_calls or []:
            assert call.type == "function"
            answer.calls.append((call.id, call.function.name, json.loads(call.function.arguments)))
        return answer
    pieces: dict[int, list[str]] = {}
    for chunk in client.chat.completions.create(model="gpt-5.5", messages=messages, tools=tools, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        answer.text += delta.content or ""
        answer.reasoning += getattr(delta, "reasoning_content", None) or ""
        for call in delta.tool_calls or []:
            if call.id:
                answer.calls.append((call.id, call.function.name or "" if call.function else "", {}))
                pieces[call.index] = []
            if call.function and call.function.arguments:
                pieces[call.index].append(call.function.arguments)
    answer.calls = [(i, n, json.loads("".join(pieces[k]))) for k, (i, n, _) in enumerate(answer.calls)]
    return answer


def _responses(url: str, stream: bool, prompt: str, headers: dict[str, str] | None) -> Answer:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-caller", max_retries=0, default_headers=headers)
    tools: Any = [{"type": "function", "name": "read", "description": "Read.", "parameters": TOOL_SCHEMA}]
    if stream:
        response = None
        for event in client.responses.create(model="gpt-5.5", input=prompt, tools=tools, stream=True):
            if event.type == "response.completed":
                response = event.response
        assert response is not None, "the stream never completed"
    else:
        response = client.responses.create(model="gpt-5.5", input=prompt, tools=tools)
    answer = Answer()
    for item in response.output:
        if item.type == "message":
            answer.text += "".join(part.text for part in item.content if part.type == "output_text")
        elif item.type == "reasoning":
            answer.reasoning += "".join(part.text for part in item.content or [])
            answer.reasoning += "".join(part.text for part in item.summary)
        elif item.type == "function_call":
            answer.calls.append((item.call_id, item.name, json.loads(item.arguments)))
    return answer
