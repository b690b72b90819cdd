"""Routing through the real proxy: hybrid preset, credentials, fallback, live preset switches."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from switch.routing.presets import set_active
from tests.anthropic_grammar import assert_valid_anthropic_stream
from tests.conftest import FAKE_BASETEN_KEY, FAKE_CLIENT_KEY, Proxy, load_capture, presets_of
from tests.fake_upstream import FakeAnthropicUpstream, FakeChatUpstream, Reply, Turn
from tests.servers import serve, wait_until

SKIP = {"host", "content-length", "connection", "accept-encoding", "x-api-key", "authorization"}


def capture_request(proxy: Proxy, name: str) -> httpx.Response:
    capture = load_capture(name)
    headers = {k: v for k, v in capture["headers"] if k.lower() not in SKIP}
    headers["x-api-key"] = FAKE_CLIENT_KEY
    return httpx.post(proxy.url + capture["path"] + "?beta=true", json=capture["body"], headers=headers, timeout=20)


@pytest.fixture
def two_fakes() -> Iterator[tuple[FakeChatUpstream, str, FakeChatUpstream, str, FakeAnthropicUpstream, str]]:
    first, second, native = FakeChatUpstream(), FakeChatUpstream(), FakeAnthropicUpstream()
    with serve(first) as first_url, serve(second) as second_url, serve(native) as native_url:
        yield first, first_url, second, second_url, native, native_url


def write_preset(home: Path, name: str, text: str) -> Path:
    directory = home / "presets"
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def routed(
    two_fakes: tuple[Any, ...], start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Proxy]:
    first, first_url, second, second_url, native, native_url = two_fakes
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    monkeypatch.setenv("BACKUP_API_KEY", "sk-fake-backup-key")
    config = (
        f'[providers.baseten]\nbase_url = "{first_url}/v1"\n'
        f'[providers.backup]\nbase_url = "{second_url}/v1"\napi_key_env = "BACKUP_API_KEY"\n'
        f'[providers.anthropic]\nbase_url = "{native_url}"\n'
        "[routing]\nttft_timeout = 0.5\n"
    )

    def start(preset_text: str) -> Proxy:
        write_preset(isolated_home, "test", preset_text)
        set_active("test")
        proxy = start_proxy(config, read_timeout=3.0, ping_interval=5.0)
        proxy.extra.update(first=first, second=second, native=native)
        return proxy

    return start


HYBRID = """
[default]
orchestrator = "native"
subagent = "baseten/moonshotai/Kimi-K3"
background = "baseten/moonshotai/Kimi-K3"
fallback = ["native"]
"""


def test_hybrid_routes_main_thread_native_and_subagent_to_kimi(routed: Callable[[str], Proxy]) -> None:
    proxy = routed(HYBRID)
    first, native = proxy.extra["first"], proxy.extra["native"]
    first.script(Turn(text="subagent done"))
    main = capture_request(proxy, "claude_code_subagent/01_POST_v1_messages.json")
    assert main.status_code == 200
    assert main.headers["x-switch-route"] == "test; role=orchestrator; model=native"
    assert len(native.received) == 1 and first.received == []
    assert native.received[0].headers["x-api-key"] == FAKE_CLIENT_KEY
    assert FAKE_BASETEN_KEY not in str(native.received[0].headers)

    sub = capture_request(proxy, "claude_code_subagent/03_POST_v1_messages.json")
    assert sub.status_code == 200
    assert assert_valid_anthropic_stream(sub.content)[0]["text"] == "subagent done"
    assert sub.headers["x-switch-route"] == "test; role=subagent; model=baseten/moonshotai/Kimi-K3"
    assert len(first.received) == 1 and len(native.received) == 1
    kimi = first.received[0]
    assert kimi.json["model"] == "moonshotai/Kimi-K3"
    assert kimi.headers["authorization"] == f"Bearer {FAKE_BASETEN_KEY}"
    assert FAKE_CLIENT_KEY not in str(kimi.headers) and FAKE_CLIENT_KEY not in kimi.body.decode()
    records = proxy.sink.wait(2)
    assert [(r.role, r.harness, r.provider) for r in records] == [
        ("orchestrator", "claude-code", "anthropic"),
        ("subagent", "claude-code", "baseten"),
    ]
    assert records[1].agent_id and records[1].session_id == records[0].session_id


FALLBACK = """
[default]
orchestrator = ["baseten/moonshotai/Kimi-K3", "backup/backup-model"]
"""


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("trigger", "reply"),
    [
        ("5xx", Reply(500, [b'{"error":{"message":"boom"}}'], "application/json")),
        ("5xx", Reply(529, [b'{"error":{"message":"overloaded"}}'], "application/json")),
        ("429", Reply(429, [b"<html>slow down</html>"], "text/html")),
        ("timeout", Reply(200, [b'data: {"choices":[]}\n\n'], delay_before=2.0)),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_fallback_lands_on_next_target(
    routed: Callable[[str], Proxy], trigger: str, reply: Reply, stream: bool
) -> None:
    proxy = routed(FALLBACK)
    first, second = proxy.extra["first"], proxy.extra["second"]
    first.script(reply)
    second.script(Turn(text="from the backup"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    if stream:
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert message.content[0].text == "from the backup"  # type: ignore[union-attr]
    assert second.received[0].json["model"] == "backup-model"
    assert second.received[0].headers["authorization"] == "Bearer sk-fake-backup-key"
    records = proxy.sink.wait(2)
    assert [(r.fallback_attempt, r.outcome) for r in records] == [(0, records[0].outcome), (1, "completed")]
    assert records[0].outcome != "completed"
    assert records[1].fallback_trigger == trigger


@pytest.mark.parametrize(
    ("trigger", "reply"),
    [
        ("connect", Reply(200, [b'{"id":"x","choices":[{"mess', b"age"], "application/json", break_after=1)),
        ("timeout", Reply(200, [b'{"id":"x","choices":[{"mess', b"age"], "application/json", stall_after=1)),
        ("5xx", Reply(200, [b"<html>not the JSON it promised</html>"], "application/json")),
    ],
)
def test_a_whole_answer_broken_mid_body_falls_back(routed: Callable[[str], Proxy], trigger: str, reply: Reply) -> None:
    # Reset, stall or garbage after the headers: nothing reached the caller yet, so the next target serves.
    proxy = routed(FALLBACK)
    first, second = proxy.extra["first"], proxy.extra["second"]
    first.script(reply)
    second.script(Turn(text="from the backup"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert message.content[0].text == "from the backup"  # type: ignore[union-attr]
    records = proxy.sink.wait(2)
    assert [(r.fallback_attempt, r.outcome == "completed") for r in records] == [(0, False), (1, True)]
    assert records[0].error and records[1].fallback_trigger == trigger


def test_connection_refused_falls_back(
    two_fakes: tuple[Any, ...], start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _first, _first_url, second, second_url, _native, _native_url = two_fakes
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    monkeypatch.setenv("BACKUP_API_KEY", "sk-fake-backup-key")
    write_preset(isolated_home, "test", FALLBACK)
    set_active("test")
    proxy = start_proxy(
        f'[providers.baseten]\nbase_url = "http://127.0.0.1:{dead_port()}/v1"\n'
        f'[providers.backup]\nbase_url = "{second_url}/v1"\napi_key_env = "BACKUP_API_KEY"\n'
    )
    second.script(Turn(text="backup answers"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert message.content[0].text == "backup answers"  # type: ignore[union-attr]
    assert proxy.sink.wait(2)[1].fallback_trigger == "connect"


def test_failure_after_first_byte_is_in_band_and_not_retried(routed: Callable[[str], Proxy]) -> None:
    proxy = routed(FALLBACK)
    first, second = proxy.extra["first"], proxy.extra["second"]
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"started"}}]}\n\n'
    first.script(Reply(200, [chunk, chunk], break_after=1))
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    text = httpx.post(proxy.url + "/v1/messages", json=body, timeout=10).text
    assert "started" in text and "event: error" in text
    assert second.received == []


def test_native_fallback_uses_callers_own_credentials(routed: Callable[[str], Proxy]) -> None:
    proxy = routed('[default]\norchestrator = "baseten/moonshotai/Kimi-K3"\nfallback = ["native"]\n')
    first, native = proxy.extra["first"], proxy.extra["native"]
    first.script(Reply(503, [b'{"error":{"message":"down"}}'], "application/json"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = client.messages.create(
        model="claude-opus-5-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert message.content[0].text == "Native hello"  # type: ignore[union-attr]
    # anthropic 2.x sends the key as a bearer token; it reaches the native provider untouched.
    assert native.received[0].headers["authorization"] == f"Bearer {FAKE_CLIENT_KEY}"
    assert FAKE_BASETEN_KEY not in str(native.received[0].headers)
    assert FAKE_CLIENT_KEY not in str(first.received[0].headers)


def test_all_targets_failing_returns_last_error_in_callers_format(routed: Callable[[str], Proxy]) -> None:
    proxy = routed(FALLBACK)
    proxy.extra["first"].script(Reply(500, [b'{"error":{"message":"first down"}}'], "application/json"))
    proxy.extra["second"].script(Reply(502, [b'{"error":{"message":"second down"}}'], "application/json"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502 and "second down" in str(caught.value)


TWO_ROUTES = """
[default]
orchestrator = "{target}"
"""


def test_switch_use_during_a_stream_keeps_the_stream_and_moves_the_next_call(
    routed: Callable[[str], Proxy], isolated_home: Path
) -> None:
    proxy = routed(TWO_ROUTES.format(target="baseten/moonshotai/Kimi-K3"))
    first, second = proxy.extra["first"], proxy.extra["second"]
    chunks = [b'data: {"choices":[{"index":0,"delta":{"content":"tick "}}]}\n\n'] * 15
    chunks += [b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"]
    first.script(Reply(200, chunks, delay_between=0.1))
    second.script(Turn(text="new route"))
    results: dict[str, str] = {}

    def long_stream() -> None:
        body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "x"}]}
        results["stream"] = httpx.post(proxy.url + "/v1/messages", json=body, timeout=20).text

    thread = threading.Thread(target=long_stream)
    thread.start()
    wait_until(lambda: len(first.received) == 1, what="the long stream to reach the first route")
    write_preset(isolated_home, "other", TWO_ROUTES.format(target="backup/backup-model"))
    set_active("other")
    wait_until(lambda: presets_of(proxy).active.name == "other", what="the proxy to load the new preset")
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "y"}])
    thread.join()
    assert message.content[0].text == "new route"  # type: ignore[union-attr]
    assert results["stream"].count("tick") == 15 and "message_stop" in results["stream"]
    assert len(first.received) == 1 and len(second.received) == 1


def test_malformed_preset_names_file_and_key_and_proxy_keeps_last_good(
    routed: Callable[[str], Proxy], isolated_home: Path
) -> None:
    proxy = routed(TWO_ROUTES.format(target="baseten/moonshotai/Kimi-K3"))
    path = write_preset(isolated_home, "test", '[default]\norchestrator = "baseten/moonshotai/Kimi-K3"\nsubagent = 7\n')
    manager = presets_of(proxy)
    wait_until(lambda: manager.error is not None, what="the proxy to read the malformed preset")
    assert manager.error is not None and str(path) in manager.error and "default.subagent" in manager.error
    proxy.extra["first"].script(Turn(text="still routed"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert message.content[0].text == "still routed"  # type: ignore[union-attr]


def test_models_lists_claude_aliases_for_active_routes(routed: Callable[[str], Proxy]) -> None:
    proxy = routed(HYBRID)
    models = httpx.get(proxy.url + "/v1/models").json()["data"]
    ids = [m["id"] for m in models]
    assert ids == ["claude-switch-orchestrator", "claude-switch-subagent", "claude-switch-background"]
    assert "baseten/moonshotai/Kimi-K3" in models[1]["display_name"]
    proxy.extra["first"].script(Turn(text="alias routed"))
    client = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = client.messages.create(
        model="claude-switch-subagent", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert message.content[0].text == "alias routed"  # type: ignore[union-attr]
    assert orjson.loads(proxy.extra["first"].received[0].body)["model"] == "moonshotai/Kimi-K3"
