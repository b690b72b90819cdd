"""The Codex CLI (the real one, pinned) through `switch run codex` to a Kimi-style fake upstream."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import (
    ORCHESTRATOR_MODEL,
    SUBAGENT_MODEL,
    Harness,
    check_ledger,
    tool_names,
    tool_results,
)
from tests.fake_upstream import ToolCall, Turn

EXEC = ["exec", "--skip-git-repo-check", "-s", "danger-full-access"]


def test_plain_answer(harness: Callable[..., Harness], codex_bin: Path) -> None:
    run = harness(lambda request: Turn(text="Hello from Kimi via Codex."), [codex_bin])
    result = run.run("codex", *EXEC, "say hi")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Hello from Kimi via Codex." in result.stdout
    assert run.upstream.received[0].json["model"] == ORCHESTRATOR_MODEL
    check_ledger(run, "codex", "openai-responses")


def test_tool_loop_changes_the_workspace(harness: Callable[..., Harness], codex_bin: Path) -> None:
    def respond(request: dict[str, Any]) -> Turn:
        if tool_results(request):
            return Turn(text="Wrote hello.txt.")
        command = {"cmd": "printf 'hi from codex\\n' > hello.txt"}
        return Turn(
            reasoning="Write the file with the shell.", tool_calls=[ToolCall("exec_command", json.dumps(command))]
        )

    run = harness(respond, [codex_bin])
    result = run.run("codex", *EXEC, "create hello.txt")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote hello.txt." in result.stdout
    assert (run.work / "hello.txt").read_text() == "hi from codex\n"
    # The same model and tool surface as `codex --profile switch`: classic shell tools, not JavaScript code mode.
    assert "model: gpt-5.5" in result.stderr
    offered = tool_names(run.upstream.received[0].json)
    assert {"exec_command", "apply_patch"} <= offered and "functions__exec" not in offered
    second = run.upstream.received[-1].json
    assistant = next(m for m in second["messages"] if m.get("tool_calls"))
    assert assistant["reasoning_content"] == "Write the file with the shell."
    check_ledger(run, "codex", "openai-responses")


def test_the_users_own_model_choice_wins(harness: Callable[..., Harness], codex_bin: Path) -> None:
    run = harness(lambda request: Turn(text="ok"), [codex_bin])
    chosen = run.run("codex", *EXEC, "-m", "gpt-6.2-sol", "say hi")
    configured = run.run("codex", *EXEC, "-c", 'model="gpt-5.4"', "say hi")
    assert chosen.returncode == 0 and configured.returncode == 0, chosen.stderr[-2000:] + configured.stderr[-2000:]
    assert "model: gpt-6.2-sol" in chosen.stderr and "model: gpt-5.4" in configured.stderr
    assert "provider: switch" in chosen.stderr and "provider: switch" in configured.stderr
    check_ledger(run, "codex", "openai-responses")


def test_subagent_is_served_by_the_subagent_model(harness: Callable[..., Harness], codex_bin: Path) -> None:
    def respond(request: dict[str, Any]) -> Turn:
        if request["model"] == SUBAGENT_MODEL:
            return Turn(text="SUBAGENT REPORT: all good.")
        results = tool_results(request)
        names = [c["function"]["name"] for m in request["messages"] for c in m.get("tool_calls") or []]
        if not results:
            spawn = {"task_name": "check_things", "message": "Report that all is good.", "fork_turns": "none"}
            return Turn(reasoning="Delegate.", tool_calls=[ToolCall("collaboration__spawn_agent", json.dumps(spawn))])
        if names.count("collaboration__wait_agent") < 2:
            return Turn(
                reasoning="Wait for it.", tool_calls=[ToolCall("collaboration__wait_agent", '{"timeout_ms": 10000}')]
            )
        return Turn(text="The subagent finished.")

    run = harness(respond, [codex_bin])
    # With the profile's model, Codex offers subagent tools only when the user turns them on.
    result = run.run("codex", *EXEC, "-c", "features.multi_agent_v2=true", "delegate a check to a subagent")
    assert result.returncode == 0, result.stderr[-3000:]
    models = [received.json["model"] for received in run.upstream.received]
    assert SUBAGENT_MODEL in models and models[0] == ORCHESTRATOR_MODEL
    rows = check_ledger(run, "codex", "openai-responses")
    assert {r["role"] for r in rows if r["served_model"] == SUBAGENT_MODEL} == {"subagent"}
    assert {r["role"] for r in rows if r["served_model"] == ORCHESTRATOR_MODEL} == {"orchestrator"}


def test_turn_summary_is_written_after_each_turn(harness: Callable[..., Harness], codex_bin: Path) -> None:
    """Codex runs switch's notify program after the turn; Codex discards its output, so it goes to turns.log."""
    run = harness(lambda request: Turn(text="Hello from Kimi via Codex."), [codex_bin])
    run.env["SWITCH_NO_DESKTOP_NOTIFY"] = "1"
    result = run.run("codex", *EXEC, "say hi")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = check_ledger(run, "codex", "openai-responses")
    session = rows[0]["session_id"]
    log = run.switch_home / "logs" / "turns.log"
    deadline = time.monotonic() + 60  # Codex starts the program as the turn ends and does not wait for it
    while not log.exists() or f" codex {session} " not in log.read_text():
        assert time.monotonic() < deadline, "no summary for the turn"
        time.sleep(0.1)
    assert f" codex {session} switch · orchestrator {ORCHESTRATOR_MODEL} · spent " in log.read_text()
