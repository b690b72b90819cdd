"""Long sessions with the real Claude Code, wired the way users do it (`switch claude on`, `switch up`, `claude`):
an upstream's overflow answer makes Claude Code compact and finish, and usage near the window switch told it
makes Claude Code compact on its own, at that window."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from tests.e2e.conftest import ORCHESTRATOR_MODEL, Harness, has_tool_result
from tests.fake_upstream import Reply, ToolCall, Turn

WINDOW = 131072  # Claude Code takes no window under 100k from CLAUDE_CODE_AUTO_COMPACT_WINDOW
LIMITS = f'[models."baseten/{ORCHESTRATOR_MODEL}"]\ncontext_window = {WINDOW}\nmax_output_tokens = 8000\n'
COMPACTION_PROMPT = "CRITICAL: Respond with TEXT ONLY"
SUMMARY = "<analysis>short</analysis>\n<summary>The user asked to run echo; it printed one.</summary>"


def switch(run: Harness, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "switch", *args], env=run.env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@contextmanager
def wired(run: Harness) -> Iterator[dict[str, str]]:
    """`switch claude on` and `switch up` on a model with a 128k window; the env settings.json then holds."""
    with (run.switch_home / "config.toml").open("a") as config:
        config.write(LIMITS)
    switch(run, "claude", "on")
    switch(run, "up")
    try:
        settings = json.loads((Path(run.env["HOME"]) / ".claude" / "settings.json").read_text())
        yield settings["env"]
    finally:
        switch(run, "down")


def claude(run: Harness, prompt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["claude", "-p", prompt, "--output-format", "text", "--allowedTools", "Bash"],
        cwd=run.work,
        env=run.env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


def is_compaction(request: dict[str, Any]) -> bool:
    messages = request.get("messages", [])
    return bool(messages) and COMPACTION_PROMPT in json.dumps(messages[-1])


def echo_call() -> ToolCall:
    return ToolCall("Bash", json.dumps({"command": "echo one", "description": "print one"}))


def test_an_upstream_overflow_makes_claude_code_compact_and_finish(
    harness: Callable[..., Harness], claude_bin: Path
) -> None:
    state = {"overflowed": False}

    def respond(request: dict[str, Any]) -> Turn | Reply:
        if is_compaction(request):
            return Turn(text=SUMMARY)
        if state["overflowed"]:
            return Turn(text="Finished after compaction.")
        if has_tool_result(request):
            state["overflowed"] = True
            # A 413 with vLLM-like words: before switch rewrote it, Claude Code stopped with "Request too large".
            message = f"Prompt length 140000 exceeds the maximum context length {WINDOW}"
            return Reply(413, [orjson.dumps({"error": {"message": message}})], "application/json")
        return Turn(tool_calls=[echo_call()])

    run = harness(respond, [claude_bin])
    with wired(run):
        result = claude(run, "run echo one with bash")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Finished after compaction." in result.stdout
    requests = [received.json for received in run.upstream.received]
    overflowed_at = next(i for i, r in enumerate(requests) if has_tool_result(r) and not is_compaction(r))
    assert any(is_compaction(r) for r in requests[overflowed_at + 1 :])
    rows = run.ledger()
    refused = [row for row in rows if row["outcome"] == "context_overflow"]
    assert len(refused) == 1 and refused[0]["http_status"] == 400
    assert refused[0]["error"].startswith(f"prompt is too long: 140000 tokens > {WINDOW} maximum")
    assert rows[-1]["outcome"] == "completed"


def test_usage_near_the_wired_window_makes_claude_code_compact_at_that_window(
    harness: Callable[..., Harness], claude_bin: Path
) -> None:
    state = {"compacted": False}

    def respond(request: dict[str, Any]) -> Turn:
        if is_compaction(request):
            state["compacted"] = True
            return Turn(text=SUMMARY)
        if state["compacted"]:
            return Turn(text="All done.")
        if sum(1 for message in request.get("messages", []) if message.get("role") == "tool") >= 4:
            return Turn(text="Never compacted.")  # ends a session that kept going on an assumed 1M window
        # 115k of a 128k window: over Claude Code's threshold for it (~110k), far under the ~1M it assumes
        # for a model id it does not know.
        return Turn(tool_calls=[echo_call()], prompt_tokens=115000, cached_tokens=0)

    run = harness(respond, [claude_bin])
    with wired(run) as env:
        assert env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == str(WINDOW)
        assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "8000"
        result = claude(run, "run echo one with bash, again and again")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All done." in result.stdout
    requests = [received.json for received in run.upstream.received]
    first_compaction = next(i for i, r in enumerate(requests) if is_compaction(r))
    # Claude Code compacted on its own, right after the turn that reported usage near the window.
    assert first_compaction >= 1 and not is_compaction(requests[first_compaction - 1])
    assert all(row["outcome"] == "completed" for row in run.ledger())
