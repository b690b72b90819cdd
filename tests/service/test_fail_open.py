"""Fail open: a proxy started on a config it cannot use serves every call natively, and says so everywhere."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import orjson
from hypothesis import given
from hypothesis import strategies as st

from switch.proxy.fail_open import fallback_settings
from tests.commands import run_switch
from tests.conftest import load_capture
from tests.fake_upstream import FakeAnthropicUpstream
from tests.servers import free_port, serve, serve_process, wait_until

CAPTURE = "claude_code_plain/01_POST_v1_messages.json"
SKIPPED = {"host", "content-length", "connection", "accept-encoding"}
# Valid TOML with one bad value: the whole file is refused, but the native provider's table still reads.
BROKEN = '[server]\nport = {port}\n[routing]\nttft_timeout = "soon"\n[providers.anthropic]\nbase_url = "{url}"\n'
FIXED = '[server]\nport = {port}\n[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n'


def send_capture(port: int) -> httpx.Response:
    """Claude Code 2.1.332's first request of a session, as captured, to the proxy on `port`."""
    capture = load_capture(CAPTURE)
    headers = {k: v for k, v in capture["headers"] if k.lower() not in SKIPPED}
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/messages?beta=true", content=orjson.dumps(capture["body"]), headers=headers
    )


def ledger_rows(home: Path) -> list[dict[str, Any]]:
    path = home / "ledger.db"
    if not path.exists():
        return []
    with sqlite3.connect(path) as connection:
        connection.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in connection.execute("select * from calls order by id")]
        except sqlite3.OperationalError:
            return []


def health(port: int) -> dict[str, Any]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/healthz").json())


def test_a_broken_config_fails_open_to_the_native_stand_in_and_says_so_everywhere(isolated_home: Path) -> None:
    fake = FakeAnthropicUpstream()
    with serve(fake) as url:
        config = isolated_home / "config.toml"
        port = free_port()
        config.write_text(BROKEN.format(url=url, port=port))
        env = {"SWITCH_HOME": str(isolated_home)}
        with serve_process(port, env, ("--fail-open",)):
            answer = send_capture(port)
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-switch-route"] == "fail-open; role=orchestrator; model=native"
            assert b"message_stop" in answer.content
            # The native stand-in got the capture's body as Claude Code sent it, with its own key.
            assert orjson.loads(fake.received[0].body) == load_capture(CAPTURE)["body"]
            assert fake.received[0].headers["x-api-key"] == "test-key"

            state = health(port)
            assert state["status"] == "degraded"
            assert "routing.ttft_timeout" in state["fail_open"]["reason"]
            assert state["fail_open"]["notice"] == "switch: config error, calls go to native"

            status = run_switch("status", env=env)
            # What runs, then the config problem as this command's own error line.
            assert status.returncode == 2 and status.stderr.startswith("switch: ") and "config.toml" in status.stderr
            assert "switch: config error, calls go to native" in status.stdout
            assert "routing.ttft_timeout" in status.stdout
            line = run_switch("statusline", "--session", "s1", env=env).stdout
            assert line.startswith("switch: config error, calls go to native · ")
            doctor = run_switch("doctor", env=env)
            assert doctor.returncode == 1 and "proxy:fail-open" in doctor.stdout
            from ui.panes.health import read_health  # the dashboard's Presets & health tab

            assert "switch: config error, calls go to native" in read_health([]).proxy

            wait_until(lambda: len(ledger_rows(isolated_home)) == 1, what="the call's ledger row")
            row = ledger_rows(isolated_home)[0]
            assert (row["preset"], row["outcome"], row["served_model"] or "") != ("", "", "")
            assert row["preset"] == "fail-open" and row["outcome"] == "completed"

            # Fixed while running: picked up as any edit is, and the degraded state ends.
            config.write_text(FIXED.format(url=url, port=port))
            wait_until(lambda: health(port)["status"] == "ok", what="the proxy to leave fail-open")
            assert not (isolated_home / "run" / "fail-open.json").exists()
            assert not run_switch("statusline", "--session", "s1", env=env).stdout.startswith("switch: config")
            again = send_capture(port)
            assert again.headers["x-switch-route"] == "defaults; role=orchestrator; model=native"


def test_fail_open_false_answers_each_api_with_a_503_naming_the_fix(isolated_home: Path) -> None:
    fake = FakeAnthropicUpstream()
    with serve(fake) as url:
        port = free_port()
        broken = BROKEN.format(url=url, port=port).replace("[server]\n", "[server]\nfail_open = false\n")
        (isolated_home / "config.toml").write_text(broken)
        env = {"SWITCH_HOME": str(isolated_home)}
        with serve_process(port, env, ("--fail-open",)):
            answer = send_capture(port)
            assert answer.status_code == 503
            error = answer.json()
            assert error["type"] == "error" and error["error"]["type"] == "overloaded_error"
            assert "routing.ttft_timeout" in error["error"]["message"]
            assert "fail_open = true" in error["error"]["message"]
            chat = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert chat.status_code == 503 and "routing.ttft_timeout" in chat.json()["error"]["message"]
            assert fake.received == []
            state = health(port)
            assert state["status"] == "degraded" and state["fail_open"]["mode"] == "fail-closed"
            assert run_switch("statusline", "--session", "s").stdout.startswith("switch: config error, calls are")
            wait_until(lambda: len(ledger_rows(isolated_home)) == 2, what="both refused calls in the ledger")
            rows = ledger_rows(isolated_home)
            assert {(row["preset"], row["outcome"]) for row in rows} == {("fail-closed", "proxy_error")}


def test_a_broken_active_preset_fails_open_until_it_is_fixed(isolated_home: Path) -> None:
    fake = FakeAnthropicUpstream()
    with serve(fake) as url:
        port = free_port()
        (isolated_home / "config.toml").write_text(FIXED.format(url=url, port=port))
        (isolated_home / "active-preset").write_text("no-such-preset\n")
        env = {"SWITCH_HOME": str(isolated_home)}
        with serve_process(port, env, ("--fail-open",)):
            state = health(port)
            assert state["status"] == "degraded" and "no-such-preset" in state["fail_open"]["reason"]
            assert send_capture(port).headers["x-switch-route"].startswith("fail-open;")
            assert run_switch("use", "native", env=env).returncode == 0
            wait_until(lambda: health(port)["status"] == "ok", what="the fixed preset to be picked up")
            assert send_capture(port).headers["x-switch-route"].startswith("native;")


def test_without_fail_open_serve_still_refuses_a_broken_config(isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text(BROKEN.format(url="http://127.0.0.1:9", port=free_port()))
    result = run_switch("serve")
    assert result.returncode == 2 and result.stderr.startswith("switch: ") and "Traceback" not in result.stderr


@given(st.text(max_size=300))
def test_fallback_settings_take_any_file_and_route_native(tmp_path_factory: Any, text: str) -> None:
    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    settings = fallback_settings(path)
    assert settings.defaults.model == "native"
    assert {"anthropic", "openai"} <= set(settings.providers)


@given(
    st.dictionaries(
        st.sampled_from(["base_url", "api", "api_key_env", "bogus"]),
        st.one_of(st.text(max_size=20), st.integers(), st.booleans()),
    )
)
def test_fallback_settings_keep_a_valid_native_table_and_drop_a_broken_one(tmp_path_factory: Any, table: Any) -> None:
    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    path.write_text("[providers.anthropic]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items()))
    provider = fallback_settings(path).providers["anthropic"]
    assert provider.base_url  # never an unusable native provider
