"""The `plan_quota` table: each native plan's last snapshot, written by the writer, read by every view.

Kept light (no typing, no dataclasses): `switch statusline` imports it at every assistant message. A
snapshot whose window reset has passed is stale: what it says was true before the reset, not now.
"""

from __future__ import annotations

import json
import sqlite3
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from switch.protocols.ratelimits import Snapshot

UPSERT = (
    "INSERT INTO plan_quota (provider, account, source, status, windows, binding, retry_until, observed_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (provider, account) DO UPDATE SET source = excluded.source, "
    "status = excluded.status, windows = excluded.windows, binding = excluded.binding, "
    "retry_until = excluded.retry_until, observed_at = excluded.observed_at"
)
_SELECT = (
    "SELECT provider, account, source, status, windows, binding, retry_until, observed_at FROM plan_quota "
    "ORDER BY provider, observed_at DESC"
)
SHOWN_WINDOWS = ("5h", "7d")
"""The windows the status line names (the others are in `status --json` and the dashboard)."""


def snapshot_row(snapshot: Snapshot) -> tuple[Any, ...]:
    """The UPSERT parameters for one snapshot (only what the headers said: names, numbers, statuses)."""
    windows = [
        {"name": w.name, "utilization": w.utilization, "resets_at": w.resets_at, "status": w.status}
        for w in snapshot.windows
    ]
    return (
        snapshot.provider,
        snapshot.account,
        snapshot.source,
        snapshot.status,
        json.dumps(windows),
        snapshot.binding,
        snapshot.retry_until,
        snapshot.observed_at,
    )


def write_snapshots(connection: sqlite3.Connection, waiting: dict[tuple[str, str], Any]) -> None:
    """Upsert the waiting answers' snapshots (each read here, off the request path) in one transaction, then
    forget those not replaced meanwhile. A waiting item has `snapshot()` (the proxy's `PendingQuota`)."""
    taken = dict(waiting)
    snapshots = [snapshot for snapshot in (item.snapshot() for item in taken.values()) if snapshot is not None]
    with connection:
        connection.executemany(UPSERT, [snapshot_row(snapshot) for snapshot in snapshots])
    for key, snapshot in taken.items():
        if waiting.get(key) is snapshot:
            del waiting[key]


def plans(connection: sqlite3.Connection, now: float | None = None) -> list[dict[str, Any]]:
    """Every plan's last snapshot, newest first per provider, each window marked stale past its reset."""
    now = time.time() if now is None else now
    try:
        found = connection.execute(_SELECT).fetchall()
    except sqlite3.OperationalError:
        return []  # a ledger from before migration 10, opened read-only: no plan seen yet
    result = []
    for provider, account, source, status, windows_text, binding, retry_until, observed_at in found:
        try:
            windows = [w for w in json.loads(windows_text) if isinstance(w, dict)]
        except (ValueError, TypeError):
            windows = []
        for window in windows:
            resets_at = window.get("resets_at")
            window["stale"] = isinstance(resets_at, (int, float)) and resets_at <= now
        rejected = status == "rejected" and (retry_until is None or retry_until > now)
        result.append(
            {
                "provider": provider,
                "account": account,
                "source": source,
                "status": status if rejected or status != "rejected" else "rejected (reset passed)",
                "binding": binding,
                "retry_until": retry_until,
                "observed_at": observed_at,
                "stale": bool(windows) and all(w["stale"] for w in windows),
                "windows": windows,
            }
        )
    return result


def percent(utilization: Any) -> str:
    """A utilization fraction as a whole percentage."""
    return f"{round(float(utilization) * 100)}%" if isinstance(utilization, (int, float)) else "?"


def short_line(plan: dict[str, Any]) -> str:
    """`plan 5h 42% · 7d 18%` (a stale window says so instead of its figure)."""
    parts = []
    for window in plan["windows"]:
        if window.get("name") in SHOWN_WINDOWS:
            figure = "stale" if window.get("stale") else percent(window.get("utilization"))
            parts.append(f"{window['name']} {figure}")
    if not parts:
        return ""
    line = "plan " + " · ".join(parts)
    return line + " · rejected" if plan["status"] == "rejected" else line


def resets_in(resets_at: Any, now: float | None = None) -> str:
    """`resets in 2h 05m` for a reset time (Unix seconds); `reset passed` once it has."""
    if not isinstance(resets_at, (int, float)):
        return "reset unknown"
    seconds = int(resets_at - (time.time() if now is None else now))
    if seconds <= 0:
        return "reset passed (stale)"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"resets in {days}d {hours}h"
    return f"resets in {hours}h {minutes:02d}m" if hours else f"resets in {minutes}m"


def long_lines(plan: dict[str, Any], now: float | None = None) -> list[str]:
    """One line per window for `switch status` and `switch spend`."""
    head = f"plan {plan['provider']} ({plan['account']}): {plan['status'] or 'unknown'}"
    if plan.get("binding"):
        head += f", binding {plan['binding']}"
    lines = [head]
    for window in plan["windows"]:
        figure = "stale" if window.get("stale") else percent(window.get("utilization"))
        lines.append(f"  {window.get('name')}: {figure} used, {resets_in(window.get('resets_at'), now)}")
    return lines
