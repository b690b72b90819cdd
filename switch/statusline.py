"""One line about the current harness session: which models served it, what it really cost, what it would
have cost on the native provider, cache hit rate, and whether the last call fell back or failed.

Claude Code runs `switch statusline` after every assistant message (its status-line JSON on stdin);
Codex runs `switch codex-notify` after every turn (its notify JSON as the last argument). Both run
before typer is imported (see `switch.cli.main`), read the ledger read-only through the session index
and never talk to the proxy, so they answer in a few tens of milliseconds on a million-row ledger. They
never fail: an unknown session, a missing or unreadable ledger, or unreadable input give a short
neutral line and exit status 0, because a harness shows a blank or an error for anything else.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from switch import locations

TYPE_CHECKING = False  # `typing` costs milliseconds at start-up, which this command must not pay
if TYPE_CHECKING:
    from typing import Any, TextIO

PREFIX = "switch"
ROLE_LABELS = (("orchestrator", "orchestrator"), ("subagent", "subagents"), ("background", "background"))
NO_SESSION = f"{PREFIX} · waiting for a session id"
NO_LEDGER = f"{PREFIX} · no calls recorded yet"
NO_CALLS = f"{PREFIX} · no calls through switch in this session yet"
UNREADABLE = f"{PREFIX} · ledger unavailable"
# A reader in WAL mode is not blocked by the writer; this only bounds a rare checkpoint or schema change.
BUSY_TIMEOUT_SECONDS = 0.05
RECORDER_SETTLE_SECONDS = 0.5


def session_of(payload: Any, *keys: str) -> str | None:
    """The first non-empty string under `keys` in a harness's JSON object, else None."""
    if not isinstance(payload, dict):
        return None
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _money(micros: int | None) -> str:
    if micros is None:
        return "unpriced"
    dollars = micros / 1_000_000
    return f"${dollars:,.4f}" if abs(dollars) < 10 else f"${dollars:,.2f}"


def _short_model(model: str) -> str:
    return model.rsplit("/", 1)[-1]


def render(status: dict[str, Any]) -> str:
    """The one line for a session's figures from `queries.session_status`."""
    parts = [PREFIX]
    models: dict[str, str] = status.get("models") or {}
    for role, label in ROLE_LABELS:
        if role in models:
            parts.append(f"{label} {_short_model(models[role])}")
    spent = f"spent {_money(status['spend_micros'])}"
    if status["spend_micros"] is not None and status["unpriced"]:
        spent += f" (+{status['unpriced']} unpriced)"
    parts.append(spent)
    if status["native_micros"]:
        parts.append(f"native {_money(status['native_micros'])}")
        if status["savings_micros"] is not None:
            share = status.get("savings_pct")
            parts.append(f"saved {_money(status['savings_micros'])}" + (f" ({share:.0%})" if share is not None else ""))
    if status.get("cache_hit_rate") is not None:
        parts.append(f"cache {status['cache_hit_rate']:.0%}")
    last = status.get("last") or {}
    if last.get("outcome") not in (None, "completed", "client_cancelled"):
        parts.append(f"✗ last call failed ({last['outcome']} {last.get('http_status')})")
    elif last.get("fallback_attempt"):
        parts.append(f"↻ last call fell back to {_short_model(str(last.get('served_model')))}")
    return " · ".join(parts)


def fail_open_notice() -> str | None:
    """What to say first while this home's proxy fails open (its marker names a live pid), else None."""
    try:
        record = json.loads(locations.fail_open_marker().read_text(encoding="utf-8"))
        os.kill(int(record["pid"]), 0)
    except PermissionError:
        pass  # alive, under another user
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no marker (the usual case: one failed open()), or one left by a proxy that is gone
    notice = record.get("notice") if isinstance(record, dict) else None
    return notice if isinstance(notice, str) else f"{PREFIX}: config error, calls go to native"


def line_for(session_id: str | None, ledger: Path | None = None, plan_provider: str = "anthropic") -> str:
    """The status line for `session_id` (a neutral line when there is nothing to show), led by the fail-open
    notice while the proxy runs degraded, and ending with the native plan's windows when one was seen."""
    line = _session_line(session_id, ledger, plan_provider)
    notice = fail_open_notice()
    return line if notice is None else f"{notice} · {line}"


def _session_line(session_id: str | None, ledger: Path | None, plan_provider: str) -> str:
    if not session_id:
        return NO_SESSION
    path = ledger or locations.ledger_file()
    if not path.exists():
        return NO_LEDGER
    from switch.ledger.plan_quota import plans, short_line
    from switch.ledger.queries import session_status

    try:
        connection = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_SECONDS)
        try:
            status = session_status(connection, session_id)
            plan = next((p for p in plans(connection) if p["provider"] == plan_provider), None)
        finally:
            connection.close()
    except sqlite3.Error:
        return UNREADABLE
    line = NO_CALLS if status is None else render(status)
    quota = short_line(plan) if plan is not None else ""
    return f"{line} · {quota}" if quota else line


def claude_statusline(stdin: TextIO, stdout: TextIO) -> int:
    """Claude Code's status-line command: its JSON on stdin, one line on stdout, always status 0."""
    payload = None
    if not stdin.isatty():  # run by hand in a terminal: nothing will arrive, do not wait for it
        try:
            payload = json.loads(stdin.read() or "null")
        except (ValueError, UnicodeDecodeError):
            payload = None
    stdout.write(line_for(session_of(payload, "session_id")) + "\n")
    return 0


def codex_notify(args: Sequence[str]) -> int:
    """Codex's `notify` program: the turn's JSON is the last argument; anything before it is the user's own
    notify program, run with the same argument. Codex discards this program's output, so the line goes
    to `$SWITCH_HOME/logs/turns.log` and, where a desktop notifier exists, to a desktop notification."""
    if not args:
        return 0
    *chained, raw = args
    if chained:
        _spawn([*chained, raw])
    try:
        payload = json.loads(raw)
    except ValueError:
        return 0
    if not isinstance(payload, dict) or payload.get("type") != "agent-turn-complete":
        return 0
    session = session_of(payload, "thread-id", "thread_id")
    # Codex runs this the moment the turn ends, when the recorder may still hold the turn's last call
    # (it commits in batches every 0.2 s). Nobody waits for this program, so it can afford to let it land.
    time.sleep(RECORDER_SETTLE_SECONDS)
    line = line_for(session, plan_provider="openai")
    try:
        log = locations.ensure_private_dir(locations.logs_dir()) / "turns.log"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} codex {session or '-'} {line}\n")
    except OSError:
        pass
    _desktop_notification("switch · codex turn", line)
    return 0


def _spawn(command: list[str]) -> None:
    import subprocess

    try:
        subprocess.Popen(  # noqa: S603 - the user's own notify program, from their own config
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    except OSError:
        pass


def _desktop_notification(title: str, body: str) -> None:
    import shutil

    if os.environ.get("SWITCH_NO_DESKTOP_NOTIFY"):
        return
    if sys.platform == "darwin" and shutil.which("osascript"):
        script = f"display notification {json.dumps(body)} with title {json.dumps(title)}"
        _spawn(["osascript", "-e", script])
    elif shutil.which("notify-send"):
        _spawn(["notify-send", "--app-name=switch", title, body])


def main(argv: Sequence[str]) -> int:
    """`switch statusline [--session ID]` and `switch codex-notify [PROGRAM ...] JSON`, without typer."""
    import io

    if isinstance(sys.stdout, io.TextIOWrapper):  # harnesses read UTF-8 whatever the locale says
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    command, *rest = argv
    if command == "codex-notify":
        return codex_notify(rest)
    if rest[:1] == ["--session"] and len(rest) == 2:
        sys.stdout.write(line_for(rest[1]) + "\n")
        return 0
    if rest and rest[0] in ("-h", "--help"):
        sys.stdout.write(
            "Usage: switch statusline [--session ID]\n\n"
            "One line about a harness session: served models per role, real spend, native estimate and\n"
            "saving, cache hit rate, and a mark when the last call fell back or failed. Reads Claude Code's\n"
            "status-line JSON on stdin unless --session is given.\n"
        )
        return 0
    return claude_statusline(sys.stdin, sys.stdout)
