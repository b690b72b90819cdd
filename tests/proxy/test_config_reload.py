"""A running `switch serve` follows config.toml edits and keeps its last good config when an edit is invalid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from switch.checks.doctor import ProxyState, running_config_check
from switch.cli import app
from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream
from tests.servers import free_port, serve, serve_process, wait_until

CONFIG = """
[server]
port = {port}
{server_extra}
[providers.baseten]
base_url = "{url}"
{provider_extra}
"""


def write(path: Path, port: int, url: str, server_extra: str = "", provider_extra: str = "") -> None:
    path.write_text(CONFIG.format(port=port, url=url, server_extra=server_extra, provider_extra=provider_extra))


def health(port: int) -> dict[str, Any]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json())


def ask(port: int) -> str:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content or ""


def doctor() -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    return {check["check"]: check for check in json.loads(result.stdout)["checks"]}


def test_a_base_url_edit_reaches_the_next_call_and_an_invalid_edit_keeps_the_last_good_config(
    isolated_home: Path,
) -> None:
    first, second = FakeChatUpstream(), FakeChatUpstream()
    config = isolated_home / "config.toml"
    port = free_port()
    with serve(first) as first_url, serve(second) as second_url:
        write(config, port, first_url + "/v1")
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}):
            assert ask(port) and len(first.received) == 1
            assert doctor()["config:running"]["ok"]

            write(config, port, second_url + "/v1")
            # Each poll is one real call: the first one the new upstream receives ends the wait.
            wait_until(lambda: ask(port) and second.received, timeout=15, what="a call to reach the new base_url")
            served_by_first = len(first.received)
            assert ask(port) and len(first.received) == served_by_first

            # Invalid values: the proxy keeps serving on the last good config, and says why.
            write(config, port, first_url + "/v1", provider_extra='api = "bogus"')
            wait_until(lambda: health(port)["config"]["rejected"], timeout=15, what="the proxy to reject the edit")
            before = len(second.received)
            assert ask(port) and len(second.received) == before + 1 and len(first.received) == served_by_first
            report = doctor()
            assert not report["config"]["ok"]
            running = report["config:running"]
            assert not running["ok"] and "rejected" in running["detail"]
            assert "providers.baseten.api" in running["detail"] and str(config) in running["fix"]

            # Not TOML at all: the same.
            config.write_text("[providers.baseten\nbase_url = ")
            wait_until(
                lambda: "not valid TOML" in str(health(port)["config"]["rejected"]), timeout=15, what="the TOML error"
            )
            assert ask(port) and len(second.received) == before + 2

            # Fixed: followed again, and doctor is content.
            write(config, port, first_url + "/v1")
            wait_until(lambda: ask(port) and len(first.received) > served_by_first, timeout=15, what="the fix")
            assert health(port)["config"]["rejected"] is None
            assert doctor()["config:running"]["ok"]


def test_server_settings_need_a_restart_and_doctor_says_so(isolated_home: Path) -> None:
    upstream = FakeChatUpstream()
    config = isolated_home / "config.toml"
    port = free_port()
    with serve(upstream) as url:
        write(config, port, url + "/v1")
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}):
            write(config, port, url + "/v1", server_extra="max_body_bytes = 1024")
            wait_until(lambda: health(port)["config"]["restart_needed"], timeout=15, what="the restart notice")
            assert health(port)["config"]["restart_needed"] == ["max_body_bytes"]
            running = doctor()["config:running"]
            assert not running["ok"] and "max_body_bytes" in running["detail"] and "restart" in running["detail"]
            assert running["fix"] == "switch down && switch up"


def test_a_new_provider_and_its_key_variable_are_learned_without_a_restart(isolated_home: Path) -> None:
    upstream = FakeChatUpstream()
    config = isolated_home / "config.toml"
    port = free_port()
    fresh_key = "sk-fresh-provider-key-0123456789"
    with serve(upstream) as url:
        write(config, port, url + "/v1")
        env = {"BASETEN_API_KEY": FAKE_BASETEN_KEY, "FRESH_API_KEY": fresh_key}
        with serve_process(port, env):
            assert ask(port)
            config.write_text(
                f'[server]\nport = {port}\n[defaults]\nmodel = "fresh/some-model"\n'
                f'[providers.fresh]\napi = "openai-chat"\nbase_url = "{url}/v1"\napi_key_env = "FRESH_API_KEY"\n'
            )

            def served_by_fresh() -> bool:
                try:
                    ask(port)
                except openai.APIStatusError:
                    return False  # the key thread may not have read the new variable yet
                return upstream.received[-1].json["model"] == "some-model"

            wait_until(served_by_fresh, timeout=15, what="a call routed to the new provider")
            assert upstream.received[-1].headers["authorization"] == f"Bearer {fresh_key}"


def test_removing_a_provider_the_active_preset_uses_is_rejected(isolated_home: Path) -> None:
    upstream = FakeChatUpstream()
    config = isolated_home / "config.toml"
    port = free_port()
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "mine.toml").write_text('[default]\norchestrator = "extra/m"\n')
    (isolated_home / "active-preset").write_text("mine\n")
    extra = '[providers.extra]\nbase_url = "{url}/v1"\napi_key_env = "BASETEN_API_KEY"\n'
    with serve(upstream) as url:
        config.write_text(f"[server]\nport = {port}\n" + extra.format(url=url))
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}):
            assert ask(port)
            config.write_text(f"[server]\nport = {port}\n")
            wait_until(lambda: health(port)["config"]["rejected"], timeout=15, what="the proxy to reject the edit")
            assert "unknown provider 'extra'" in health(port)["config"]["rejected"]["error"]
            assert ask(port) and upstream.received[-1].json["model"] == "m"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
config_keys = st.sampled_from(["path", "digest", "mtime", "loaded_at", "rejected", "restart_needed"])


@given(st.dictionaries(config_keys, json_values) | json_values)
def test_doctor_reads_any_healthz_config_without_failing(config: Any) -> None:
    from switch import daemon

    state = ProxyState(8742, {"home": daemon.this_home(), "config": config})
    result = running_config_check(state)
    assert result is None or (result["ok"] or result["fix"])


def test_a_proxy_still_on_an_older_file_is_reported_with_the_restart(isolated_home: Path) -> None:
    from switch import daemon
    from switch.config import file_digest

    config = isolated_home / "config.toml"
    config.write_text("[server]\nport = 8742\n")
    running = {"digest": file_digest(config), "loaded_at": 0, "rejected": None, "restart_needed": []}
    state = ProxyState(8742, {"home": daemon.this_home(), "config": running})
    assert (running_config_check(state) or {}).get("ok")
    config.write_text("[server]\nport = 8742\n[routing]\nttft_timeout = 5\n")
    check = running_config_check(state)
    assert check is not None and not check["ok"]
    assert "running config is older than config.toml" in check["detail"]
    assert "switch down && switch up" in (check["fix"] or "")
