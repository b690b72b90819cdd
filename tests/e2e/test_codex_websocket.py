"""The real Codex CLI (pinned) over the Responses WebSocket, the way the README says: `switch codex on`, then
`codex --profile switch`: a multi-turn tool loop over a chat upstream with every turn on one WebSocket and
no fallback to HTTP; with `[server] websockets = false` the same run falls back to HTTP at once."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Harness, check_ledger, tool_results
from tests.fake_upstream import ToolCall, Turn

EXEC = ["exec", "--skip-git-repo-check", "-s", "danger-full-access"]


def _two_tools(request: dict[str, Any]) -> Turn:
    done = tool_results(request)
    if len(done) >= 2:
        return Turn(text="Wrote and read hello.txt.")
    if done:
        return Turn(reasoning="Now read it back.", tool_calls=[ToolCall("exec_command", '{"cmd": "cat hello.txt"}')])
    command = {"cmd": "printf 'hi over ws\\n' > hello.txt"}
    return Turn(reasoning="Write the file first.", tool_calls=[ToolCall("exec_command", json.dumps(command))])


def _provider(run: Harness) -> dict[str, Any]:
    config = Path(run.env["CODEX_HOME"]) / "config.toml"
    return dict(tomllib.loads(config.read_text())["model_providers"]["switch"])


def test_codex_profile_switch_runs_a_tool_loop_over_one_websocket(
    harness: Callable[..., Harness], codex_bin: Path
) -> None:
    run = harness(_two_tools, [codex_bin])
    run.env["SWITCH_NO_DESKTOP_NOTIFY"] = "1"
    with run.proxy_up():
        wired = run.switch("codex", "on")
        assert wired.returncode == 0, wired.stderr
        assert _provider(run)["supports_websockets"] is True
        result = run.program(str(codex_bin / "codex"), "--profile", "switch", *EXEC, "create hello.txt and read it")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Wrote and read hello.txt." in result.stdout
        assert "Reconnecting" not in result.stderr and "falling back" not in result.stderr.lower()
        assert (run.work / "hello.txt").read_text() == "hi over ws\n"
        assert run.switch("codex", "off").returncode == 0
    rows = check_ledger(run, "codex", "openai-responses")
    assert len(rows) == 3 and {row["transport"] for row in rows} == {"websocket"}
    assert len({row["session_id"] for row in rows}) == 1
    # Each turn after the first sent only its new items (chained by previous_response_id); the upstream still
    # got the whole conversation, translated to chat.
    last = run.upstream.received[-1].json
    assert [m["role"] for m in last["messages"]].count("tool") == 2
    log = (run.switch_home / "logs" / "proxy.log").read_text()
    assert '"WebSocket /v1/responses" [accepted]' in log
    assert "POST /v1/responses" not in log


def test_with_websockets_off_codex_falls_back_to_http_at_once(harness: Callable[..., Harness], codex_bin: Path) -> None:
    run = harness(_two_tools, [codex_bin])
    run.env["SWITCH_NO_DESKTOP_NOTIFY"] = "1"
    config = run.switch_home / "config.toml"
    config.write_text("[server]\nwebsockets = false\n" + config.read_text().replace("[server]\n", "", 1))
    with run.proxy_up():
        assert run.switch("codex", "on").returncode == 0
        assert "supports_websockets" not in _provider(run)
        # A user (or an older switch) who turned them on in Codex anyway: the 426 makes Codex use HTTP at once.
        forced = ["-c", "model_providers.switch.supports_websockets=true"]
        result = run.program(str(codex_bin / "codex"), "--profile", "switch", *forced, *EXEC, "create hello.txt")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Reconnecting" not in result.stderr
        assert run.switch("codex", "off").returncode == 0
    rows = run.ledger()
    refused = [row for row in rows if row["transport"] == "websocket"]
    assert refused and {(row["outcome"], row["http_status"]) for row in refused} == {("rejected", 426)}
    served = [row for row in rows if row["transport"] == "http"]
    assert len(served) == 3 and {row["outcome"] for row in served} == {"completed"}
