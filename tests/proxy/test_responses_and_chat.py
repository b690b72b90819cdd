"""Codex-style Responses and LangChain-style Chat Completions through the proxy to a Kimi-style
chat upstream, with the official openai SDK and LangChain clients as callers."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types.responses import Response

from tests.chat_grammar import assert_valid_chat_request
from tests.conftest import FAKE_BASETEN_KEY, Proxy, capture_names, load_capture
from tests.fake_upstream import Reply, ToolCall, Turn

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a shell command",
        "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
    },
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "Apply a patch. FREEFORM.",
        "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /.+/'},
    },
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Sub-agents",
        "tools": [
            {
                "type": "function",
                "name": "spawn_agent",
                "description": "Spawn",
                "strict": False,
                "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
            }
        ],
    },
    {"type": "web_search", "external_web_access": False},
]
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"


def client(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="codex-client-key", max_retries=0)


def script_three_calls(proxy: Proxy) -> None:
    assert proxy.upstream is not None
    proxy.upstream.script(
        Turn(
            reasoning="I will run, patch and delegate.",
            tool_calls=[
                ToolCall("exec_command", '{"cmd": "ls"}'),
                ToolCall("apply_patch", orjson.dumps({"input": PATCH}).decode()),
                ToolCall("multi_agent_v1__spawn_agent", '{"message": "check tests"}'),
            ],
        ),
        Turn(text="All done."),
    )


def three_calls_answer(proxy: Proxy, stream: bool, **options: Any) -> tuple[openai.OpenAI, dict[str, Any], Response]:
    """The SDK, the request (`do it` with TOOLS and `options`) and its answer, streamed or not, of three calls."""
    script_three_calls(proxy)
    sdk = client(proxy)
    request: dict[str, Any] = {
        "model": "gpt-5.5",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]}],
        "tools": TOOLS,
        **options,
    }
    if stream:
        with sdk.responses.stream(**request) as events:
            return sdk, request, events.get_final_response()
    return sdk, request, sdk.responses.create(**request)


def three_results(shell: Any, patch: Any, spawn: Any) -> list[dict[str, Any]]:
    """What the caller sends back for the shell, patch and spawn calls of `three_calls_answer`."""
    return [
        {"type": "function_call_output", "call_id": shell.call_id, "output": "a.txt"},
        {"type": "custom_tool_call_output", "call_id": patch.call_id, "output": "applied"},
        {"type": "function_call_output", "call_id": spawn.call_id, "output": "agent 7"},
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_responses_two_turn_tool_loop_with_function_custom_and_namespace_tools(kimi_proxy: Proxy, stream: bool) -> None:
    assert kimi_proxy.upstream is not None
    sdk, request, first = three_calls_answer(
        kimi_proxy,
        stream,
        reasoning={"effort": "medium", "summary": "auto"},
        include=["reasoning.encrypted_content"],
        store=False,
    )
    kinds = [item.type for item in first.output]
    assert kinds == ["reasoning", "function_call", "custom_tool_call", "function_call"]
    reasoning, shell, patch, spawn = first.output
    assert reasoning.summary[0].text == "I will run, patch and delegate."  # type: ignore[union-attr]
    assert reasoning.encrypted_content  # type: ignore[union-attr]
    assert (shell.name, orjson.loads(shell.arguments)) == ("exec_command", {"cmd": "ls"})  # type: ignore[union-attr]
    assert (patch.name, patch.input) == ("apply_patch", PATCH)  # type: ignore[union-attr]
    assert spawn.name == "spawn_agent"  # type: ignore[union-attr]
    assert spawn.namespace == "multi_agent_v1"  # type: ignore[union-attr]
    upstream_first = kimi_proxy.upstream.received[0].json
    names = [tool["function"]["name"] for tool in upstream_first["tools"]]
    assert names == ["exec_command", "apply_patch", "multi_agent_v1__spawn_agent"]
    assert upstream_first["reasoning_effort"] == "high"  # Kimi K3 has low/high/max; medium rounds up

    history = [*request["input"], *[item.model_dump(exclude_none=True) for item in first.output]]
    history += three_results(shell, patch, spawn)
    second = sdk.responses.create(**{**request, "input": history})
    assert second.output_text == "All done."
    upstream_second = kimi_proxy.upstream.received[1].json
    assert_valid_chat_request(upstream_second)
    assistant = upstream_second["messages"][1]
    assert assistant["reasoning_content"] == "I will run, patch and delegate."
    calls = assistant["tool_calls"]
    assert [c["function"]["name"] for c in calls] == [
        "exec_command",
        "apply_patch",
        "multi_agent_v1__spawn_agent",
    ]
    assert orjson.loads(calls[1]["function"]["arguments"]) == {"input": PATCH}
    assert [m["tool_call_id"] for m in upstream_second["messages"][2:5]] == [c["id"] for c in calls]


def test_responses_previous_response_id_and_unknown_id(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text="First answer."), Turn(text="Second answer."))
    sdk = client(kimi_proxy)
    first = sdk.responses.create(model="m", input="remember 42")
    second = sdk.responses.create(model="m", input="what number?", previous_response_id=first.id)
    assert second.output_text == "Second answer."
    messages = kimi_proxy.upstream.received[1].json["messages"]
    assert [m["content"] for m in messages] == ["remember 42", "First answer.", "what number?"]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model="m", input="x", previous_response_id="resp_unknown")
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert "resp_unknown" in caught.value.body["message"]  # type: ignore[index]


def test_responses_length_stop_is_incomplete(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text="cut off", finish_reason="length"))
    with client(kimi_proxy).responses.stream(model="m", input="long essay", max_output_tokens=5) as events:
        terminal = [event for event in events if event.type.startswith("response.") and hasattr(event, "response")]
    final = terminal[-1].response  # type: ignore[union-attr]
    assert terminal[-1].type == "response.incomplete"
    assert final.status == "incomplete"
    assert final.incomplete_details is not None and final.incomplete_details.reason == "max_output_tokens"
    assert kimi_proxy.upstream.received[0].json["max_completion_tokens"] == 5


def test_responses_upstream_failure_mid_stream_is_response_failed(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"partial"}}]}\n\n'
    kimi_proxy.upstream.script(Reply(200, [chunk, chunk], break_after=1))
    body = {"model": "m", "input": "x", "stream": True}
    text = httpx.post(kimi_proxy.url + "/v1/responses", json=body, timeout=10).text
    assert '"type":"response.failed"' in text
    assert '"type":"response.completed"' not in text


def test_openai_errors_for_bad_input_and_upstream_errors(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    bad = httpx.post(kimi_proxy.url + "/v1/responses", content=b"{nope", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert set(bad.json()["error"]) == {"message", "type", "param", "code"}
    missing = httpx.post(kimi_proxy.url + "/v1/chat/completions", json={"model": "m"})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "messages"
    kimi_proxy.upstream.script(Reply(429, [b'{"error":{"message":"slow down"}}'], "application/json"))
    with pytest.raises(openai.RateLimitError) as caught:
        client(kimi_proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert "slow down" in str(caught.value)
    ok = client(kimi_proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert ok.choices[0].message.content == "Hello from the fake upstream."


def test_chat_streaming_tools_reasoning_round_trip(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(
        Turn(reasoning="Need weather.", tool_calls=[ToolCall("get_weather", '{"city":"Oslo"}')]),
        Turn(text="Cold."),
    )
    sdk = client(kimi_proxy)
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "weather?"}]
    stream = sdk.chat.completions.create(model="m", messages=messages, tools=tools, stream=True)  # type: ignore[arg-type]
    chunks = list(stream)
    assert all(chunk.usage is None for chunk in chunks), "usage chunk must be hidden unless asked for"
    call_id = next(c.choices[0].delta.tool_calls[0].id for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert call_id == "functions.get_weather:0"
    # LangChain-style history: the assistant turn comes back without reasoning_content.
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call_id, "content": "-3 C"})
    final = sdk.chat.completions.create(model="m", messages=messages, tools=tools)  # type: ignore[arg-type]
    assert final.choices[0].message.content == "Cold."
    assert kimi_proxy.upstream.received[1].json["messages"][1]["reasoning_content"] == "Need weather."


SKIP_HEADERS = {"host", "content-length", "connection", "accept-encoding"}


@pytest.mark.parametrize("name", capture_names("codex_") + capture_names("deepagents_") + capture_names("langchain_"))
def test_capture_completes_through_proxy_to_chat_upstream(kimi_proxy: Proxy, name: str) -> None:
    assert kimi_proxy.upstream is not None
    capture = load_capture(name)
    kimi_proxy.upstream.script(Turn(reasoning="ok", text="Done."))
    headers = {k: v for k, v in capture["headers"] if k.lower() not in SKIP_HEADERS}
    response = httpx.post(kimi_proxy.url + capture["path"], json=capture["body"], headers=headers, timeout=20)
    assert response.status_code == 200, response.text
    upstream = kimi_proxy.upstream.received[-1]
    assert upstream.headers["authorization"] == f"Bearer {FAKE_BASETEN_KEY}"
    assert_valid_chat_request(upstream.json)
    if capture["body"].get("stream"):
        assert "Done." in response.text
        if capture["path"] == "/v1/responses":
            assert '"type":"response.completed"' in response.text
    else:
        assert "Done." in response.text
