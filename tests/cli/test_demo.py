"""`switch demo`: a real proxy over the simulated upstream, the workload in all three APIs, the bill."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.demo.run import PRICES, ROUTES, config_text, preset_text
from switch.demo.upstream import SimulatedKimi
from switch.demo.workload import Workload
from tests.conftest import Proxy
from tests.servers import serve

APIS = ("anthropic", "openai-responses", "openai-chat")
HARNESSES = {"claude-code", "codex", "langchain"}
CALLS = 12
TOOL_TURN = [
    {"role": "user", "content": "Which files describe presets?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "functions.ls:0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "functions.ls:0", "content": "harness_presets/"},
]


def run_demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`switch demo` as a user runs it, stdout a pipe (no terminal), HOME and the temp dir under `tmp_path`."""
    (tmp_path / "user").mkdir(exist_ok=True)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "SWITCH_HOME"}
    env.update(HOME=str(tmp_path / "user"), TMPDIR=str(tmp_path / "tmp"))
    # subprocess.run kills and reaps the demo on timeout; the demo itself stops its proxy on the way out.
    return subprocess.run(
        [sys.executable, "-m", "switch", "demo", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_demo_without_a_terminal_prints_the_summary_and_leaves_nothing(tmp_path: Path) -> None:
    # The demo runs under a throwaway home of its own: the user's broken config is not its to read or report.
    user_config = tmp_path / "user" / ".switch" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("[server\nport = 'x'\n")

    result = run_demo(tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "SIMULATED" in lines[0]
    assert f"Simulated: {CALLS} upstream calls, 0 refused." in result.stdout
    for role in ROUTES:
        assert re.search(rf"^{role}\s+\$\d", result.stdout, re.M), role
    for api in APIS:
        assert re.search(rf"^{api}\s+\$\d[\d.]*\s+\$\d[\d.]*\s+\$\d[\d.]*\s+4\s", result.stdout, re.M), api
    assert list((tmp_path / "tmp").iterdir()) == []
    assert [path.name for path in (tmp_path / "user" / ".switch").iterdir()] == ["config.toml"]


def test_demo_keep_leaves_a_ledger_of_real_priced_calls(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--keep")

    assert result.returncode == 0, result.stderr
    kept = re.search(r"Kept the demo home: (\S+)", result.stdout)
    assert kept is not None, result.stdout
    home = Path(kept.group(1))
    assert home.parent == tmp_path / "tmp"
    connection = sqlite3.connect(home / "ledger.db")
    rows = connection.execute(
        "SELECT harness, role, inbound_api, served_model, cost_micros, preset, outcome FROM calls"
    ).fetchall()
    connection.close()
    assert len(rows) == CALLS
    assert {row[0] for row in rows} == HARNESSES
    assert {row[2] for row in rows} == set(APIS)
    assert {(row[1], "demo/" + row[3]) for row in rows} == set(ROUTES.items())
    assert all(row[4] is not None and row[4] > 0 for row in rows)
    assert {row[5] for row in rows} == {"demo"}
    assert {row[6] for row in rows} == {"completed"}


@pytest.fixture
def simulated() -> Any:
    app = SimulatedKimi(paced=False)
    with serve(app) as url:
        yield app, url


def test_simulated_upstream_refuses_a_tool_turn_without_reasoning_like_kimi(simulated: Any) -> None:
    app, url = simulated
    body = {"model": "kimi-sim", "messages": TOOL_TURN}

    refused = httpx.post(f"{url}/v1/chat/completions", json=body)
    with_reasoning = [TOOL_TURN[0], {**TOOL_TURN[1], "reasoning_content": "List first."}, TOOL_TURN[2]]
    accepted = httpx.post(f"{url}/v1/chat/completions", json={**body, "messages": with_reasoning})
    again = httpx.post(f"{url}/v1/chat/completions", json={**body, "messages": with_reasoning})

    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "thinking is enabled but reasoning_content is missing in assistant tool call message at index 1"
    )
    assert accepted.status_code == 200
    assert accepted.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] > 0  # the prefix is cached now
    assert app.refusals == 1


def test_switch_restores_the_reasoning_the_simulated_upstream_requires(
    simulated: Any, start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, url = simulated
    monkeypatch.setenv("SWITCH_DEMO_KEY", "demo")
    home = Path(os.environ["SWITCH_HOME"])
    (home / "presets").mkdir()
    (home / "presets" / "demo.toml").write_text(preset_text(), encoding="utf-8")
    (home / "active-preset").write_text("demo", encoding="utf-8")
    proxy = start_proxy(config_text(url, 8742))  # served in-process: the port is never bound

    workload = Workload(proxy.url)
    try:
        sent = workload.run()
    finally:
        workload.close()

    assert [call.status for call in sent] == [200] * CALLS
    # Each orchestrator's second turn carries a tool-call turn back: three chances for a 400, none taken.
    tool_turns = [r for r in proxy.sink.wait(CALLS) if r.role == "orchestrator"]
    assert len(tool_turns) == 6
    assert app.requests == CALLS and app.refusals == 0
    assert {r.served_model for r in proxy.sink.records} == {ref.split("/", 1)[1] for ref in PRICES}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system"]), "content": json_values},
        optional={"tool_calls": json_values, "reasoning_content": json_values},
    ),
    max_size=4,
)


@given(
    body=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"messages": messages}, optional={"tools": json_values, "stream": st.booleans(), "model": json_values}
        ),
    )
)
def test_simulated_upstream_answers_any_json_with_200_or_400(body: Any) -> None:
    app = SimulatedKimi(paced=False)
    with serve(app) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json=body)
    assert response.status_code in (200, 400), response.text
