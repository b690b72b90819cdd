"""Native pass-through, count_tokens, models, health and start-up probes, disconnects."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import anthropic
import httpx
import orjson
import pytest

from tests.conftest import FAKE_CLIENT_KEY, Proxy, load_capture
from tests.fake_upstream import ANTHROPIC_STREAM, FakeAnthropicUpstream, Reply
from tests.servers import hang_up_once_streaming, serve, wait_until


@pytest.fixture
def native_proxy(start_proxy: Callable[..., Proxy]) -> Iterator[tuple[Proxy, FakeAnthropicUpstream]]:
    fake = FakeAnthropicUpstream()
    with serve(fake) as url:
        proxy = start_proxy(f'[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n')
        yield proxy, fake


def test_native_stream_is_forwarded_byte_for_byte_with_caller_credentials(
    native_proxy: tuple[Proxy, FakeAnthropicUpstream],
) -> None:
    proxy, fake = native_proxy
    body = {
        "model": "claude-opus-5-5",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = httpx.post(
        proxy.url + "/v1/messages?beta=true",
        content=orjson.dumps(body),
        headers={
            "x-api-key": FAKE_CLIENT_KEY,
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "claude-code-20250219,effort-2025-11-24",
            "content-type": "application/json",
        },
    )
    assert response.status_code == 200
    assert response.content == ANTHROPIC_STREAM
    received = fake.received[0]
    assert received.path == "/v1/messages?beta=true"
    assert received.headers["x-api-key"] == FAKE_CLIENT_KEY
    assert received.headers["anthropic-beta"] == "claude-code-20250219,effort-2025-11-24"
    assert received.body == orjson.dumps(body)
    record = proxy.sink.wait(1)[0]
    assert (
        record.input_tokens,
        record.cache_write_tokens,
        record.cache_read_tokens,
        record.output_tokens,
    ) == (
        812,
        100,
        4000,
        57,
    )
    assert record.outcome == "completed" and record.stop_reason == "end_turn"


def test_native_with_bearer_token_and_sdk(native_proxy: tuple[Proxy, FakeAnthropicUpstream]) -> None:
    proxy, fake = native_proxy
    sdk = anthropic.Anthropic(base_url=proxy.url, auth_token="fake-oauth-token", max_retries=0)
    message = sdk.messages.create(model="claude-opus-5-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "Native hello"  # type: ignore[union-attr]
    assert fake.received[0].headers["authorization"] == "Bearer fake-oauth-token"
    with sdk.messages.stream(model="claude-opus-5-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}]) as s:
        final = s.get_final_message()
    assert final.usage.output_tokens == 57


def test_native_upstream_error_passes_through(native_proxy: tuple[Proxy, FakeAnthropicUpstream]) -> None:
    proxy, fake = native_proxy
    error = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    fake.queue.append(Reply(529, [error], "application/json"))
    sdk = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        sdk.messages.create(model="claude-opus-5-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 529
    assert caught.value.body == orjson.loads(error)


def test_count_tokens_is_a_real_estimate(kimi_proxy: Proxy) -> None:
    capture = load_capture("claude_code_bash_tool/02_POST_v1_messages.json")["body"]
    sdk = anthropic.Anthropic(base_url=kimi_proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    small = sdk.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello there"}])
    request = {k: capture[k] for k in ("model", "messages", "system", "tools")}
    big = httpx.post(kimi_proxy.url + "/v1/messages/count_tokens?beta=true", json=request).json()["input_tokens"]
    assert 1 <= small.input_tokens < 20
    # Text and schemas run 3-5 characters a token; the JSON framing adds some more characters.
    size = len(orjson.dumps(request))
    assert size / 8 < big < size / 2.5


def test_models_health_and_probes(kimi_proxy: Proxy) -> None:
    models = httpx.get(kimi_proxy.url + "/v1/models").json()
    assert models["data"][0]["id"] == "claude-switch-orchestrator"
    assert "baseten/moonshotai/Kimi-K3" in models["data"][0]["display_name"]
    assert httpx.get(kimi_proxy.url + "/healthz").json()["status"] == "ok"
    for path in ("/", "/api/hello"):
        assert httpx.get(kimi_proxy.url + path).status_code == 200
        assert httpx.head(kimi_proxy.url + path).status_code == 200


def test_foreign_host_and_browser_origin_are_refused(kimi_proxy: Proxy) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    rebinding = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers={"host": "evil.example.com"})
    assert rebinding.status_code == 403
    browser = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers={"origin": "https://evil.example.com"})
    assert browser.status_code == 403
    assert kimi_proxy.upstream is not None and kimi_proxy.upstream.received == []


@pytest.mark.parametrize("server", ["kimi_proxy", "kimi_proxy_h11"], ids=["httptools", "h11"])
def test_client_disconnect_mid_stream_cancels_upstream_and_is_recorded(
    request: pytest.FixtureRequest, server: str
) -> None:
    kimi_proxy: Proxy = request.getfixturevalue(server)
    assert kimi_proxy.upstream is not None
    chunks = [b'data: {"choices":[{"index":0,"delta":{"content":"tick "}}]}\n\n'] * 200
    kimi_proxy.upstream.script(Reply(200, chunks, delay_between=0.05))
    body = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    hang_up_once_streaming(kimi_proxy.url, body)
    started = time.monotonic()
    record = kimi_proxy.sink.wait(1)[0]
    assert record.outcome == "client_cancelled"
    # cancelled promptly, not after the upstream's 10 s of chunks: the upstream request is closed
    upstream = kimi_proxy.upstream
    wait_until(lambda: upstream.disconnects == 1, timeout=3, what="the upstream request to be closed")
    assert time.monotonic() - started < 3


def test_client_disconnect_mid_native_stream_is_recorded_promptly(
    native_proxy: tuple[Proxy, FakeAnthropicUpstream],
) -> None:
    proxy, fake = native_proxy
    tick = (
        b"event: content_block_delta\ndata: "
        b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tick "}}\n\n'
    )
    fake.queue.append(
        Reply(200, [ANTHROPIC_STREAM.split(b"event: content_block_delta")[0], *[tick] * 80], delay_between=0.05)
    )
    body = orjson.dumps(
        {"model": "claude-opus-5-5", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    )
    hang_up_once_streaming(proxy.url, body)
    started = time.monotonic()
    record = proxy.sink.wait(1)[0]
    # the pass-through stops within a moment of the client leaving, not after the upstream's 4 s
    assert record.outcome == "client_cancelled" and time.monotonic() - started < 3
