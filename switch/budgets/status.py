"""Budget spend read from the ledger: what a starting proxy begins from, and what the CLI, doctor and dashboard show."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from switch.budgets.periods import period_bounds
from switch.config_budgets import SEVERITY, Budget


def scope_filter(budget: Budget) -> tuple[str, list[Any]]:
    """The SQL condition (on the rollup table) and its parameters for a non-session scope."""
    kind, _sep, subject = budget.scope.partition(":")
    if kind == "harness":
        return " AND harness = ?", [subject]
    if kind == "role":
        return " AND role = ?", [subject]
    if kind == "model":
        provider, _slash, model = subject.partition("/")
        return " AND provider = ? AND served_model = ?", [provider, model]
    return "", []


def period_spend(
    connection: sqlite3.Connection, budget: Budget, start: float, end: float
) -> tuple[int, dict[str, int]]:
    """Micro-USD spent in [start, end) on the budget's scope: (the scope's total, per session for `session`)."""
    # Periods start on local midnights, which are quarter-hour bucket edges in every zone (see
    # ledger.migrations.BUCKET_SECONDS): the rollups give the exact sum without reading the calls.
    if budget.scope == "session":
        rows = connection.execute(
            "SELECT session_id, SUM(spend_micros) FROM rollup_session WHERE bucket >= ? AND bucket < ? "
            "AND session_id != '' GROUP BY session_id",
            (start, end),
        ).fetchall()
        sessions = {str(row[0]): int(row[1] or 0) for row in rows}
        return max(sessions.values(), default=0), sessions
    condition, parameters = scope_filter(budget)
    row = connection.execute(
        f"SELECT COALESCE(SUM(spend_micros), 0) FROM rollup WHERE bucket >= ? AND bucket < ?{condition}",
        (start, end, *parameters),
    ).fetchone()
    return int(row[0] or 0), {}


def reached(budget: Budget, used_micros: int) -> tuple[str | None, float | None]:
    """The strongest action whose threshold `used_micros` reached (None: none), and the next threshold."""
    action: str | None = None
    upcoming: float | None = None
    limit = budget.limit_micros
    for step in budget.actions:
        if used_micros >= step.at * limit:
            if action is None or SEVERITY[step.do] >= SEVERITY[action]:
                action = step.do
        elif upcoming is None or step.at < upcoming:
            upcoming = step.at
    return action, upcoming


def describe(budget: Budget, used_micros: int, start: float, end: float, session: str | None = None) -> dict[str, Any]:
    """One budget's state as the CLI, /healthz and the dashboard show it."""
    action, upcoming = reached(budget, used_micros)
    return {
        "name": budget.label,
        "scope": budget.scope,
        "period": budget.period,
        "period_start": start,
        "period_end": end,
        "limit_micros": budget.limit_micros,
        "spent_micros": used_micros,
        "used": used_micros / budget.limit_micros,
        "session": session,
        "action": action,
        "next_at": upcoming,
    }


def budget_report(
    budgets: list[Budget], connection: sqlite3.Connection | None, now: float | None = None
) -> list[dict[str, Any]]:
    """Every budget's spend this period, from the ledger (None: no ledger yet, nothing spent)."""
    now = time.time() if now is None else now
    report = []
    for budget in budgets:
        if budget.is_plan:
            continue  # no dollars spent against it: its window is in the plan's quota (`switch status`)
        start, end = period_bounds(budget.period, now)
        spent, sessions = period_spend(connection, budget, start, end) if connection is not None else (0, {})
        top = max(sessions, key=lambda name: sessions[name]) if sessions else None
        report.append(describe(budget, spent, start, end, top))
    return report


def notices(report: list[dict[str, Any]]) -> list[str]:
    """One line per budget past one of its thresholds, for `switch status`, doctor and the dashboard."""
    lines = []
    for entry in report:
        if entry["action"] is None:
            continue
        where = f" (session {entry['session']})" if entry["session"] else ""
        spent, limit = entry["spent_micros"] / 1e6, entry["limit_micros"] / 1e6
        lines.append(
            f"budget '{entry['name']}'{where}: ${spent:.2f} of ${limit:.2f} this {entry['period']} "
            f"({entry['used']:.0%}); action: {entry['action']}"
        )
    return lines
