"""The shipper's local state under `$SWITCH_HOME/team/`: this home's origin id, the cursor, the last outcome.

`origin` is a uuid made once per home: with a row's local id it names the row in the whole team.
`cursor` is the id of the last local row the server has committed. `shipper.json` says how the last
attempt went. `lag` reads them with the local ledger and needs neither psycopg nor the server, so
`switch status`, `doctor` and the dashboard can show it cheaply.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from switch import locations
from switch.files import atomic_write


def team_dir() -> Path:
    """Where the shipper keeps its state."""
    return locations.home() / "team"


def _origin_path() -> Path:
    return team_dir() / "origin"


def _cursor_path() -> Path:
    return team_dir() / "cursor"


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


def cursor() -> int:
    """The id of the last local row the team server has committed (0: none yet)."""
    try:
        return int(_cursor_path().read_text(encoding="utf-8").strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def advance(last_id: int) -> None:
    """Remember that the server has every row up to `last_id` (atomically: a crash keeps the old cursor)."""
    locations.ensure_private_dir(team_dir())
    atomic_write(_cursor_path(), str(last_id).encode())


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


def lag(connection: sqlite3.Connection | None, now: float | None = None) -> Lag:
    """The shipping lag, from the local ledger (read-only `connection`; None: no ledger yet) and the cursor."""
    status = read_status()
    rows, oldest = 0, None
    if connection is not None:
        count, first = connection.execute(
            "SELECT COUNT(*), MIN(started_at) FROM calls WHERE id > ?", (cursor(),)
        ).fetchone()
        rows = int(count)
        if first is not None:
            oldest = max(0.0, (now if now is not None else time.time()) - float(first))
    return Lag(rows, oldest, status.get("last_error"), status.get("last_ok_at"))


def ledger_lag() -> Lag:
    """The lag of this home's ledger, read from it without writing (no ledger yet: nothing to ship)."""
    from switch.ledger.db import open_read_only

    connection = open_read_only()
    try:
        return lag(connection)
    finally:
        if connection is not None:
            connection.close()


def describe(value: Lag) -> tuple[bool, str]:
    """(ok, one line) about the lag, for status, doctor and the dashboard."""
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
