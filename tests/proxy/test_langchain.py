"""LangChain chat models as real callers: a bound tool is called through the proxy."""

from __future__ import annotations

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.conftest import Proxy
from tests.fake_upstream import ToolCall, Turn


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


def run_tool_loop(model: ChatOpenAI | ChatAnthropic) -> tuple[AIMessage, AIMessage]:
    bound = model.bind_tools([get_weather])
    history: list[HumanMessage | AIMessage | ToolMessage] = [HumanMessage("weather in Rome?")]
    first = bound.invoke(history)
    assert isinstance(first, AIMessage)
    history.append(first)
    for call in first.tool_calls:
        history.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
    second = bound.invoke(history)
    assert isinstance(second, AIMessage)
    return first, second


def script(proxy: Proxy) -> None:
    assert proxy.upstream is not None
    proxy.upstream.script(
        Turn(reasoning="Weather needs the tool.", tool_calls=[ToolCall("get_weather", '{"city": "Rome"}')]),
        Turn(text="It is sunny in Rome."),
    )


@pytest.mark.parametrize("use_responses_api", [False, True])
@pytest.mark.parametrize("streaming", [False, True])
def test_chat_openai_tool_call(kimi_proxy: Proxy, use_responses_api: bool, streaming: bool) -> None:
    script(kimi_proxy)
    model = ChatOpenAI(
        model="gpt-fake-model",
        base_url=kimi_proxy.url + "/v1",
        api_key="lc-client-key",  # type: ignore[arg-type]
        use_responses_api=use_responses_api,
        streaming=streaming,
        max_retries=0,
    )
    first, second = run_tool_loop(model)
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [("get_weather", {"city": "Rome"})]
    assert second.text == "It is sunny in Rome."
    assert kimi_proxy.upstream is not None
    assert kimi_proxy.upstream.received[1].json["messages"][1]["reasoning_content"] == "Weather needs the tool."


@pytest.mark.parametrize("streaming", [False, True])
def test_chat_anthropic_tool_call(kimi_proxy: Proxy, streaming: bool) -> None:
    script(kimi_proxy)
    model = ChatAnthropic(
        model_name="claude-fake-model",
        base_url=kimi_proxy.url,
        api_key="lc-client-key",  # type: ignore[arg-type]
        streaming=streaming,
        max_retries=0,
        timeout=20,
        stop=None,
    )
    first, second = run_tool_loop(model)
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [("get_weather", {"city": "Rome"})]
    assert second.text == "It is sunny in Rome."
    assert kimi_proxy.upstream is not None
    assert kimi_proxy.upstream.received[1].json["messages"][1]["reasoning_content"] == "Weather needs the tool."
