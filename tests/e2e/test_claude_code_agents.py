"""The real Claude Code (the e2e pin) through switch: a fork is served by the orchestrator's target and counted
as a subagent of kind `fork`; a nested subagent is recorded under the agent that spawned it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ORCHESTRATOR_MODEL, SUBAGENT_MODEL, Harness, check_ledger, has_tool_result
from tests.fake_upstream import ToolCall, Turn
from tests.servers import serve_process

ALLOWED = ["--allowedTools", "Write,Bash,Read,Agent,Task"]
FORK_MARKER = "<fork-boilerplate>"


def _history(request: dict[str, Any]) -> str:
    return json.dumps(request.get("messages", []))


def _fork_responder(request: dict[str, Any]) -> Turn:
    history = _history(request)
    if FORK_MARKER in history:
        # The fork runs a tool first, so its second turn (ending in a tool result, not the marker) is a fork too.
        if "fork-tool-ran" in history:
            return Turn(text="FORK REPORT: checked.")
        return Turn(reasoning="Check.", tool_calls=[ToolCall("Bash", json.dumps({"command": "echo fork-tool-ran"}))])
    if has_tool_result(request):
        return Turn(text="The fork is checking.")
    spawn = {"description": "fork check", "prompt": "Check it in a fork.", "subagent_type": "fork"}
    return Turn(reasoning="Fork this.", tool_calls=[ToolCall("Agent", json.dumps(spawn))])


def _port(run: Harness) -> int:
    config = (run.switch_home / "config.toml").read_text()
    return int(re.search(r"port = (\d+)", config).group(1))  # type: ignore[union-attr]


def _claude(run: Harness, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["claude", *args], cwd=run.work, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("wiring", ["claude-on", "base-url-only"])
def test_fork_is_served_by_the_orchestrators_target(
    harness: Callable[..., Harness], claude_bin: Path, wiring: str
) -> None:
    """`switch claude on` then `claude` (hint headers on), and a user who only set ANTHROPIC_BASE_URL (no hints:
    the fork is recognised by its prompt, tools and marker)."""
    run = harness(_fork_responder, [claude_bin])
    port = _port(run)
    if wiring == "claude-on":
        wired = subprocess.run([sys.executable, "-m", "switch", "claude", "on"], env=run.env, capture_output=True)
        assert wired.returncode == 0, wired.stderr
        settings = json.loads((Path(run.env["HOME"]) / ".claude" / "settings.json").read_text())
        assert settings["env"]["CLAUDE_CODE_GATEWAY_HINT_HEADERS"] == "1"
        env = run.env
    else:
        env = {**run.env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"}
    with serve_process(port, run.env):
        result = _claude(run, env, "-p", "fork a check", "--output-format", "text", *ALLOWED)
    assert result.returncode == 0, result.stderr
    received = [r.json for r in run.upstream.received]
    forks = [request for request in received if FORK_MARKER in _history(request)]
    assert forks, "Claude Code never started the fork"
    assert {request["model"] for request in received} == {ORCHESTRATOR_MODEL}
    # The fork re-sends the orchestrator's first request as its prefix: on the same model, its cache is hit.
    first = received[0]
    assert forks[0]["messages"][: len(first["messages"])] == first["messages"]
    assert (forks[0]["tools"], forks[0].get("user")) == (first["tools"], first.get("user"))
    rows = check_ledger(run, "claude-code")
    fork_rows = [row for row in rows if row["request_kind"] == "fork"]
    assert len(fork_rows) == len(forks) >= 2
    assert {(row["role"], row["served_model"]) for row in fork_rows} == {("subagent", ORCHESTRATOR_MODEL)}
    assert all(row["agent_id"] for row in fork_rows)
    assert {row["role"] for row in rows if row["request_kind"] is None} == {"orchestrator"}


def test_nested_subagent_is_recorded_under_its_parent(harness: Callable[..., Harness], claude_bin: Path) -> None:
    def respond(request: dict[str, Any]) -> Turn:
        history = _history(request)
        if request["model"] == SUBAGENT_MODEL:
            if "NESTED-TASK" in history:
                return Turn(text="NESTED REPORT: fine.")
            if has_tool_result(request):
                return Turn(text="CHILD REPORT: the nested agent said fine.")
            spawn = {"description": "nested", "prompt": "NESTED-TASK: report fine.", "subagent_type": "general-purpose"}
            return Turn(tool_calls=[ToolCall("Agent", json.dumps(spawn))])
        if has_tool_result(request):
            return Turn(text="All agents reported.")
        spawn = {"description": "child", "prompt": "CHILD-TASK: delegate further.", "subagent_type": "general-purpose"}
        return Turn(tool_calls=[ToolCall("Agent", json.dumps(spawn))])

    run = harness(respond, [claude_bin])
    result = run.run("claude", "-p", "delegate, twice over", "--output-format", "text", *ALLOWED)
    assert result.returncode == 0, result.stderr
    rows = check_ledger(run, "claude-code")
    nested = [row for row in rows if row["parent_agent_id"]]
    assert nested, "no call named a parent agent"
    (nested_agent,) = {row["agent_id"] for row in nested}
    (parent,) = {row["parent_agent_id"] for row in nested}
    parent_rows = [row for row in rows if row["agent_id"] == parent]
    assert parent_rows and all(row["parent_agent_id"] is None for row in parent_rows)
    assert {row["role"] for row in nested + parent_rows} == {"subagent"}
    assert nested_agent != parent
    report = subprocess.run(
        [sys.executable, "-m", "switch", "spend", "--by", "agent", "--json"],
        env=run.env,
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    (session,) = json.loads(report.stdout)["sessions"]
    main = session["agents"]
    assert main["kind"] == "orchestrator" and main["models"] == [ORCHESTRATOR_MODEL]
    (child,) = [node for node in main["children"] if node["agent_id"] == parent]
    assert [node["agent_id"] for node in child["children"]] == [nested_agent]
    assert child["models"] == child["children"][0]["models"] == [SUBAGENT_MODEL]
    assert child["calls"] == len(parent_rows) and child["children"][0]["calls"] == len(nested)
