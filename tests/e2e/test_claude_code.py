"""Claude Code (the real CLI, pinned) through `switch run claude` to a Kimi-style fake upstream."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import ORCHESTRATOR_MODEL, SUBAGENT_MODEL, Harness, check_ledger, has_tool_result
from tests.fake_upstream import ToolCall, Turn
from tests.servers import start_serve, wait_until

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


class _Terminal:
    """A real terminal's cells (pyte), fed the CLI's output as it arrives.

    Ink redraws only the cells that changed, so the raw bytes of a redrawn line miss every character it
    shares with the line before it: the screen, not the byte stream, shows what the user sees.
    """

    def __init__(self, columns: int, rows: int) -> None:
        import pyte

        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)

    def feed(self, data: bytes) -> None:
        self.stream.feed(data)

    def squeezed(self) -> str:
        """The screen's text with all whitespace removed."""
        return re.sub(r"\s+", "", "".join(self.screen.display))


def test_status_line_shows_the_served_model_in_the_interactive_cli(
    harness: Callable[..., Harness], claude_bin: Path
) -> None:
    """Claude Code runs status lines only interactively (not with -p): drive the real TUI in a terminal."""
    run = harness(lambda request: Turn(text="Hello from Kimi."), [claude_bin])
    home = Path(run.env["HOME"])
    key = run.env["ANTHROPIC_API_KEY"]
    (home / ".claude.json").write_text(  # a user who has been through onboarding, trusts the folder and the key
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "theme": "dark",
                "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                "projects": {str(run.work): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
            }
        )
    )
    config = (run.switch_home / "config.toml").read_text()
    port = int(re.search(r"port = (\d+)", config).group(1))  # type: ignore[union-attr]
    proxy = start_serve(port, run.env)
    # The proxy's writer creates the ledger as it starts, before any call: the status line then says that
    # this session has had none.
    wait_until(lambda: (run.switch_home / "ledger.db").exists(), what="the proxy to create its ledger")
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 250, 0, 0))
    claude = subprocess.Popen(
        [sys.executable, "-m", "switch", "run", "claude"],
        cwd=run.work,
        env={**run.env, "TERM": "xterm-256color"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    shown = _Terminal(250, 40)

    def wait_for(squeezed: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while squeezed not in shown.squeezed():
            assert time.monotonic() < deadline, f"never showed {squeezed!r}: {shown.squeezed()[-1500:]}"
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    shown.feed(os.read(controller, 65536))
                except OSError:  # the terminal closed: the CLI exited
                    raise AssertionError(f"claude exited: {shown.squeezed()[-1500:]}") from None

    try:
        wait_for("switch·nocallsthroughswitchinthissessionyet", 120)  # the status line ran before the first message
        os.write(controller, b"say hi")
        wait_for("sayhi", 30)
        os.write(controller, b"\r")
        wait_for("HellofromKimi.", 120)
        wait_for(f"switch·orchestrator{ORCHESTRATOR_MODEL}·spent", 60)
    finally:
        os.killpg(claude.pid, signal.SIGKILL)
        claude.wait(timeout=30)
        os.close(controller)
        proxy.terminate()
        proxy.wait(timeout=30)
    rows = check_ledger(run, "claude-code")
    assert {row["session_id"] for row in rows} == {rows[0]["session_id"]}


def test_claude_on_keeps_sending_native_calls_through_the_gateway_claude_code_used(
    harness: Callable[..., Harness], claude_bin: Path
) -> None:
    """`switch claude on` then `claude`, as the README says, for a user whose settings.json set a gateway."""
    from tests.fake_upstream import FakeAnthropicUpstream
    from tests.servers import serve

    run = harness(lambda request: Turn(text="Hello from Kimi."), [claude_bin])
    (run.switch_home / "active-preset").write_text("native\n")  # every call to the harness's own provider
    gateway = FakeAnthropicUpstream()
    with serve(gateway) as gateway_url:
        settings = Path(run.env["HOME"]) / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        original = json.dumps({"env": {"ANTHROPIC_BASE_URL": gateway_url + "/corp"}}, indent=2) + "\n"
        settings.write_text(original)
        config_before = (run.switch_home / "config.toml").read_bytes()

        def switch(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "switch", *args], env=run.env, capture_output=True, text=True, timeout=120
            )

        assert switch("up").returncode == 0
        try:
            wired = switch("claude", "on")
            assert wired.returncode == 0 and gateway_url + "/corp" in wired.stdout, wired.stderr
            result = subprocess.run(
                [str(claude_bin / "claude"), "-p", "say hi", "--output-format", "text"],
                cwd=run.work,
                env=run.env,
                capture_output=True,
                text=True,
                timeout=180,
                stdin=subprocess.DEVNULL,
            )
            assert result.returncode == 0, result.stderr
            assert "Native hello" in result.stdout
            assert any(received.path.startswith("/corp/v1/messages") for received in gateway.received)
            assert run.upstream.received == []  # nothing went to the Kimi upstream
        finally:
            switch("claude", "off")
            switch("down")
    assert settings.read_text() == original
    assert (run.switch_home / "config.toml").read_bytes() == config_before
    rows = run.ledger()
    messages = [received for received in gateway.received if received.path.startswith("/corp/v1/messages?")]
    assert len(rows) == len(messages) and {row["provider"] for row in rows} == {"anthropic"}
    assert {(row["harness"], row["outcome"]) for row in rows} == {("claude-code", "completed")}
