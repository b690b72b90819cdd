"""Prompt-cache economics: prefix-stable translation, session affinity, cache visibility."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from typer.testing import CliRunner

from switch.cli import app as cli_app
from switch.ledger.recorder import Recorder
from switch.routing.presets import set_active
from tests.conftest import FAKE_BASETEN_KEY, Proxy, drain, load_capture, presets_of
from tests.fake_upstream import FakeChatUpstream, Turn
from tests.servers import serve, wait_until

SKIP = {"host", "content-length", "connection", "accept-encoding"}
# Turn-by-turn chains of one agent (subagent calls of the same session are their own chain).
CHAINS = [
    ["claude_code_bash_tool/01_POST_v1_messages.json", "claude_code_bash_tool/02_POST_v1_messages.json"],
    [
        "claude_code_subagent/01_POST_v1_messages.json",
        "claude_code_subagent/02_POST_v1_messages.json",
        "claude_code_subagent/04_POST_v1_messages.json",
    ],
    ["claude_code_subagent_fg/01_POST_v1_messages.json", "claude_code_subagent_fg/03_POST_v1_messages.json"],
    ["codex_function_call/01_POST_v1_responses.json", "codex_function_call/02_POST_v1_responses.json"],
    ["codex_subagent/01_POST_v1_responses.json", "codex_subagent/02_POST_v1_responses.json"],
    [
        "deepagents_code_anthropic_subagent/01_POST_v1_messages.json",
        "deepagents_code_anthropic_subagent/03_POST_v1_messages.json",
    ],
    [
        "deepagents_code_openai_subagent/01_POST_v1_responses.json",
        "deepagents_code_openai_subagent/03_POST_v1_responses.json",
    ],
]


def send(proxy: Proxy, name: str) -> httpx.Response:
    capture = load_capture(name)
    headers = {k: v for k, v in capture["headers"] if k.lower() not in SKIP}
    return httpx.post(proxy.url + capture["path"], json=capture["body"], headers=headers, timeout=20)


def messages_bytes(body: bytes) -> bytes:
    """The serialized `messages` array exactly as it appears in the body the upstream received."""
    start = body.index(b'"messages":[') + len(b'"messages":')
    value = orjson.loads(body)["messages"]
    serialized = orjson.dumps(value)
    assert body[start : start + len(serialized)] == serialized  # what was sent is the canonical form
    return serialized


@pytest.mark.parametrize("chain", CHAINS, ids=[c[0].split("/")[0] for c in CHAINS])
def test_each_turn_extends_the_previous_turn_byte_for_byte(kimi_proxy: Proxy, chain: list[str]) -> None:
    assert kimi_proxy.upstream is not None
    for name in chain:
        kimi_proxy.upstream.script(Turn(text="ok"))
        assert send(kimi_proxy, name).status_code == 200
    bodies = [received.body for received in kimi_proxy.upstream.received]
    for earlier, later in zip(bodies, bodies[1:], strict=False):
        previous, current = messages_bytes(earlier), messages_bytes(later)
        assert len(current) > len(previous)
        assert current.startswith(previous[:-1] + b","), "the new turn must only append to the old one"
        assert b"x-anthropic-billing-header" not in later


def test_identical_requests_give_identical_upstream_bodies(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    for _ in range(2):
        kimi_proxy.upstream.script(Turn(text="ok"))
        assert send(kimi_proxy, "claude_code_bash_tool/02_POST_v1_messages.json").status_code == 200
    first, second = (received.body for received in kimi_proxy.upstream.received)
    assert first == second


PRESET = '[default]\norchestrator = "{target}"\n'


@pytest.mark.parametrize("affinity", ["session", "none"])
def test_session_keeps_its_target_across_a_preset_switch(
    start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch, affinity: str
) -> None:
    first, second = FakeChatUpstream(), FakeChatUpstream()
    with serve(first) as first_url, serve(second) as second_url:
        monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
        monkeypatch.setenv("BACKUP_API_KEY", "sk-fake-backup")
        presets = isolated_home / "presets"
        presets.mkdir()
        (presets / "a.toml").write_text(PRESET.format(target="baseten/kimi-a"))
        (presets / "b.toml").write_text(PRESET.format(target="backup/kimi-b"))
        set_active("a")
        proxy = start_proxy(
            f'[providers.baseten]\nbase_url = "{first_url}/v1"\n'
            f'[providers.backup]\nbase_url = "{second_url}/v1"\napi_key_env = "BACKUP_API_KEY"\n'
            f'[routing]\naffinity = "{affinity}"\n'
        )
        client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)

        def call(session: str) -> None:
            client.messages.create(
                model="m",
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}],
                extra_headers={"x-claude-code-session-id": session},
            )

        call("session-1")
        set_active("b")
        wait_until(lambda: presets_of(proxy).active.name == "b", what="the proxy to load preset b")
        call("session-1")
        call("session-2")
        assert [r.json["model"] for r in first.received] == (
            ["kimi-a", "kimi-a"] if affinity == "session" else ["kimi-a"]
        )
        assert [r.json["model"] for r in second.received] == (
            ["kimi-b"] if affinity == "session" else ["kimi-b", "kimi-b"]
        )


def test_spend_by_session_reports_hit_rate_and_cache_savings(ledger_proxy: tuple[Proxy, Recorder]) -> None:
    proxy, recorder = ledger_proxy
    fake = proxy.upstream
    assert fake is not None
    turns: dict[str, list[tuple[int, int]]] = {"s-1": [(1000, 0), (1500, 1000)], "s-2": [(3000, 2400)]}
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    for session, calls in turns.items():
        for prompt, cached in calls:
            fake.script(Turn(text="ok", prompt_tokens=prompt, cached_tokens=cached, completion_tokens=10))
            client.messages.create(
                model="claude-opus-5-5",
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}],
                extra_headers={"x-claude-code-session-id": session},
            )
    drain(recorder, 3)
    result = CliRunner().invoke(cli_app, ["spend", "--by", "session", "--json"])
    assert result.exit_code == 0, result.output
    groups = {row["grp"]: row for row in json.loads(result.output)["groups"]}
    for session, calls in turns.items():
        cached = sum(c for _, c in calls)
        total = sum(p for p, _ in calls)
        assert groups[session]["cache_hit_rate"] == pytest.approx(cached / total)
        # Kimi K3 on Baseten: $3.00 uncached vs $0.30 cached per million → $2.70 saved per million cached
        assert groups[session]["cache_savings_micros"] == round(cached * 2.7)
    one: Any = groups["s-1"]
    assert one["calls"] == 2 and one["spend_micros"] == round((1000 + 500) * 3 + 1000 * 0.3 + 20 * 15)
