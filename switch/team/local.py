"""The shipper's local state under `$SWITCH_HOME/team/`: this home's origin id, the cursors, the last outcome.

`origin` is a uuid made once per home: with a row's local id it names the row in the whole team.
`cursor` is, per team server (user, host, port and database of `ledger_url`), the id of the last local
row that server has committed: a new or changed `ledger_url` starts at 0 and gets the whole history
(the shipper also takes the figure from the server itself when it connects, so a server emptied or
restored is caught up too). `refused` lists, per server, the rows it would not take, set aside with
the reason so the shipper goes on. `shipper.json` says how the last attempt went. `lag` reads them
with the local ledger and needs neither psycopg nor the server, so `switch status`, `doctor` and the
dashboard can show it cheaply.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from switch import locations
from switch.config_team import Team
from switch.files import atomic_write


def team_dir() -> Path:
    """Where the shipper keeps its state."""
    return locations.home() / "team"


def _origin_path() -> Path:
    return team_dir() / "origin"


def server_key(team: Team) -> str:
    """A short stable name for the team server `team` ships to (who, where and which database; no password)."""
    parts = urlsplit(team.ledger_url)
    port = parts.port or 5432
    where = f"{parts.username or ''}@{(parts.hostname or '').lower()}:{port}{parts.path or '/'}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


def _cursor_path(team: Team) -> Path:
    return team_dir() / "servers" / server_key(team) / "cursor"


def _refused_path(team: Team) -> Path:
    return team_dir() / "servers" / server_key(team) / "refused.jsonl"


def status_path() -> Path:
    """The shipper's last outcome (JSON)."""
    return team_dir() / "shipper.json"


def origin(renew: bool = False) -> str:
    """This home's install id (created on first use; `renew` makes a new one, for a replaced ledger)."""
    path = _origin_path()
    if not renew:
        try:
            value = path.read_text(encoding="utf-8").strip()
            if value:
                return value
        except FileNotFoundError:
            pass
    value = str(uuid.uuid4())
    locations.ensure_private_dir(team_dir())
    atomic_write(path, value.encode())
    return value


def cursor(team: Team) -> int:
    """The id of the last local row the team server of `team` has committed (0: none yet)."""
    try:
        return int(_cursor_path(team).read_text(encoding="utf-8").strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def advance(team: Team, last_id: int) -> None:
    """Remember that the server has every row up to `last_id` (atomically: a crash keeps the old cursor)."""
    path = _cursor_path(team)
    locations.ensure_private_dir(path.parent)
    atomic_write(path, str(last_id).encode())


def set_aside(team: Team, local_id: int, reason: str) -> None:
    """Record that the server of `team` refused local row `local_id` (kept locally; the shipper goes on)."""
    path = _refused_path(team)
    locations.ensure_private_dir(path.parent)
    line = json.dumps({"local_id": local_id, "reason": reason, "at": time.time()}).encode() + b"\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(descriptor, line)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def refused(team: Team) -> dict[int, str]:
    """The rows the server of `team` refused, by local id, with its reason (a damaged line is skipped)."""
    try:
        data = _refused_path(team).read_bytes()
    except OSError:
        return {}
    found: dict[int, str] = {}
    for line in data.splitlines():
        try:
            entry = json.loads(line)
            found[int(entry["local_id"])] = str(entry["reason"])
        except (ValueError, KeyError, TypeError):
            continue
    return found


def write_status(status: dict[str, Any]) -> None:
    """Record the shipper's last outcome for status, doctor and the dashboard."""
    locations.ensure_private_dir(team_dir())
    atomic_write(status_path(), json.dumps(status).encode())


def read_status() -> dict[str, Any]:
    """The shipper's last recorded outcome ({} when it never ran)."""
    try:
        return dict(json.loads(status_path().read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError, OSError):
        return {}


@dataclass(frozen=True)
class Lag:
    """How far the team server is behind this home's ledger."""

    rows: int
    """Local rows not shipped yet."""
    oldest_age_s: float | None
    """Age of the oldest of them (None: nothing waits)."""
    last_error: str | None
    last_ok_at: float | None
    refused: int = 0
    """Rows the server refused, set aside (kept in the local ledger, not shipped)."""
    refused_reason: str | None = None
    """The reason the server gave for the latest of them."""


def lag(connection: sqlite3.Connection | None, team: Team, now: float | None = None) -> Lag:
    """The shipping lag to `team`'s server, from the local ledger (read-only `connection`; None: no ledger yet)."""
    status = read_status()
    if status.get("server") not in (None, server_key(team)):
        status = {}  # the last outcome was another server's
    rows, oldest = 0, None
    if connection is not None:
        count, first = connection.execute(
            "SELECT COUNT(*), MIN(started_at) FROM calls WHERE id > ?", (cursor(team),)
        ).fetchone()
        rows = int(count)
        if first is not None:
            oldest = max(0.0, (now if now is not None else time.time()) - float(first))
    set_aside_rows = refused(team)
    reason = set_aside_rows[max(set_aside_rows)] if set_aside_rows else None
    return Lag(rows, oldest, status.get("last_error"), status.get("last_ok_at"), len(set_aside_rows), reason)


def ledger_lag(team: Team) -> Lag:
    """The lag of this home's ledger to `team`'s server, read without writing (no ledger yet: nothing to ship)."""
    from switch.ledger.db import open_read_only

    connection = open_read_only()
    try:
        return lag(connection, team)
    finally:
        if connection is not None:
            connection.close()


def describe(value: Lag) -> tuple[bool, str]:
    """(ok, one line) about the lag, for status, doctor and the dashboard."""
    if value.refused:
        line = (
            f"team ledger: the server refused {value.refused} call(s), kept in the local ledger and set aside "
            f"(latest reason: {value.refused_reason})"
        )
        if value.rows:
            line += f"; {value.rows} calls not shipped yet"
        return False, line
    if value.rows == 0:
        return True, "team ledger: every call shipped" + (
            f" (last error: {value.last_error})" if value.last_error else ""
        )
    age = _age(value.oldest_age_s or 0.0)
    line = f"team ledger: {value.rows} calls not shipped yet, the oldest {age} old"
    if value.last_error:
        return False, f"{line}; last error: {value.last_error}"
    # A few seconds behind is the shipper's normal rhythm, not a problem.
    return (value.oldest_age_s or 0.0) < 120, line


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
