"""Claude Code (the real CLI, pinned) through `switch run claude` to a Kimi-style fake upstream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import ORCHESTRATOR_MODEL, SUBAGENT_MODEL, Harness, check_ledger, has_tool_result
from tests.fake_upstream import ToolCall, Turn

ALLOWED = ["--allowedTools", "Write,Bash,Read,Agent,Task"]


def test_plain_answer(harness: Callable[..., Harness], claude_bin: Path) -> None:
    run = harness(lambda request: Turn(text="Hello from Kimi."), [claude_bin])
    result = run.run("claude", "-p", "say hi", "--output-format", "text")
    assert result.returncode == 0, result.stderr
    assert "Hello from Kimi." in result.stdout
    assert run.upstream.received[0].json["model"] == ORCHESTRATOR_MODEL
    check_ledger(run, "claude-code")


def test_tool_loop_changes_the_workspace(harness: Callable[..., Harness], claude_bin: Path) -> None:
    holder: dict[str, Harness] = {}

    def respond(request: dict[str, Any]) -> Turn:
        if has_tool_result(request):
            return Turn(text="Created hello.txt for you.")
        target = str(holder["run"].work / "hello.txt")
        return Turn(
            reasoning="The user wants a file; I will write it.",
            tool_calls=[ToolCall("Write", json.dumps({"file_path": target, "content": "hi from kimi\n"}))],
        )

    run = holder["run"] = harness(respond, [claude_bin])
    result = run.run("claude", "-p", "create hello.txt saying hi", "--output-format", "text", *ALLOWED)
    assert result.returncode == 0, result.stderr
    assert "Created hello.txt for you." in result.stdout
    assert (run.work / "hello.txt").read_text() == "hi from kimi\n"
    second = run.upstream.received[-1].json
    assistant = next(m for m in second["messages"] if m.get("tool_calls"))
    assert assistant["reasoning_content"] == "The user wants a file; I will write it."
    assert ":" in assistant["tool_calls"][0]["id"]  # the Kimi id came back as Kimi sent it
    check_ledger(run, "claude-code")


def test_subagent_is_served_by_the_subagent_model(harness: Callable[..., Harness], claude_bin: Path) -> None:
    def respond(request: dict[str, Any]) -> Turn:
        if request["model"] == SUBAGENT_MODEL:
            return Turn(text="SUBAGENT REPORT: all good.")
        if has_tool_result(request):
            return Turn(text="The subagent says all good.")
        spawn = {
            "description": "check things",
            "prompt": "Report that all is good.",
            "subagent_type": "general-purpose",
        }
        return Turn(reasoning="Delegate this.", tool_calls=[ToolCall("Agent", json.dumps(spawn))])

    run = harness(respond, [claude_bin])
    result = run.run("claude", "-p", "delegate a check to a subagent", "--output-format", "text", *ALLOWED)
    assert result.returncode == 0, result.stderr
    assert "The subagent says all good." in result.stdout
    models = [received.json["model"] for received in run.upstream.received]
    assert models.count(SUBAGENT_MODEL) >= 1 and models[0] == ORCHESTRATOR_MODEL
    rows = check_ledger(run, "claude-code")
    assert {r["role"] for r in rows if r["served_model"] == SUBAGENT_MODEL} == {"subagent"}
    assert {r["role"] for r in rows if r["served_model"] == ORCHESTRATOR_MODEL} == {"orchestrator"}
