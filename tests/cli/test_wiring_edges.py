"""Wiring edges: a gateway Claude Code already used keeps serving its native calls, `langchain off` leaves no
folder it made, and a local OpenAI-compatible server without auth needs no key at all."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import anthropic
import openai
import pytest

from tests.commands import run_switch
from tests.conftest import Proxy
from tests.fake_upstream import FakeAnthropicUpstream, FakeChatUpstream
from tests.servers import free_port, serve, serve_process, wait_until


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """The environment of a user whose HOME is under tmp_path (Claude Code's and deepagents' files in it)."""
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    env = {"HOME": str(home)}
    os.environ.pop("CLAUDE_CONFIG_DIR", None)
    return env


def test_claude_on_chains_the_gateway_claude_code_used_and_off_restores_both_files(
    isolated_home: Path, user: dict[str, str]
) -> None:
    gateway = FakeAnthropicUpstream()
    settings = Path(user["HOME"]) / ".claude" / "settings.json"
    config = isolated_home / "config.toml"
    port = free_port()
    config.write_text(f"# my switch config\n[server]\nport = {port}\n")
    (isolated_home / "active-preset").write_text("hybrid\n")  # the orchestrator goes native
    with serve(gateway) as gateway_url:
        original = json.dumps({"env": {"ANTHROPIC_BASE_URL": gateway_url + "/corp"}, "theme": "dark"}, indent=2)
        settings.write_text(original)
        config_before = config.read_bytes()
        with serve_process(port, user):
            wired = run_switch("claude", "on", env=user)
            assert wired.returncode == 0, wired.stderr
            assert f"previous ANTHROPIC_BASE_URL, {gateway_url}/corp" in wired.stdout
            env = json.loads(settings.read_text())["env"]
            assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}"
            # The running proxy takes the chained URL from config.toml; Claude Code's own call reaches the gateway.
            client = anthropic.Anthropic(base_url=env["ANTHROPIC_BASE_URL"], api_key="sk-ant-user-key", max_retries=0)

            def answered() -> bool:
                try:
                    message = client.messages.create(
                        model="claude-opus-5-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
                    )
                except anthropic.APIError:
                    return False
                return message.content[0].text == "Native hello"  # type: ignore[union-attr]

            wait_until(answered, 30, "a native call to reach the gateway")
            assert gateway.received[-1].path == "/corp/v1/messages"
            # The harness's own credentials go to its own provider, as for every native call.
            assert "sk-ant-user-key" in " ".join(gateway.received[-1].headers.values())
        off = run_switch("claude", "off", env=user)
        assert off.returncode == 0, off.stderr
    assert settings.read_text() == original
    assert config.read_bytes() == config_before


def test_claude_on_keeps_a_native_base_url_the_user_configured(isolated_home: Path, user: dict[str, str]) -> None:
    settings = Path(user["HOME"]) / ".claude" / "settings.json"
    settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://gateway.example/anthropic"}}))
    config = isolated_home / "config.toml"
    config.write_text('[providers.anthropic]\nbase_url = "https://mine.example"\n')
    before = config.read_bytes()
    wired = run_switch("claude", "on", env=user)
    assert wired.returncode == 0 and "previous ANTHROPIC_BASE_URL" not in wired.stdout
    assert config.read_bytes() == before
    run_switch("claude", "off", env=user)
    assert json.loads(settings.read_text())["env"]["ANTHROPIC_BASE_URL"] == "https://gateway.example/anthropic"


def test_claude_on_refuses_when_config_toml_cannot_take_the_gateway(isolated_home: Path, user: dict[str, str]) -> None:
    settings = Path(user["HOME"]) / ".claude" / "settings.json"
    original = json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://gateway.example/anthropic"}})
    settings.write_text(original)
    (isolated_home / "config.toml").write_text("[providers\n")
    result = run_switch("claude", "on", env=user)
    assert result.returncode == 2 and "config.toml" in result.stderr and "Traceback" not in result.stderr
    assert settings.read_text() == original


# ---- langchain off ----------------------------------------------------------------------------------------------


def test_langchain_off_removes_the_empty_deepagents_folder_that_on_created(user: dict[str, str]) -> None:
    folder = Path(user["HOME"]) / ".deepagents"
    assert not folder.exists()
    assert run_switch("langchain", "on", env=user).returncode == 0
    assert (folder / "config.toml").exists()
    assert run_switch("langchain", "off", env=user).returncode == 0
    assert not folder.exists()


def test_langchain_off_keeps_a_deepagents_folder_it_did_not_create_or_that_holds_more(user: dict[str, str]) -> None:
    folder = Path(user["HOME"]) / ".deepagents"
    folder.mkdir()
    assert run_switch("langchain", "on", env=user).returncode == 0
    assert run_switch("langchain", "off", env=user).returncode == 0
    assert folder.is_dir() and list(folder.iterdir()) == []
    folder.rmdir()
    assert run_switch("langchain", "on", env=user).returncode == 0
    (folder / "history.jsonl").write_text("{}\n")  # deepagents' own file, written while switch was on
    assert run_switch("langchain", "off", env=user).returncode == 0
    assert [path.name for path in folder.iterdir()] == ["history.jsonl"]


# ---- a local server without auth --------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_a_provider_with_auth_none_is_called_without_any_key(
    isolated_home: Path, start_proxy: Callable[..., Proxy], api: str
) -> None:
    local = FakeChatUpstream() if api == "openai-chat" else FakeAnthropicUpstream()
    with serve(local) as url:
        base = url + "/v1" if api == "openai-chat" else url
        proxy = start_proxy(
            f'[defaults]\nmodel = "local/qwen3"\n\n[providers.local]\napi = "{api}"\n'
            f'base_url = "{base}"\nauth = "none"\n'
        )
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-the-harness-own-key", max_retries=0)
        answer = client.chat.completions.create(model="qwen3", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content
        headers = local.received[-1].headers
        assert "authorization" not in headers and "x-api-key" not in headers
        assert "sk-the-harness-own-key" not in " ".join(headers.values())
        (record,) = proxy.sink.wait(1)
        assert record.outcome == "completed" and record.provider == "local"
    doctor = run_switch("doctor")
    assert 'local needs no key (auth = "none")' in doctor.stdout


def test_a_provider_without_auth_none_still_asks_for_its_key(
    isolated_home: Path, start_proxy: Callable[..., Proxy]
) -> None:
    local = FakeChatUpstream()
    with serve(local) as url:
        proxy = start_proxy(f'[defaults]\nmodel = "local/qwen3"\n\n[providers.local]\nbase_url = "{url}/v1"\n')
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-the-harness-own-key", max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="switch keys set local"):
            client.chat.completions.create(model="qwen3", messages=[{"role": "user", "content": "hi"}])
    assert local.received == []
