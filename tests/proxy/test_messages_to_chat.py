"""Anthropic Messages in, OpenAI chat (Kimi-style) out: the official SDK against the real proxy."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.conftest import FAKE_BASETEN_KEY, FAKE_CLIENT_KEY, Proxy
from tests.fake_upstream import Reply, ToolCall, Turn

BASH_TOOL = {
    "name": "Bash",
    "description": "Run a shell command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
}


def client(proxy: Proxy, **kwargs: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0, **kwargs)  # type: ignore[arg-type]


def test_non_streaming_text_and_usage(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text="Hi there!", prompt_tokens=100, cached_tokens=40, completion_tokens=7))
    message = client(kimi_proxy).messages.create(
        model="claude-opus-5-5", max_tokens=1000, messages=[{"role": "user", "content": "say hi"}]
    )
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hi there!"  # type: ignore[union-attr]
    assert message.model == "claude-opus-5-5"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 60
    assert message.usage.cache_read_input_tokens == 40
    assert message.usage.output_tokens == 7
    sent = kimi_proxy.upstream.received[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {FAKE_BASETEN_KEY}"
    assert FAKE_CLIENT_KEY not in str(sent.headers)
    assert sent.json["model"] == "moonshotai/Kimi-K3"
    assert sent.json["messages"] == [{"role": "user", "content": "say hi"}]
    assert sent.json["max_completion_tokens"] == 1000


def test_streaming_text_with_reasoning_accumulates(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(reasoning="The user wants a greeting. ", text="Hello, wörld! 👋"))
    with client(kimi_proxy).messages.stream(
        model="claude-opus-5-5",
        max_tokens=500,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "say hi"}],
    ) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "The user wants a greeting. "  # type: ignore[union-attr]
    assert final.content[0].signature.startswith("swr1.")  # type: ignore[union-attr]
    assert final.content[1].text == "Hello, wörld! 👋"  # type: ignore[union-attr]
    assert final.usage.input_tokens == 100
    assert final.usage.cache_read_input_tokens == 20
    assert final.usage.output_tokens == 30
    sent = kimi_proxy.upstream.received[0].json
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["reasoning_effort"] == "low"


def test_two_turn_tool_loop_carries_reasoning_and_ids(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(
        Turn(reasoning="I should list files.", tool_calls=[ToolCall("Bash", '{"command": "ls -la"}')]),
        Turn(text="There are two files."),
    )
    sdk = client(kimi_proxy)
    messages: list[dict[str, object]] = [{"role": "user", "content": "what files are here?"}]
    with sdk.messages.stream(model="claude-opus-5-5", max_tokens=2000, tools=[BASH_TOOL], messages=messages) as stream:  # type: ignore[arg-type]
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    tool_use = next(block for block in first.content if block.type == "tool_use")
    assert tool_use.name == "Bash"
    assert tool_use.input == {"command": "ls -la"}
    assert tool_use.id.startswith("swt_") and ":" not in tool_use.id and "." not in tool_use.id
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "a.txt\nb.txt"}],
        }
    )
    with sdk.messages.stream(model="claude-opus-5-5", max_tokens=2000, tools=[BASH_TOOL], messages=messages) as stream:  # type: ignore[arg-type]
        second = stream.get_final_message()
    assert second.content[0].text == "There are two files."  # type: ignore[union-attr]
    upstream_messages = kimi_proxy.upstream.received[1].json["messages"]
    assistant = upstream_messages[1]
    assert assistant["tool_calls"][0]["id"] == "functions.Bash:0"
    assert assistant["reasoning_content"] == "I should list files."
    assert upstream_messages[2] == {
        "role": "tool",
        "tool_call_id": "functions.Bash:0",
        "content": "a.txt\nb.txt",
    }


def test_reasoning_restored_from_cache_when_client_drops_thinking(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(
        Turn(reasoning="Need to run it.", tool_calls=[ToolCall("Bash", '{"command":"pwd"}')]),
        Turn(text="done"),
    )
    sdk = client(kimi_proxy)
    first = sdk.messages.create(
        model="m",
        max_tokens=100,
        tools=[BASH_TOOL],
        messages=[{"role": "user", "content": "where am i"}],  # type: ignore[list-item]
    )
    tool_use = next(block for block in first.content if block.type == "tool_use")
    history = [
        {"role": "user", "content": "where am i"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_use.id, "name": "Bash", "input": tool_use.input}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "/tmp"}]},
    ]
    sdk.messages.create(model="m", max_tokens=100, tools=[BASH_TOOL], messages=history)  # type: ignore[arg-type]
    assert kimi_proxy.upstream.received[1].json["messages"][1]["reasoning_content"] == "Need to run it."


def test_parallel_tool_calls_stream_as_separate_blocks(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(
        Turn(
            text="Running both.",
            tool_calls=[ToolCall("Bash", '{"command":"ls"}'), ToolCall("Bash", '{"command":"pwd"}')],
        )
    )
    with client(kimi_proxy).messages.stream(
        model="m",
        max_tokens=100,
        tools=[BASH_TOOL],
        messages=[{"role": "user", "content": "go"}],  # type: ignore[list-item]
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    assert [b.input for b in final.content[1:]] == [{"command": "ls"}, {"command": "pwd"}]  # type: ignore[union-attr]
    assert len({b.id for b in final.content[1:]}) == 2  # type: ignore[union-attr]


def ask_with_blocks(proxy: Proxy, blocks: list[Any]) -> None:
    """One user turn made of content `blocks`, sent through the proxy."""
    client(proxy).messages.create(model="m", max_tokens=50, messages=[{"role": "user", "content": blocks}])


def test_images_base64_and_url_reach_upstream_as_image_url(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    ask_with_blocks(
        kimi_proxy,
        [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
            {"type": "text", "text": "what is this?"},
        ],
    )
    content = kimi_proxy.upstream.received[0].json["messages"][0]["content"]
    assert content == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "text", "text": "what is this?"},
    ]


def test_unreadable_document_block_reaches_upstream_as_a_note(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    ask_with_blocks(
        kimi_proxy,
        [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}],
    )
    content = kimi_proxy.upstream.received[0].json["messages"][0]["content"]
    assert content.startswith("[document could not be read: it is not a readable PDF")


@pytest.mark.parametrize(
    ("status", "error_class", "error_type"),
    [
        (401, anthropic.AuthenticationError, "authentication_error"),
        (403, anthropic.PermissionDeniedError, "permission_error"),
        (404, anthropic.NotFoundError, "not_found_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (503, anthropic.InternalServerError, "overloaded_error"),
        (529, anthropic.InternalServerError, "overloaded_error"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_map_to_anthropic_errors(
    kimi_proxy: Proxy, status: int, error_class: type[Exception], error_type: str, stream: bool
) -> None:
    assert kimi_proxy.upstream is not None
    body = b'{"error":{"message":"upstream says no to ' + FAKE_BASETEN_KEY.encode() + b'"}}'
    kimi_proxy.upstream.script(Reply(status, [body], "application/json", headers={"retry-after": "7"}))
    sdk = client(kimi_proxy)
    with pytest.raises(error_class) as caught:
        if stream:
            with sdk.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
                s.get_final_message()
        else:
            sdk.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    error = caught.value
    assert error.status_code == status  # type: ignore[attr-defined]
    assert error.body["error"]["type"] == error_type  # type: ignore[attr-defined]
    assert "upstream says no" in str(error)
    assert FAKE_BASETEN_KEY not in str(error.body)  # type: ignore[attr-defined]
    if status == 429:
        assert error.response.headers["retry-after"] == "7"  # type: ignore[attr-defined]
    # the proxy keeps serving
    ok = sdk.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "again"}])
    assert ok.content[0].text == "Hello from the fake upstream."  # type: ignore[union-attr]


def test_malformed_json_and_missing_fields_are_400(kimi_proxy: Proxy) -> None:
    import httpx

    response = httpx.post(
        kimi_proxy.url + "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "invalid_request_error"
    missing = httpx.post(kimi_proxy.url + "/v1/messages", json={"model": "m", "messages": []})
    assert missing.status_code == 400
    assert "max_tokens" in missing.json()["error"]["message"]
    wrong_type = httpx.post(kimi_proxy.url + "/v1/messages", json={"model": "m", "max_tokens": "ten", "messages": []})
    assert wrong_type.status_code == 400
    assert "max_tokens" in wrong_type.json()["error"]["message"]


def test_missing_key_is_401_naming_the_command(fake_chat: tuple[object, str], start_proxy: object) -> None:
    _fake, url = fake_chat  # type: ignore[misc]
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}"\n')  # type: ignore[operator]
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client(proxy).messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    message = str(caught.value)
    assert "BASETEN_API_KEY" in message and "switch keys set baseten" in message


def test_connection_refused_is_502_and_timeout_is_504(start_proxy: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "http://127.0.0.1:{dead_port}/v1"\n')  # type: ignore[operator]
    with pytest.raises(anthropic.InternalServerError) as caught:
        client(proxy).messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502
    assert "could not connect" in str(caught.value)


def test_stall_before_first_byte_times_out_as_504(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Reply(200, [b"data: {}\n\n"], delay_before=5))
    with pytest.raises(anthropic.APIStatusError) as caught:
        client(kimi_proxy).messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 504
    assert caught.value.body["error"]["type"] == "timeout_error"  # type: ignore[index]


def test_failure_mid_stream_becomes_in_band_error_event(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    chunks = [
        b'data: {"choices":[{"index":0,"delta":{"content":"partial "}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":"answer"}}]}\n\n',
    ]
    kimi_proxy.upstream.script(Reply(200, chunks, break_after=1))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client(kimi_proxy).messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        ) as s:
            s.get_final_message()
    assert "upstream" in str(caught.value)
    records = kimi_proxy.sink.wait(1)
    assert records[-1].outcome in ("transport_error", "incomplete_stream")


@pytest.mark.parametrize("server", ["kimi_proxy", "kimi_proxy_h11"], ids=["httptools", "h11"])
def test_ping_sent_during_upstream_silence(request: pytest.FixtureRequest, server: str) -> None:
    import httpx

    kimi_proxy: Proxy = request.getfixturevalue(server)
    assert kimi_proxy.upstream is not None
    chunks = [
        b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":"b"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    kimi_proxy.upstream.script(Reply(200, chunks, delay_between=0.7))
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    text = httpx.post(kimi_proxy.url + "/v1/messages", json=body, timeout=10).text
    assert "event: ping" in text
    assert text.index("event: message_start") < text.index("event: ping")
    assert text.rstrip().endswith('data: {"type":"message_stop"}')


def test_records_carry_usage_and_timings(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(
        Turn(text="ok", prompt_tokens=500, cached_tokens=300, completion_tokens=12, reasoning_tokens=4)
    )
    with client(kimi_proxy).messages.stream(
        model="claude-opus-5-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    ) as s:
        s.get_final_message()
    record = kimi_proxy.sink.wait(1)[0]
    assert record.outcome == "completed"
    assert (record.input_tokens, record.cache_read_tokens, record.output_tokens, record.reasoning_tokens) == (
        200,
        300,
        12,
        4,
    )
    assert record.requested_model == "claude-opus-5-5"
    assert record.served_model == "moonshotai/Kimi-K3"
    assert record.ttft_ms is not None and 0 < record.ttft_ms <= record.duration_ms
