"""A harness wired with a `switch/...` model name (deepagents-code's `switch/auto`) whose call is routed to
the native provider: the native upstream gets a model it knows, and the ledger says which one served."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from switch.routing.presets import set_active
from switch.wiring import CLASSIFYING_MODEL
from tests.conftest import FAKE_BASETEN_KEY, Proxy, load_capture
from tests.fake_upstream import FakeChatUpstream, FakeUpstream, Reply, Turn
from tests.servers import serve

NATIVE_OPENAI_DEFAULT = "gpt-5.5"  # `[pricing] baseline_openai` when config.toml does not set it
CLIENT_KEY = "sk-fake-openai-client-key-0123"


def deepagents_chat_request(model: str) -> dict[str, Any]:
    """deepagents-code's captured orchestrator request, as ChatOpenAI sends it over Chat Completions
    (`use_responses_api = False`, the way `switch langchain on` wires dcode)."""
    body = load_capture("deepagents_code_openai/01_POST_v1_responses.json")["body"]
    system, user = body["input"][0], body["input"][1]
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            },
        }
        for tool in body["tools"]
    ]
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "".join(part["text"] for part in system["content"])},
            {"role": "user", "content": user["content"]},
        ],
        "tools": tools,
    }


@pytest.fixture
def hybrid_proxy(
    start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Proxy, FakeUpstream, FakeChatUpstream]]:
    """The shipped `hybrid` preset: orchestrator native (a loopback OpenAI), subagents on a loopback Kimi."""
    native, kimi = FakeUpstream(), FakeChatUpstream()
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    with serve(native) as native_url, serve(kimi) as kimi_url:
        set_active("hybrid")
        proxy = start_proxy(
            f'[providers.openai]\nbase_url = "{native_url}/v1"\n[providers.baseten]\nbase_url = "{kimi_url}/v1"\n'
        )
        yield proxy, native, kimi


@pytest.mark.parametrize("stream", [False, True])
def test_deepagents_switch_auto_on_the_native_route_sends_a_real_model(
    hybrid_proxy: tuple[Proxy, FakeUpstream, FakeChatUpstream], stream: bool
) -> None:
    proxy, native, kimi = hybrid_proxy
    native.script(Turn(text="hi from the native model"))
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    request = deepagents_chat_request(CLASSIFYING_MODEL)
    if stream:
        chunks = list(client.chat.completions.create(**request, stream=True))
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    else:
        text = client.chat.completions.create(**request).choices[0].message.content or ""
    assert text == "hi from the native model"
    assert kimi.received == [] and len(native.received) == 1
    sent = native.received[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json["model"] == NATIVE_OPENAI_DEFAULT
    assert sent.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    # Only the model changed: the rest of the body is the harness's own.
    assert {k: v for k, v in sent.json.items() if k not in ("model", "stream", "stream_options")} == {
        k: v for k, v in request.items() if k != "model"
    }
    record = proxy.sink.wait(1)[0]
    assert (record.harness, record.role, record.provider) == ("langchain", "orchestrator", "openai")
    assert (record.requested_model, record.served_model, record.outcome) == (
        CLASSIFYING_MODEL,
        NATIVE_OPENAI_DEFAULT,
        "completed",
    )


def _chat_chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {"id": "chatcmpl-native", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.5"}
    return b"data: " + orjson.dumps({**chunk, "choices": choices, **extra}) + b"\n\n"


def test_a_stream_whose_client_leaves_at_done_before_the_upstream_ends_is_recorded_as_completed(
    hybrid_proxy: tuple[Proxy, FakeUpstream, FakeChatUpstream],
) -> None:
    # openai-python closes the response as soon as it reads `[DONE]`; this upstream ends its body two seconds
    # after sending it, so the client is gone while the proxy still waits for that end. The client had the whole
    # answer: the ledger must say completed, with the usage the stream carried, not client_cancelled.
    proxy, native, _kimi = hybrid_proxy
    stream = b"".join(
        [
            _chat_chunk([{"index": 0, "delta": {"role": "assistant", "content": "all of it"}, "finish_reason": None}]),
            _chat_chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            _chat_chunk([], usage={"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}),
            b"data: [DONE]\n\n",
        ]
    )
    native.script(Reply(200, [stream], delay_between=2.0))
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    request = deepagents_chat_request(CLASSIFYING_MODEL)
    chunks = list(client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}))
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == "all of it"
    record = proxy.sink.wait(1)[0]
    assert record.outcome == "completed"
    assert (record.input_tokens, record.output_tokens, record.usage_reported) == (11, 5, True)


def test_role_alias_on_the_native_route_uses_the_configured_native_model(
    start_proxy: Callable[..., Proxy], isolated_home: Path
) -> None:
    native = FakeUpstream()
    with serve(native) as native_url:
        set_active("hybrid")
        proxy = start_proxy(
            f'[providers.openai]\nbase_url = "{native_url}/v1"\n[pricing]\nbaseline_openai = "gpt-6.2-sol"\n'
        )
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
        answer = client.responses.create(model="switch/orchestrator", input="say hi")
    assert answer.output_text == "Hello from the fake upstream."
    assert native.received[0].path == "/v1/responses"
    assert native.received[0].json["model"] == "gpt-6.2-sol"
    assert proxy.sink.wait(1)[0].served_model == "gpt-6.2-sol"


def test_a_real_model_name_on_the_native_route_is_passed_through_byte_for_byte(
    hybrid_proxy: tuple[Proxy, FakeUpstream, FakeChatUpstream],
) -> None:
    proxy, native, _kimi = hybrid_proxy
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    request = deepagents_chat_request("gpt-5.4-mini")
    response = client.chat.completions.with_raw_response.create(**request)
    assert response.http_request.content == native.received[0].body
    assert native.received[0].json["model"] == "gpt-5.4-mini"
    assert proxy.sink.wait(1)[0].served_model == "gpt-5.4-mini"
