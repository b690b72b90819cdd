"""The real Codex CLI (pinned) the way the README tells users to run it: `switch codex on`, then
`codex --profile switch`; its compaction turns; its built-in `openai` provider pointed at switch; and its own
credentials on the native route."""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from switch.protocols.openai_responses.compaction import RESTORED_PREFIX, SUMMARY_INSTRUCTION
from tests.e2e.conftest import ORCHESTRATOR_MODEL, Harness, check_ledger, last_user_text, tool_results
from tests.fake_upstream import FakeUpstream, ToolCall, Turn
from tests.servers import serve

EXEC = ["exec", "--skip-git-repo-check", "-s", "danger-full-access"]
ORIGINAL = (
    '# my own Codex settings\nmodel_reasoning_effort = "low"\n'
    'notify = ["sh", "-c", "echo \\"$1\\" >> ../mine.log", "mine"]\n'
)
# What an earlier switch wrote: a profile table in config.toml (Codex 0.171 refuses `--profile switch` with it).
LEGACY = (
    ORIGINAL
    + '\n[model_providers.switch]\nname = "switch"\nbase_url = "http://127.0.0.1:1/v1"\nwire_api = "responses"\n'
    + 'requires_openai_auth = false\n\n[profiles.switch]\nmodel_provider = "switch"\nmodel = "gpt-5.5"\n'
)
LOGIN_KEY = "sk-e2e-codex-login-key"


def _port(run: Harness) -> int:
    return int(tomllib.loads((run.switch_home / "config.toml").read_text())["server"]["port"])


def _write_file(request: dict[str, Any]) -> Turn:
    if tool_results(request):
        return Turn(text="Wrote hello.txt.")
    command = {"cmd": "printf 'hi from codex\\n' > hello.txt"}
    return Turn(reasoning="Write the file with the shell.", tool_calls=[ToolCall("exec_command", json.dumps(command))])


def _wait_for(path: Path, text: str) -> None:
    deadline = time.monotonic() + 60  # Codex starts notify as the turn ends and does not wait for it
    while not path.exists() or text not in path.read_text():
        assert time.monotonic() < deadline, f"{text!r} never reached {path}"
        time.sleep(0.1)


@pytest.mark.parametrize("original", [ORIGINAL, LEGACY], ids=["own-config", "legacy-profile-table"])
def test_codex_on_then_codex_profile_switch_runs_a_tool_loop(
    harness: Callable[..., Harness], codex_bin: Path, original: str
) -> None:
    run = harness(_write_file, [codex_bin])
    config = Path(run.env["CODEX_HOME"]) / "config.toml"
    config.write_text(original)
    run.env["SWITCH_NO_DESKTOP_NOTIFY"] = "1"
    with run.proxy_up():
        wired = run.switch("codex", "on")
        assert wired.returncode == 0, wired.stderr
        assert ("Moved [profiles.switch]" in wired.stdout) == (original == LEGACY)
        result = run.program(str(codex_bin / "codex"), "--profile", "switch", *EXEC, "create hello.txt")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "provider: switch" in result.stderr and "model: gpt-5.5" in result.stderr
        assert "Wrote hello.txt." in result.stdout
        assert (run.work / "hello.txt").read_text() == "hi from codex\n"
        # The profile's notify: switch's summary, then the user's own program, which stayed in config.toml.
        _wait_for(run.switch_home / "logs" / "turns.log", " codex ")
        _wait_for(run.root / "mine.log", "agent-turn-complete")
        unwired = run.switch("codex", "off")
        assert unwired.returncode == 0, unwired.stderr
    rows = check_ledger(run, "codex", "openai-responses")  # `switch down` has written every row
    assert {row["served_model"] for row in rows} == {ORCHESTRATOR_MODEL}
    assert f" codex {rows[0]['session_id']} " in (run.switch_home / "logs" / "turns.log").read_text()
    assert config.read_text() == original
    assert not (config.parent / "switch.config.toml").exists()


def test_compaction_turns_are_recorded_with_their_kind(harness: Callable[..., Harness], codex_bin: Path) -> None:
    work: list[Path] = []

    def respond(request: dict[str, Any]) -> Turn:
        if "CONTEXT CHECKPOINT COMPACTION" in last_user_text(request):
            return Turn(text="SUMMARY: the user wants three files; some are written.")
        # Compaction replaces the history, so progress is read from the workspace, not from tool results.
        done = len(list(work[0].glob("f*.txt")))
        if done < 3:
            command = {"cmd": f"printf x > f{done}.txt"}
            return Turn(reasoning="Next file.", tool_calls=[ToolCall("exec_command", json.dumps(command))])
        return Turn(text="All three files written.")

    run = harness(respond, [codex_bin])
    work.append(run.work)
    result = run.run("codex", *EXEC, "-c", "model_auto_compact_token_limit=100", "write f0.txt, f1.txt and f2.txt")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = check_ledger(run, "codex", "openai-responses")
    kinds = [row["request_kind"] for row in rows]
    assert "compaction" in kinds and None in kinds, kinds
    # A compaction of the main thread is counted as the orchestrator's and served by its target.
    compactions = [row for row in rows if row["request_kind"] == "compaction"]
    assert {(row["role"], row["served_model"]) for row in compactions} == {("orchestrator", ORCHESTRATOR_MODEL)}


def test_remote_compaction_through_the_builtin_openai_provider(
    harness: Callable[..., Harness], codex_bin: Path
) -> None:
    summary = "SUMMARY: hello.txt must hold 'hi from codex'."
    work: list[Path] = []

    def respond(request: dict[str, Any]) -> Turn:
        if last_user_text(request) == SUMMARY_INSTRUCTION:
            return Turn(text=summary, reasoning="Summarise the work.")
        # Compaction replaces the history, so progress is read from the workspace, not from tool results.
        if (work[0] / "hello.txt").exists():
            return Turn(text="Wrote hello.txt.")
        return _write_file(request)

    run = harness(respond, [codex_bin])
    work.append(run.work)
    login = run.program(str(codex_bin / "codex"), "login", "--with-api-key", stdin=LOGIN_KEY + "\n", timeout=60)
    assert login.returncode == 0, login.stderr
    with run.proxy_up():
        result = run.program(
            str(codex_bin / "codex"),
            *EXEC,
            "-m",
            "gpt-5.5",
            "-c",
            f'openai_base_url="http://127.0.0.1:{_port(run)}/v1"',
            "-c",
            "model_auto_compact_token_limit=100",
            "create hello.txt",
            timeout=300,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "remote compaction" not in result.stderr, result.stderr[-3000:]  # its v2 check passed
    assert (run.work / "hello.txt").read_text() == "hi from codex\n"
    sent = [received.json for received in run.upstream.received]
    asked = [i for i, body in enumerate(sent) if last_user_text(body) == SUMMARY_INSTRUCTION]
    assert asked, "no summary turn reached the upstream"
    # After the compaction, the history Codex sends back carries switch's item, restored as the summary.
    later = [
        body
        for body in sent[asked[0] + 1 :]
        if {"role": "user", "content": RESTORED_PREFIX + summary} in body["messages"]
    ]
    assert later, [[m.get("content") for m in body["messages"][-3:]] for body in sent]
    rows = run.ledger()
    assert "compaction" in {row["request_kind"] for row in rows}
    assert {row["outcome"] for row in rows} == {"completed"}
    # Codex's bearer token never left for the translated route's provider.
    assert all(
        LOGIN_KEY not in json.dumps(r.headers) and LOGIN_KEY.encode() not in r.body for r in run.upstream.received
    )


NATIVE_PRESET = f"""
description = "e2e: Codex's orchestrator native, its subagents on Kimi"
[codex]
orchestrator = "native"
subagent = "baseten/{ORCHESTRATOR_MODEL}"
background = "baseten/{ORCHESTRATOR_MODEL}"
"""


def test_the_native_route_gets_codexs_bearer_token_and_no_other_upstream_does(
    harness: Callable[..., Harness], codex_bin: Path
) -> None:
    run = harness(lambda request: Turn(text="never asked"), [codex_bin])
    openai_standin = FakeUpstream()
    openai_standin.script(Turn(text="Hello from the native route."))
    with serve(openai_standin) as native_url:
        (run.switch_home / "presets" / "e2e.toml").write_text(NATIVE_PRESET)
        with (run.switch_home / "config.toml").open("a") as config:
            config.write(f'[providers.openai]\nbase_url = "{native_url}/v1"\n')
        login = run.program(str(codex_bin / "codex"), "login", "--with-api-key", stdin=LOGIN_KEY + "\n", timeout=60)
        assert login.returncode == 0, login.stderr
        with run.proxy_up():
            assert run.switch("codex", "on").returncode == 0
            result = run.program(str(codex_bin / "codex"), "--profile", "switch", *EXEC, "say hi")
            run.switch("codex", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Hello from the native route." in result.stdout
    assert [r.headers.get("authorization") for r in openai_standin.received] == [f"Bearer {LOGIN_KEY}"]
    assert not run.upstream.received
    rows = run.ledger()
    assert [(row["provider"], row["outcome"]) for row in rows] == [("openai", "completed")]
