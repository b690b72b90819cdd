"""LangChain chat models as real callers: a bound tool is called through the proxy, and the model name
switch offers LangChain leaves role detection to switch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from switch.wiring import CLASSIFYING_MODEL
from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream, ToolCall, Turn


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


# ---- the classifying model name: deepagents' subagents keep their own route -------------------------

ROUTED_PRESET = """
description = "LangChain calls split by role; other callers elsewhere"
[default]
orchestrator = "baseten/other-orchestrator"
subagent = "baseten/other-subagent"
background = "baseten/other-subagent"
[langchain]
orchestrator = "baseten/lc-orchestrator"
subagent = "baseten/lc-subagent"
background = "baseten/lc-subagent"
"""
DEEPAGENTS_SYSTEM = "# Deep Agents Code (dcode)\n\nYou are a deep agent, an AI assistant that helps with code."
# What deepagents puts before a forked subagent's task (deepagents/middleware/subagents.py).
SUBAGENT_PREAMBLE = (
    "[The messages above are a prior conversation you are continuing as the subagent that was just invoked. "
    "Your actual task is below.]\n\n"
)


@tool
def task(description: str, subagent_type: str) -> str:
    """Delegate a task to a subagent."""
    return "done"


@pytest.fixture
def routed_proxy(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Proxy:
    """The proxy with a preset that sends LangChain's orchestrator and subagents to different models."""
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "split.toml").write_text(ROUTED_PRESET)
    (isolated_home / "active-preset").write_text("split\n")
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}"\n', read_timeout=5.0)
    proxy.upstream = fake
    return proxy


def deepagents_history(subagent: bool) -> list[SystemMessage | HumanMessage]:
    """What deepagents sends: its system prompt, the user's turn, and for a subagent its preamble."""
    history: list[SystemMessage | HumanMessage] = [SystemMessage(DEEPAGENTS_SYSTEM), HumanMessage("check the repo")]
    if subagent:
        history.append(HumanMessage(SUBAGENT_PREAMBLE + "Report that all is good."))
    return history


def langchain_models(proxy: Proxy) -> dict[str, ChatOpenAI | ChatAnthropic]:
    """Plain LangChain chat models pointed at the model name switch offers LangChain, as `langchain env` says."""
    openai_models = {
        api: ChatOpenAI(
            model=CLASSIFYING_MODEL,
            base_url=proxy.url + "/v1",
            api_key="lc-client-key",  # type: ignore[arg-type]
            use_responses_api=api == "responses",
            max_retries=0,
        )
        for api in ("chat-completions", "responses")
    }
    return {
        **openai_models,
        "anthropic": ChatAnthropic(
            model_name=CLASSIFYING_MODEL,
            base_url=proxy.url,
            api_key="lc-client-key",  # type: ignore[arg-type]
            max_retries=0,
            timeout=20,
            stop=None,
        ),
    }


@pytest.mark.parametrize("client", ["chat-completions", "responses", "anthropic"])
def test_deepagents_style_subagent_on_the_classifying_model_gets_the_subagent_route(
    routed_proxy: Proxy, client: str
) -> None:
    assert routed_proxy.upstream is not None
    routed_proxy.upstream.script(Turn(text="orchestrating"), Turn(text="SUBAGENT REPORT: all good."))
    model = langchain_models(routed_proxy)[client].bind_tools([task, get_weather])
    assert model.invoke(deepagents_history(subagent=False)).text == "orchestrating"
    assert model.invoke(deepagents_history(subagent=True)).text == "SUBAGENT REPORT: all good."
    served = [received.json["model"] for received in routed_proxy.upstream.received]
    assert served == ["lc-orchestrator", "lc-subagent"]
    records = routed_proxy.sink.wait(2)
    assert [(r.harness, r.role, r.served_model) for r in records] == [
        ("langchain", "orchestrator", "lc-orchestrator"),
        ("langchain", "subagent", "lc-subagent"),
    ]
    assert {r.requested_model for r in records} == {CLASSIFYING_MODEL}


def test_plain_chat_openai_on_the_classifying_model_gets_the_langchain_routes(routed_proxy: Proxy) -> None:
    # The OpenAI SDK inside ChatOpenAI sends nothing that names LangChain; the model name switch gave it does.
    assert routed_proxy.upstream is not None
    routed_proxy.upstream.script(Turn(text="hello"))
    reply = langchain_models(routed_proxy)["chat-completions"].invoke([HumanMessage("hi")])
    assert reply.text == "hello"
    assert routed_proxy.upstream.received[0].json["model"] == "lc-orchestrator"
    (record,) = routed_proxy.sink.wait(1)
    assert (record.harness, record.role) == ("langchain", "orchestrator")
