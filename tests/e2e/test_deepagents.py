"""deepagents-code (`dcode`, pinned) through `switch run dcode` to a Kimi-style fake upstream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import ORCHESTRATOR_MODEL, SUBAGENT_MODEL, Harness, check_ledger, tool_results
from tests.fake_upstream import ToolCall, Turn

DCODE = ["-q", "--no-tracing", "-M", "openai:gpt-5.5", "-n"]


def test_plain_answer(harness: Callable[..., Harness], dcode_bin: Path) -> None:
    run = harness(lambda request: Turn(text="Hello from Kimi via dcode."), [dcode_bin])
    result = run.run("dcode", *DCODE, "say hi")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Hello from Kimi via dcode." in result.stdout
    assert run.upstream.received[0].json["model"] == ORCHESTRATOR_MODEL
    check_ledger(run, "langchain")


def test_tool_loop_changes_the_workspace(harness: Callable[..., Harness], dcode_bin: Path) -> None:
    holder: dict[str, Harness] = {}

    def respond(request: dict[str, Any]) -> Turn:
        if tool_results(request):
            return Turn(text="Wrote hello.txt.")
        target = str(holder["run"].work / "hello.txt")
        arguments = json.dumps({"file_path": target, "content": "hi from dcode\n"})
        return Turn(reasoning="Write the file.", tool_calls=[ToolCall("write_file", arguments)])

    run = holder["run"] = harness(respond, [dcode_bin])
    result = run.run("dcode", *DCODE, "create hello.txt")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run.work / "hello.txt").read_text() == "hi from dcode\n"
    assistant = next(m for m in run.upstream.received[-1].json["messages"] if m.get("tool_calls"))
    assert assistant["reasoning_content"] == "Write the file."
    check_ledger(run, "langchain")


def test_subagent_is_served_by_the_subagent_model(harness: Callable[..., Harness], dcode_bin: Path) -> None:
    def respond(request: dict[str, Any]) -> Turn:
        if request["model"] == SUBAGENT_MODEL:
            return Turn(text="SUBAGENT REPORT: all good.")
        if tool_results(request):
            return Turn(text="The subagent finished.")
        task = {"description": "Report that all is good.", "subagent_type": "general-purpose"}
        return Turn(reasoning="Delegate.", tool_calls=[ToolCall("task", json.dumps(task))])

    run = harness(respond, [dcode_bin])
    result = run.run("dcode", *DCODE, "delegate a check to a subagent")
    assert result.returncode == 0, result.stderr[-3000:]
    models = [received.json["model"] for received in run.upstream.received]
    assert SUBAGENT_MODEL in models and models[0] == ORCHESTRATOR_MODEL
    rows = check_ledger(run, "langchain")
    assert {r["role"] for r in rows if r["served_model"] == SUBAGENT_MODEL} == {"subagent"}
    assert {r["role"] for r in rows if r["served_model"] == ORCHESTRATOR_MODEL} == {"orchestrator"}
