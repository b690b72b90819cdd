"""deepagents-code (`dcode`, pinned) through switch to a Kimi-style fake upstream: launched by
`switch run dcode`, and wired by `switch langchain on` the way its hint tells users."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import ORCHESTRATOR_MODEL, SUBAGENT_MODEL, Harness, check_ledger, tool_results
from tests.fake_upstream import ToolCall, Turn

DCODE = ["-q", "--no-tracing", "-M", "openai:gpt-5.5", "-n"]
# How deepagents opens every subagent's conversation (see the *_subagent captures).
SUBAGENT_PREAMBLE = "The messages above are a prior conversation you are continu"


def is_subagent_call(request: dict[str, Any]) -> bool:
    """Whether deepagents sent this request from inside a `task` subagent (by its shape, not its model)."""
    return SUBAGENT_PREAMBLE in json.dumps(request.get("messages", []))


def delegating_respond(request: dict[str, Any]) -> Turn:
    """The orchestrator hands one check to a subagent; the subagent reports; the orchestrator wraps up."""
    if is_subagent_call(request):
        return Turn(text="SUBAGENT REPORT: all good.")
    if tool_results(request):
        return Turn(text="The subagent finished.")
    task = {"description": "Report that all is good.", "subagent_type": "general-purpose"}
    return Turn(reasoning="Delegate.", tool_calls=[ToolCall("task", json.dumps(task))])


# dcode runs its agent in a LangGraph server process of its own. On a loaded 2-core CI machine that process
# has died by a signal (SIGSEGV) before logging a line, so before any model call: dcode then prints "Server
# process exited with code -11". That crash is dcode's, so such a run is tried once more; a crash after a
# model call reached the fake upstream still fails the test (the shared PROTOCOLS.md, section 6, has it).
HARNESS_SERVER_CRASH = re.compile(r"Server process exited with code -\d+")


def dcode(run: Harness, launch: Callable[[], subprocess.CompletedProcess[str]]) -> subprocess.CompletedProcess[str]:
    """One dcode run; again once if dcode's own server died by a signal before any model call reached the upstream."""
    calls_before = len(run.upstream.received)
    result = launch()
    if (
        result.returncode != 0
        and HARNESS_SERVER_CRASH.search(result.stderr)
        and len(run.upstream.received) == calls_before
    ):
        print(f"dcode's own server crashed before any model call; once more:\n{result.stderr[-600:]}")
        result = launch()
    return result


def test_plain_answer(harness: Callable[..., Harness], dcode_bin: Path) -> None:
    run = harness(lambda request: Turn(text="Hello from Kimi via dcode."), [dcode_bin])
    result = dcode(run, lambda: run.run("dcode", *DCODE, "say hi"))
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
    result = dcode(run, lambda: run.run("dcode", *DCODE, "create hello.txt"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run.work / "hello.txt").read_text() == "hi from dcode\n"
    assistant = next(m for m in run.upstream.received[-1].json["messages"] if m.get("tool_calls"))
    assert assistant["reasoning_content"] == "Write the file."
    check_ledger(run, "langchain")


def test_subagent_is_served_by_the_subagent_model(harness: Callable[..., Harness], dcode_bin: Path) -> None:
    run = harness(delegating_respond, [dcode_bin])
    result = dcode(run, lambda: run.run("dcode", *DCODE, "delegate a check to a subagent"))
    assert result.returncode == 0, result.stderr[-3000:]
    models = [received.json["model"] for received in run.upstream.received]
    assert SUBAGENT_MODEL in models and models[0] == ORCHESTRATOR_MODEL
    rows = check_ledger(run, "langchain")
    assert {r["role"] for r in rows if r["served_model"] == SUBAGENT_MODEL} == {"subagent"}
    assert {r["role"] for r in rows if r["served_model"] == ORCHESTRATOR_MODEL} == {"orchestrator"}


def switch_cli(run: Harness, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real `switch` CLI as the user types it."""
    return subprocess.run(
        [sys.executable, "-m", "switch", *args], env=env, capture_output=True, text=True, timeout=120, cwd=run.work
    )


def test_langchain_on_as_hinted_keeps_subagents_on_the_subagent_route(
    harness: Callable[..., Harness], dcode_bin: Path
) -> None:
    run = harness(delegating_respond, [dcode_bin])
    # A new user: no OpenAI or Anthropic key of their own, only the provider key switch routes with.
    env = {k: v for k, v in run.env.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    wired = switch_cli(run, "langchain", "on", env=env)
    assert wired.returncode == 0, wired.stderr
    assert (Path(env["HOME"]) / ".deepagents" / "config.toml").exists()
    hinted = re.search(r"`(switch:[^`\s]+)`", wired.stdout)
    assert hinted, wired.stdout
    model = hinted.group(1)
    started = switch_cli(run, "up", env=env)
    assert started.returncode == 0, started.stderr
    try:
        result = dcode(
            run,
            lambda: subprocess.run(
                ["dcode", "-q", "--no-tracing", "-M", model, "-n", "delegate a check to a subagent"],
                cwd=run.work,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                stdin=subprocess.DEVNULL,
            ),
        )
    finally:
        stopped = switch_cli(run, "down", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    calls = [received.json for received in run.upstream.received]
    subagent_calls = [call for call in calls if is_subagent_call(call)]
    assert subagent_calls, "dcode never ran the subagent"
    assert {call["model"] for call in subagent_calls} == {SUBAGENT_MODEL}
    assert {call["model"] for call in calls if not is_subagent_call(call)} == {ORCHESTRATOR_MODEL}
    rows = check_ledger(run, "langchain", inbound_api="openai-chat")
    assert {r["role"] for r in rows if r["served_model"] == SUBAGENT_MODEL} == {"subagent"}
    assert {r["role"] for r in rows if r["served_model"] == ORCHESTRATOR_MODEL} == {"orchestrator"}
    # The ledger shows what dcode asked for: the provider-less model name from the hint.
    assert {r["requested_model"] for r in rows} == {model.removeprefix("switch:")}
