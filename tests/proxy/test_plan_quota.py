"""The native plan's quota: recorded from real header sets, shown, and respected by the route."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from switch.config import load_settings
from switch.ledger.recorder import Recorder
from tests.conftest import FAKE_BASETEN_KEY, Proxy, load_capture, write_config
from tests.fake_upstream import FakeAnthropicUpstream, FakeChatUpstream, Reply, Turn
from tests.ledger_seed import pricer_for
from tests.servers import serve, wait_until

OAUTH_TOKEN = "sk-ant-oat01-plan-secret-token-0123456789abcdef"
OPENAI_KEY = "sk-proj-plan-secret-openai-key-0123456789"
SKIP = {"host", "content-length", "connection", "accept-encoding", "x-api-key", "authorization"}
STARTED = time.time()
NATIVE_FIRST = """description = "native orchestrator, Kimi when it cannot serve"
[default]
orchestrator = "native"
subagent = "native"
fallback = ["baseten/moonshotai/Kimi-K3"]
"""
NATIVE_ONLY = """description = "native only"
[default]
orchestrator = "native"
subagent = "native"
"""


def unified_headers(five: float, seven: float, status: str = "allowed", reset: float | None = None) -> dict[str, str]:
    """The header set a Claude subscription's answer carries (names and formats as Claude Code reads them)."""
    now = STARTED
    five_reset = reset if reset is not None else now + 2 * 3600
    return {
        "anthropic-ratelimit-unified-status": status,
        "anthropic-ratelimit-unified-5h-status": status,
        "anthropic-ratelimit-unified-5h-utilization": str(five),
        "anthropic-ratelimit-unified-5h-reset": str(int(five_reset)),
        "anthropic-ratelimit-unified-7d-status": "allowed",
        "anthropic-ratelimit-unified-7d-utilization": str(seven),
        "anthropic-ratelimit-unified-7d-reset": str(int(now + 5 * 86400)),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-fallback-percentage": "0.5",
        "anthropic-ratelimit-unified-reset": str(int(five_reset)),
        "anthropic-ratelimit-unified-overage-status": "rejected",
        "anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
        "request-id": "req_plan",
    }


MESSAGE = orjson.dumps(
    {
        "id": "msg_plan",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-5-5",
        "content": [{"type": "text", "text": "from the plan"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 3},
    }
)
REJECTED = orjson.dumps(
    {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "This request would exceed your account's rate limit."},
    }
)


def _ledger_rows(home: Path, table: str) -> list[dict[str, Any]]:
    path = home / "ledger.db"
    if not path.exists():
        return []
    connection = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute(f"SELECT * FROM {table} ORDER BY rowid")]
    except sqlite3.OperationalError:
        return []  # not created yet: the writer opens (and migrates) the ledger with its first write
    finally:
        connection.close()


def _switch(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWITCH_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "switch", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )


def _capture_call(proxy: Proxy) -> httpx.Response:
    """Claude Code's own first request (from a capture), logged in with its subscription's OAuth token."""
    capture = load_capture("claude_code_plain/01_POST_v1_messages.json")
    headers = {k: v for k, v in capture["headers"] if k.lower() not in SKIP}
    headers["authorization"] = f"Bearer {OAUTH_TOKEN}"
    body = {**capture["body"], "stream": False}
    return httpx.post(proxy.url + "/v1/messages?beta=true", json=body, headers=headers, timeout=20)


@pytest.fixture
def ledger_proxy(
    start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]]]:
    """A proxy on a real ledger, native Anthropic and OpenAI on one loopback stand-in, Kimi on another."""
    native, kimi = FakeAnthropicUpstream(), FakeChatUpstream()
    recorders: list[Recorder] = []
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    with serve(native) as native_url, serve(kimi) as kimi_url:

        def start(preset: str) -> tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]:
            presets = isolated_home / "presets"
            presets.mkdir(exist_ok=True)
            (presets / "plan.toml").write_text(preset, encoding="utf-8")
            (isolated_home / "active-preset").write_text("plan\n", encoding="utf-8")
            config = (
                f'[providers.anthropic]\nbase_url = "{native_url}"\n'
                f'[providers.openai]\nbase_url = "{native_url}/v1"\n'
                f'[providers.baseten]\nbase_url = "{kimi_url}"\n'
            )
            write_config(isolated_home, config)
            recorder = Recorder(pricer_for(load_settings()), batch_window=0)
            recorder.start()
            recorders.append(recorder)
            return start_proxy(config, sink=recorder), native, kimi, recorder

        yield start
    for recorder in recorders:
        recorder.close()


def test_a_claude_plan_is_recorded_and_shown_without_its_credential(
    ledger_proxy: Callable[[str], tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]], isolated_home: Path
) -> None:
    proxy, native, _kimi, recorder = ledger_proxy(NATIVE_FIRST)
    native.queue.append(Reply(200, [MESSAGE], "application/json", headers=unified_headers(0.42, 0.18)))
    answer = _capture_call(proxy)
    assert answer.status_code == 200
    # Claude Code reads these itself: they reach it unchanged.
    assert answer.headers["anthropic-ratelimit-unified-5h-utilization"] == "0.42"
    wait_until(lambda: _ledger_rows(isolated_home, "plan_quota"), what="the plan's snapshot in the ledger")
    (plan,) = _ledger_rows(isolated_home, "plan_quota")
    assert (plan["provider"], plan["source"], plan["status"], plan["binding"]) == (
        "anthropic",
        "unified",
        "allowed",
        "5h",
    )
    windows = {w["name"]: w["utilization"] for w in json.loads(plan["windows"])}
    assert windows == {"5h": 0.42, "7d": 0.18}
    assert plan["account"].startswith("key-") and OAUTH_TOKEN not in plan["account"]

    # The same figures again: no new write (the row keeps its first time).
    native.queue.append(Reply(200, [MESSAGE], "application/json", headers=unified_headers(0.42, 0.18)))
    sdk = anthropic.Anthropic(base_url=proxy.url, auth_token=OAUTH_TOKEN, max_retries=0)
    sdk.messages.create(model="claude-opus-5-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    wait_until(lambda: recorder.written == 2, what="both calls in the ledger")
    assert _ledger_rows(isolated_home, "plan_quota")[0]["observed_at"] == plan["observed_at"]

    status = _switch(isolated_home, "status", "--json")
    plans = json.loads(status.stdout)["plans"]
    assert [(p["provider"], [(w["name"], w["utilization"]) for w in p["windows"]]) for p in plans] == [
        ("anthropic", [("5h", 0.42), ("7d", 0.18)])
    ]
    assert "plan anthropic" in _switch(isolated_home, "spend").stdout
    spend = json.loads(_switch(isolated_home, "spend", "--json").stdout)
    assert spend["plans"][0]["windows"][0]["utilization"] == 0.42

    session = load_capture("claude_code_plain/01_POST_v1_messages.json")["headers"]
    session_id = dict(session)["X-Claude-Code-Session-Id"]
    line = _switch(isolated_home, "statusline", stdin=json.dumps({"session_id": session_id})).stdout
    assert "plan 5h 42% · 7d 18%" in line

    recorder.close()
    for path in isolated_home.rglob("*"):
        if path.is_file():
            assert OAUTH_TOKEN.encode() not in path.read_bytes(), path


def test_a_stale_snapshot_is_shown_as_stale(
    ledger_proxy: Callable[[str], tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]], isolated_home: Path
) -> None:
    proxy, native, _kimi, _recorder = ledger_proxy(NATIVE_FIRST)
    native.queue.append(
        Reply(200, [MESSAGE], "application/json", headers=unified_headers(0.42, 0.18, reset=time.time() - 60))
    )
    assert _capture_call(proxy).status_code == 200
    wait_until(lambda: _ledger_rows(isolated_home, "plan_quota"), what="the plan's snapshot in the ledger")
    plans = json.loads(_switch(isolated_home, "status", "--json").stdout)["plans"]
    five = plans[0]["windows"][0]
    assert (five["name"], five["stale"]) == ("5h", True)
    session_id = dict(load_capture("claude_code_plain/01_POST_v1_messages.json")["headers"])["X-Claude-Code-Session-Id"]
    line = _switch(isolated_home, "statusline", stdin=json.dumps({"session_id": session_id})).stdout
    assert "plan 5h stale · 7d 18%" in line


def test_a_rejected_plan_is_skipped_until_its_reset_then_used_again(
    ledger_proxy: Callable[[str], tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]], isolated_home: Path
) -> None:
    proxy, native, kimi, recorder = ledger_proxy(NATIVE_FIRST)
    reset = time.time() + 3
    rejected = {**unified_headers(1.0, 0.5, status="rejected", reset=reset), "retry-after": "3"}
    native.queue.append(Reply(429, [REJECTED], "application/json", headers=rejected))
    kimi.script(Turn(text="kimi while the plan rests"), Turn(text="kimi again"))
    sdk = anthropic.Anthropic(base_url=proxy.url, auth_token=OAUTH_TOKEN, max_retries=0)
    ask: dict[str, Any] = {"model": "claude-opus-5-5", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    first = sdk.messages.create(**ask)
    assert first.content[0].text == "kimi while the plan rests"  # type: ignore[union-attr]
    second = sdk.messages.create(**ask)
    assert second.content[0].text == "kimi again"  # type: ignore[union-attr]
    assert len(native.received) == 1  # the second call never asked the rejected plan
    wait_until(lambda: _ledger_rows(isolated_home, "plan_quota"), what="the rejected plan's snapshot")
    (plan,) = _ledger_rows(isolated_home, "plan_quota")
    assert plan["status"] == "rejected" and reset - 1 < plan["retry_until"] < reset + 5
    wait_until(lambda: time.time() > plan["retry_until"] + 0.05, what="the plan's reset")
    native.queue.append(Reply(200, [MESSAGE], "application/json", headers=unified_headers(0.01, 0.5)))
    third = sdk.messages.create(**ask)
    assert third.content[0].text == "from the plan"  # type: ignore[union-attr]
    wait_until(lambda: recorder.written == 4, what="four attempts in the ledger")
    rows = _ledger_rows(isolated_home, "calls")
    assert [(r["provider"], r["fallback_trigger"], r["http_status"]) for r in rows] == [
        ("anthropic", None, 429),
        ("baseten", "429", 200),
        ("baseten", "quota", 200),
        ("anthropic", None, 200),
    ]
    assert "exceed your account's rate limit" in rows[0]["error"]


def test_a_route_with_no_other_target_gets_the_native_error_with_its_text_recorded(
    ledger_proxy: Callable[[str], tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]], isolated_home: Path
) -> None:
    proxy, native, _kimi, recorder = ledger_proxy(NATIVE_ONLY)
    rejected = {**unified_headers(1.0, 0.5, status="rejected", reset=time.time() + 3600), "retry-after": "3600"}
    leaky = orjson.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": f"over ({OAUTH_TOKEN})"}})
    for _ in range(2):
        native.queue.append(Reply(429, [leaky], "application/json", headers=rejected))
    sdk = anthropic.Anthropic(base_url=proxy.url, auth_token=OAUTH_TOKEN, max_retries=0)
    ask: dict[str, Any] = {"model": "claude-opus-5-5", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    for _ in range(2):
        with pytest.raises(anthropic.RateLimitError) as caught:
            sdk.messages.create(**ask)
        assert caught.value.response.headers["retry-after"] == "3600"
    assert len(native.received) == 2
    wait_until(lambda: recorder.written == 2, what="both attempts in the ledger")
    rows = _ledger_rows(isolated_home, "calls")
    assert [r["outcome"] for r in rows] == ["upstream_error", "upstream_error"]
    assert rows[0]["error"] == "upstream anthropic returned 429: over (***)"


def test_codex_plan_and_api_key_limits_through_the_openai_client(
    ledger_proxy: Callable[[str], tuple[Proxy, FakeAnthropicUpstream, FakeChatUpstream, Recorder]], isolated_home: Path
) -> None:
    proxy, native, _kimi, recorder = ledger_proxy(NATIVE_ONLY)
    now = time.time()
    response = {
        "id": "resp_plan",
        "object": "response",
        "created_at": int(now),
        "model": "gpt-5.5",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
    }
    codex = {
        "x-codex-primary-used-percent": "42.0",
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(int(now + 3600)),
        "x-codex-secondary-used-percent": "18",
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": str(int(now + 4 * 86400)),
        "x-codex-active-limit": "codex",
    }
    api_key = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-remaining-tokens": "27000",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    native.queue.append(Reply(200, [orjson.dumps(response)], "application/json", headers=codex))
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0)
    raw = client.responses.with_raw_response.create(model="gpt-5.5", input="hi")
    assert raw.headers["x-codex-primary-used-percent"] == "42.0"  # Codex reads them: passed on
    wait_until(lambda: _ledger_rows(isolated_home, "plan_quota"), what="the Codex plan's snapshot")
    (plan,) = _ledger_rows(isolated_home, "plan_quota")
    assert (plan["provider"], plan["source"]) == ("openai", "codex")
    assert [(w["name"], w["utilization"]) for w in json.loads(plan["windows"])] == [("5h", 0.42), ("7d", 0.18)]

    native.queue.append(Reply(200, [orjson.dumps(response)], "application/json", headers=api_key))
    client.responses.create(model="gpt-5.5", input="hi")
    wait_until(lambda: _ledger_rows(isolated_home, "plan_quota")[0]["source"] == "api", what="the API key's limits")
    windows = json.loads(_ledger_rows(isolated_home, "plan_quota")[0]["windows"])
    assert [(w["name"], round(w["utilization"], 3)) for w in windows] == [("requests", 0.002), ("tokens", 0.1)]
    assert windows[1]["resets_at"] == pytest.approx(time.time() + 360, abs=30)
    wait_until(lambda: recorder.written == 2, what="both calls in the ledger")
    recorder.close()
    assert OPENAI_KEY.encode() not in (isolated_home / "ledger.db").read_bytes()


def test_a_plan_budget_acts_at_its_share_of_the_window(
    start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    native, kimi = FakeAnthropicUpstream(), FakeChatUpstream()
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    presets = isolated_home / "presets"
    presets.mkdir()
    (presets / "plan.toml").write_text(NATIVE_ONLY, encoding="utf-8")
    (isolated_home / "active-preset").write_text("plan\n", encoding="utf-8")
    with serve(native) as native_url, serve(kimi) as kimi_url:
        config = (
            f'[providers.anthropic]\nbase_url = "{native_url}"\n[providers.baseten]\nbase_url = "{kimi_url}"\n'
            '[[budgets]]\nscope = "plan:anthropic"\nwindow = "5h"\n'
            'actions = [{ at = 0.5, do = "warn" }, { at = 0.9, do = "preset", preset = "kimi-k3" }]\n'
        )
        proxy = start_proxy(config)
        native.queue.append(Reply(200, [MESSAGE], "application/json", headers=unified_headers(0.55, 0.18)))
        native.queue.append(Reply(200, [MESSAGE], "application/json", headers=unified_headers(0.91, 0.3)))
        kimi.script(Turn(text="kimi past 90 %"))
        sdk = anthropic.Anthropic(base_url=proxy.url, auth_token=OAUTH_TOKEN, max_retries=0)
        ask: dict[str, Any] = {
            "model": "claude-opus-5-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        }
        texts = [sdk.messages.create(**ask).content[0].text for _ in range(3)]  # type: ignore[union-attr]
    assert texts == ["from the plan", "from the plan", "kimi past 90 %"]
    records = proxy.sink.wait(3)
    assert [(r.provider, r.budget, r.budget_action) for r in records] == [
        ("anthropic", None, None),  # the plan had said nothing yet
        ("anthropic", "plan:anthropic/5h", "warn"),  # the plan said 55 % of its 5-hour window
        ("baseten", "plan:anthropic/5h", "preset"),  # then 91 %: the budget's preset routes the call
    ]
