"""`switch statusline` and `switch codex-notify`: the session's line from a real ledger, for the real inputs
Claude Code and Codex send, and the same per-session figures as `spend --by session` and the Sessions tab."""

from __future__ import annotations

import io
import json
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from switch import statusline, wiring
from switch.cli import app
from switch.config import Settings
from switch.ledger import queries
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from tests.ledger_seed import kimi_call, pricer_for, seed_ledger

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "statusline"
CLAUDE_INPUT = (CAPTURED / "claude_code_after_turn.json").read_text()
CLAUDE_SESSION = json.loads(CLAUDE_INPUT)["session_id"]
CODEX_PAYLOAD = json.loads((CAPTURED / "codex_notify.json").read_text())
CODEX_SESSION = CODEX_PAYLOAD["thread-id"]
NOW = 1_795_000_000.0


def call(session: str, offset: float, **fields: Any) -> CallRecord:
    """A completed, priced Kimi K3 orchestrator call in `session`, `offset` seconds after NOW."""
    values: dict[str, Any] = {
        "role": "orchestrator",
        "session_id": session,
        "input_tokens": 2_000,
        "output_tokens": 400,
        "cache_read_tokens": 18_000,
        "usage_reported": True,
        "duration_ms": 2_000.0,
    }
    return kimi_call(NOW + offset, **{**values, **fields})


GLM = {"served_model": "zai-org/GLM-5.2"}
CALLS = [
    # The session of the captured Claude Code input: Kimi K3 orchestrates, GLM 5.2 serves the subagents.
    call(CLAUDE_SESSION, 0),
    call(CLAUDE_SESSION, 10, role="subagent", **GLM),
    call(CLAUDE_SESSION, 20, role="subagent", **GLM, cache_read_tokens=0),
    call(CLAUDE_SESSION, 30, role="background", **GLM, input_tokens=300, cache_read_tokens=0),
    call(CLAUDE_SESSION, 40),
    # The last call failed on Kimi, then native Claude answered it.
    call("fell-back", 0),
    call("fell-back", 5, outcome="upstream_error", http_status=503, error="upstream baseten returned 503"),
    call(
        "fell-back",
        5.5,
        provider="anthropic",
        served_model="claude-opus-5-5",
        upstream_api="anthropic",
        fallback_attempt=1,
        fallback_trigger="5xx",
    ),
    # The last call failed and nothing answered it.
    call("failed", 0),
    call("failed", 5, outcome="transport_error", http_status=502, error="connection reset"),
    # Served only by a model switch has no price for: unknown spend, never $0.
    call("unpriced", 0, provider="acme", served_model="acme/mystery-1"),
    call("unpriced", 3, provider="acme", served_model="acme/mystery-1", role="subagent"),
    # Some calls priced, one not.
    call("partly-priced", 0),
    call("partly-priced", 3, provider="acme", served_model="acme/mystery-1", role="subagent"),
    # A Codex session (the captured notify payload's thread).
    call(CODEX_SESSION, 0, harness="codex", inbound_api="openai-responses"),
]


@pytest.fixture
def ledger(isolated_home: Path) -> Path:
    """A real ledger written by the real recorder (prices, rollups and all)."""
    path = isolated_home / "ledger.db"
    recorder = Recorder(pricer_for(Settings()), database=path, spill=isolated_home / "ledger.spill.jsonl")
    recorder.start()
    for record in CALLS:
        recorder.submit(record)
    recorder.close(timeout=60)
    assert recorder.written == len(CALLS)
    return path


def truth(path: Path, session: str) -> dict[str, Any]:
    """The session's figures computed straight from its rows, independently of switch's queries."""
    connection = sqlite3.connect(path)
    rows = connection.execute(
        "SELECT cost_micros, native_cost_micros, input_tokens, cache_read_tokens, cache_write_tokens"
        " FROM calls WHERE session_id = ?",
        (session,),
    ).fetchall()
    connection.close()
    priced = [cost for cost, *_ in rows if cost is not None]
    both = [(cost, native) for cost, native, *_ in rows if cost is not None and native is not None]
    total_input = sum(r[2] + r[3] + r[4] for r in rows)
    return {
        "calls": len(rows),
        "unpriced": len(rows) - len(priced),
        "spend_micros": sum(priced) if priced else None,
        "native_micros": sum(native or 0 for _, native, *_ in rows),
        "savings_micros": sum(native - cost for cost, native in both) if priced else None,
        "cache_hit_rate": sum(r[3] for r in rows) / total_input if total_input else None,
    }


def run_hook(command: str, stdin: str = "", *args: str) -> subprocess.CompletedProcess[str]:
    """The hook exactly as `claude on` / `codex on` install it (a real process)."""
    return subprocess.run(
        [*wiring.hook_argv(command), *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def money(micros: int | None) -> str:
    return queries.micros_to_usd(micros)


def test_captured_claude_code_input_shows_models_real_spend_native_and_savings(ledger: Path) -> None:
    result = run_hook("statusline", CLAUDE_INPUT)
    assert result.returncode == 0 and result.stderr == ""
    line = result.stdout
    assert line.endswith("\n") and line.count("\n") == 1
    figures = truth(ledger, CLAUDE_SESSION)
    assert figures["spend_micros"] and figures["native_micros"] > figures["spend_micros"]
    assert "orchestrator Kimi-K3 · subagents GLM-5.2 · background GLM-5.2" in line
    assert f"spent {money(figures['spend_micros'])} ·" in line
    assert f"native {money(figures['native_micros'])}" in line
    share = figures["savings_micros"] / figures["native_micros"]
    assert f"saved {money(figures['savings_micros'])} ({share:.0%})" in line
    assert f"cache {figures['cache_hit_rate']:.0%}" in line
    assert "fell back" not in line and "failed" not in line


def test_last_call_that_fell_back_is_marked_with_the_model_that_answered(ledger: Path) -> None:
    line = run_hook("statusline", json.dumps({"session_id": "fell-back"})).stdout
    assert "↻ last call fell back to claude-opus-5-5" in line
    assert "orchestrator claude-opus-5-5" in line  # what last served the role, not what failed


def test_last_call_that_failed_is_marked(ledger: Path) -> None:
    line = run_hook("statusline", json.dumps({"session_id": "failed"})).stdout
    assert "✗ last call failed (transport_error 502)" in line
    assert "orchestrator Kimi-K3" in line


def test_unpriced_session_says_unpriced_never_zero(ledger: Path) -> None:
    line = run_hook("statusline", json.dumps({"session_id": "unpriced"})).stdout
    assert "spent unpriced" in line and "$0.0000" not in line and "saved" not in line
    partly = run_hook("statusline", json.dumps({"session_id": "partly-priced"})).stdout
    assert f"spent {money(truth(ledger, 'partly-priced')['spend_micros'])} (+1 unpriced)" in partly


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (json.dumps({"session_id": "never-seen"}), statusline.NO_CALLS),
        ("", statusline.NO_SESSION),
        ("{not json", statusline.NO_SESSION),
        ("[1, 2]", statusline.NO_SESSION),
        (json.dumps({"session_id": 42}), statusline.NO_SESSION),
        ("\udcff".encode("utf-8", "surrogateescape").decode("latin-1"), statusline.NO_SESSION),
    ],
)
def test_unknown_session_or_bad_input_gives_a_neutral_line(ledger: Path, stdin: str, expected: str) -> None:
    result = run_hook("statusline", stdin)
    assert (result.returncode, result.stdout, result.stderr) == (0, expected + "\n", "")


def test_no_ledger_and_unreadable_ledger_give_a_neutral_line(isolated_home: Path) -> None:
    result = run_hook("statusline", CLAUDE_INPUT)
    assert (result.returncode, result.stdout) == (0, statusline.NO_LEDGER + "\n")
    (isolated_home / "ledger.db").write_bytes(b"this is not a database" * 100)
    result = run_hook("statusline", CLAUDE_INPUT)
    assert (result.returncode, result.stdout, result.stderr) == (0, statusline.UNREADABLE + "\n", "")


def test_statusline_never_loads_the_heavy_modules(ledger: Path) -> None:
    """It runs after every message: no typer, textual, pydantic, httpx or sqlmodel on its start-up path."""
    probe = (
        "import sys, io; sys.stdin = io.StringIO(sys.argv[1]); sys.argv = ['switch', 'statusline']\n"
        "from switch.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('typer', 'textual', 'pydantic', 'httpx', 'sqlmodel', 'litellm', 'typing', 'switch.config')\n"
        "print(sorted(name for name in heavy if name in sys.modules), file=sys.stderr)\n"
    )
    command = wiring.hook_argv("statusline")
    code = command[-2].replace("from switch.cli import main; main()", probe)
    result = subprocess.run([*command[:-2], code, CLAUDE_INPUT], capture_output=True, text=True, timeout=60)
    assert "orchestrator Kimi-K3" in result.stdout
    assert result.stderr.strip() == "[]"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payload=st.one_of(
        st.text(),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(),
            lambda inner: st.lists(inner) | st.dictionaries(st.sampled_from(["session_id", "cost", "x"]), inner),
        ).map(json.dumps),
        st.text().map(lambda session: json.dumps({"session_id": session})),
    )
)
def test_any_input_gives_exactly_one_line_and_status_zero(ledger: Path, payload: str) -> None:
    out = io.StringIO()
    assert statusline.claude_statusline(io.StringIO(payload), out) == 0
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1 and text.startswith("switch · ")


def figures_of(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("calls", "unpriced", "spend_micros", "native_micros", "savings_micros", "cache_hit_rate")
    return {key: row[key] for key in keys}


def assert_views_agree(path: Path) -> int:
    """The status line, `switch spend --by session --json` and the Sessions tab show the same figures."""
    result = CliRunner().invoke(app, ["spend", "--by", "session", "--json"])
    assert result.exit_code == 0, result.output
    by_spend = {row["grp"]: figures_of(row) for row in json.loads(result.output)["groups"]}
    connection = queries.connect(path)
    assert connection is not None
    by_tab = {row["session_id"]: figures_of(row) for row in queries.sessions(connection, limit=100_000)}
    assert set(by_tab) == set(by_spend) - {"(none)"}
    for session, figures in by_tab.items():
        status = queries.session_status(connection, session)
        assert status is not None
        assert figures_of(status) == figures == by_spend[session], session
    connection.close()
    return len(by_tab)


def test_statusline_spend_by_session_and_sessions_tab_agree(ledger: Path) -> None:
    assert assert_views_agree(ledger) == len({record.session_id for record in CALLS})
    connection = queries.connect(ledger)
    assert connection is not None
    for session in ("partly-priced", CLAUDE_SESSION, "unpriced"):
        assert figures_of(queries.sessions(connection, session_id=session)[0]) == truth(ledger, session) | {
            "calls": truth(ledger, session)["calls"]
        }
    connection.close()


def test_views_agree_on_a_seeded_ledger(isolated_home: Path) -> None:
    path = isolated_home / "ledger.db"
    seed_ledger(path, 2_000)
    assert assert_views_agree(path) == 50


def test_codex_notify_logs_the_session_line_and_runs_the_users_own_program(ledger: Path, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.py"
    received = tmp_path / "received.json"
    theirs.write_text(f"import sys, pathlib\npathlib.Path({str(received)!r}).write_text(sys.argv[-1])\n")
    payload = json.dumps(CODEX_PAYLOAD)
    result = subprocess.run(
        [*wiring.codex_notify_argv([sys.executable, str(theirs)]), payload],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "SWITCH_NO_DESKTOP_NOTIFY": "1"},
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    log = (Path(statusline.locations.logs_dir()) / "turns.log").read_text()
    assert f" codex {CODEX_SESSION} switch · orchestrator Kimi-K3 · spent " in log
    deadline = time.monotonic() + 30
    while not received.exists() or not received.read_text():
        assert time.monotonic() < deadline, "the user's own notify program was not run"
        time.sleep(0.05)
    assert json.loads(received.read_text()) == CODEX_PAYLOAD


@pytest.mark.parametrize("payload", ["not json", "[]", json.dumps({"type": "approval-requested"}), ""])
def test_codex_notify_ignores_other_payloads(ledger: Path, payload: str) -> None:
    result = run_hook("codex-notify", "", payload)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert not (Path(statusline.locations.logs_dir()) / "turns.log").exists()


def test_statusline_for_a_named_session_through_typer(ledger: Path) -> None:
    result = CliRunner().invoke(app, ["statusline", "--session", "failed"])
    assert result.exit_code == 0 and "✗ last call failed" in result.output
    assert shlex.split(wiring.claude_statusline()["command"])[-1] == "statusline"
