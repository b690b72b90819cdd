"""Every inbound API against every upstream API: text, a tool call, and streamed reasoning,
with each API's official SDK as the caller (its stream accumulator must accept every stream)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.conftest import Proxy
from tests.fake_upstream import ToolCall, Turn

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@dataclass
class Outcome:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0


def via_anthropic(proxy: Proxy, tools: bool, thinking: bool) -> Outcome:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="client-key", max_retries=0)
    kwargs: dict[str, Any] = {}
    if tools:
        kwargs["tools"] = [
            {
                "name": WEATHER["name"],
                "description": WEATHER["description"],
                "input_schema": WEATHER["parameters"],
            }
        ]
    if thinking:
        kwargs["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    with client.messages.stream(
        model="claude-sonnet-test",
        max_tokens=4096,
        messages=[{"role": "user", "content": "weather in Paris?"}],
        **kwargs,
    ) as stream:
        message = stream.get_final_message()
    outcome = Outcome(
        input_tokens=message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0),
        output_tokens=message.usage.output_tokens,
    )
    for block in message.content:
        if block.type == "text":
            outcome.text += block.text
        elif block.type == "thinking":
            outcome.reasoning += block.thinking
        elif block.type == "tool_use":
            outcome.calls.append((block.name, dict(block.input)))  # type: ignore[arg-type]
    if tools:
        assert message.stop_reason == "tool_use"
    return outcome


def via_chat(proxy: Proxy, tools: bool, thinking: bool) -> Outcome:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="client-key", max_retries=0)
    kwargs: dict[str, Any] = {}
    if tools:
        kwargs["tools"] = [{"type": "function", "function": WEATHER}]
    if thinking:
        kwargs["reasoning_effort"] = "high"
    stream = client.chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "weather in Paris?"}],
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    outcome = Outcome()
    arguments: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    finish = None
    for chunk in stream:
        if chunk.usage is not None:
            outcome.input_tokens = chunk.usage.prompt_tokens
            outcome.output_tokens = chunk.usage.completion_tokens
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        finish = chunk.choices[0].finish_reason or finish
        outcome.text += delta.content or ""
        outcome.reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        for call in delta.tool_calls or []:
            if call.function and call.function.name:
                names[call.index] = call.function.name
            if call.function and call.function.arguments:
                arguments.setdefault(call.index, []).append(call.function.arguments)
    for index, name in names.items():
        outcome.calls.append((name, orjson.loads("".join(arguments.get(index, [])))))
    assert finish == ("tool_calls" if tools else "stop")
    return outcome


def via_responses(proxy: Proxy, tools: bool, thinking: bool) -> Outcome:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="client-key", max_retries=0)
    kwargs: dict[str, Any] = {}
    if tools:
        kwargs["tools"] = [{"type": "function", **WEATHER}]
    if thinking:
        kwargs["reasoning"] = {"effort": "high", "summary": "auto"}
    with client.responses.stream(model="gpt-test", input="weather in Paris?", **kwargs) as stream:
        response = stream.get_final_response()
    assert response.status == "completed"
    outcome = Outcome(
        input_tokens=response.usage.input_tokens if response.usage else 0,
        output_tokens=response.usage.output_tokens if response.usage else 0,
    )
    for item in response.output:
        if item.type == "message":
            outcome.text += "".join(part.text for part in item.content if part.type == "output_text")
        elif item.type == "reasoning":
            outcome.reasoning += "".join(part.text for part in item.summary)
        elif item.type == "function_call":
            outcome.calls.append((item.name, orjson.loads(item.arguments)))
    return outcome


CALLERS: dict[str, Callable[[Proxy, bool, bool], Outcome]] = {
    "anthropic": via_anthropic,
    "openai-chat": via_chat,
    "openai-responses": via_responses,
}
UPSTREAM_PATHS = {
    "openai-chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "openai-responses": "/v1/responses",
}


@pytest.mark.parametrize("upstream_api", ["openai-chat", "anthropic", "openai-responses"])
@pytest.mark.parametrize("inbound_api", ["anthropic", "openai-chat", "openai-responses"])
@pytest.mark.parametrize("scenario", ["text", "tool_call", "reasoning"])
def test_inbound_to_upstream(
    multi_proxy: Callable[[str], Proxy], inbound_api: str, upstream_api: str, scenario: str
) -> None:
    proxy = multi_proxy(upstream_api)
    assert proxy.upstream is not None
    turn = {
        "text": Turn(text="Sunny, 21 °C in Paris.", prompt_tokens=50, cached_tokens=10, completion_tokens=9),
        "tool_call": Turn(
            tool_calls=[ToolCall("get_weather", '{"city": "Paris"}')],
            prompt_tokens=60,
            cached_tokens=0,
            completion_tokens=12,
        ),
        "reasoning": Turn(
            reasoning="The user wants weather; I know it.",
            text="Sunny.",
            prompt_tokens=70,
            cached_tokens=30,
            completion_tokens=20,
        ),
    }[scenario]
    proxy.upstream.script(turn)
    outcome = CALLERS[inbound_api](proxy, scenario == "tool_call", scenario == "reasoning")
    received = proxy.upstream.received[-1]
    assert received.path == UPSTREAM_PATHS[upstream_api]
    assert outcome.text == turn.text
    assert outcome.calls == [(c.name, orjson.loads(c.arguments)) for c in turn.tool_calls]
    if scenario == "reasoning":
        assert outcome.reasoning == turn.reasoning
    assert outcome.input_tokens == turn.prompt_tokens
    assert outcome.output_tokens == turn.completion_tokens
    record = proxy.sink.wait(1)[-1]
    assert record.outcome == "completed"
    assert record.input_tokens + record.cache_read_tokens == turn.prompt_tokens
    assert record.cache_read_tokens == turn.cached_tokens
    assert record.inbound_api == inbound_api and record.upstream_api == upstream_api
