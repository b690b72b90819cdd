"""Codex's own credentials reach the native OpenAI route, and only it; a login the public API refuses gets a
clear error in Responses format."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from switch.proxy.passthrough import CHATGPT_LOGIN, NO_CREDENTIALS
from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream, FakeUpstream, Turn
from tests.servers import serve

PRESET = """
[codex]
orchestrator = "native"
subagent = "baseten/kimi-sub"
background = "baseten/kimi-sub"
"""
CODEX_KEY = "sk-codex-login-key-123"
CODEX = {"originator": "codex_exec", "session-id": "s-1"}


@pytest.fixture
def routes(
    start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Proxy, FakeUpstream, FakeChatUpstream]]:
    native, kimi = FakeUpstream(), FakeChatUpstream()
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "split.toml").write_text(PRESET)
    (isolated_home / "active-preset").write_text("split\n")
    with serve(native) as native_url, serve(kimi) as kimi_url:
        config = f'[providers.openai]\nbase_url = "{native_url}/v1"\n[providers.baseten]\nbase_url = "{kimi_url}/v1"\n'
        yield start_proxy(config, read_timeout=5.0), native, kimi


def test_the_bearer_token_goes_to_the_native_route_and_nowhere_else(
    routes: tuple[Proxy, FakeUpstream, FakeChatUpstream],
) -> None:
    proxy, native, kimi = routes
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=CODEX_KEY, max_retries=0)
    native.script(Turn(text="native answer"))
    kimi.script(Turn(text="kimi answer"))
    main = client.responses.create(model="gpt-5.5", input="hi", extra_headers=CODEX)
    sub = client.responses.create(
        model="gpt-5.5", input="hi", extra_headers={**CODEX, "x-openai-subagent": "collab_spawn"}
    )
    assert main.output_text == "native answer" and sub.output_text == "kimi answer"
    assert [r.headers["authorization"] for r in native.received] == [f"Bearer {CODEX_KEY}"]
    assert [r.headers["authorization"] for r in kimi.received] == [f"Bearer {FAKE_BASETEN_KEY}"]
    assert all(CODEX_KEY not in str(r.headers) and CODEX_KEY.encode() not in r.body for r in kimi.received)


@pytest.mark.parametrize(
    ("headers", "message"),
    [({"authorization": f"Bearer {CODEX_KEY}", "chatgpt-account-id": "acct-1"}, CHATGPT_LOGIN), ({}, NO_CREDENTIALS)],
    ids=["chatgpt-login", "no-login"],
)
def test_a_login_the_public_api_refuses_is_a_clear_401(
    routes: tuple[Proxy, FakeUpstream, FakeChatUpstream], headers: dict[str, str], message: str
) -> None:
    proxy, native, _kimi = routes
    answer = httpx.post(
        proxy.url + "/v1/responses", json={"model": "gpt-5.5", "input": "hi"}, headers={**CODEX, **headers}
    )
    assert answer.status_code == 401
    error = answer.json()["error"]
    assert error["message"] == message and "codex login --with-api-key" in error["message"]
    assert not native.received
    record = proxy.sink.wait(1)[-1]
    assert (record.outcome, record.harness) == ("rejected", "codex")
