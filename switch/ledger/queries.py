"""Everything the CLI and the dashboard read from the ledger (read-only SQL, no writes)."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

GROUPS: dict[str, str] = {
    "day": "strftime('%Y-%m-%d', started_at, 'unixepoch', 'localtime')",
    "model": "served_model",
    "role": "role",
    "harness": "harness",
    "session": "COALESCE(session_id, '(none)')",
    "preset": "preset",
    "provider": "provider",
    "requested": "requested_model || ' → ' || served_model",
}
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str | None, now: float | None = None) -> float | None:
    """`1h`, `7d`, `today`, `yesterday`, an ISO date or date-time → Unix time (None stays None)."""
    if text is None or text == "":
        return None
    now = time.time() if now is None else now
    match = _RELATIVE.match(text.strip())
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    lowered = text.strip().lower()
    if lowered in ("today", "yesterday"):
        midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        if lowered == "yesterday":
            midnight -= timedelta(days=1)
        return midnight.timestamp()
    if lowered == "all":
        return None
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError as exc:
        raise ValueError(f"cannot read time '{text}': use 30m, 24h, 7d, today, or an ISO date") from exc


def _where(since: float | None, until: float | None, extra: dict[str, str] | None = None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if since is not None:
        clauses.append("started_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("started_at < ?")
        params.append(until)
    for column, value in (extra or {}).items():
        if column == "text":
            clauses.append("(requested_model LIKE ? OR served_model LIKE ? OR COALESCE(error,'') LIKE ?)")
            params.extend([f"%{value}%"] * 3)
        else:
            clauses.append(f"{column} = ?")
            params.append(value)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _medians(
    connection: sqlite3.Connection, group_sql: str, column: str, where: str, params: list[Any]
) -> dict[Any, float]:
    # Window functions give each group's middle value without pulling every row into Python.
    condition = f"{where} AND {column} IS NOT NULL" if where else f"WHERE {column} IS NOT NULL"
    sql = f"""
        SELECT grp, AVG(value) FROM (
            SELECT {group_sql} AS grp, {column} AS value,
                   ROW_NUMBER() OVER (PARTITION BY {group_sql} ORDER BY {column}) AS position,
                   COUNT(*) OVER (PARTITION BY {group_sql}) AS total
            FROM calls {condition}
        ) WHERE position IN ((total + 1) / 2, (total + 2) / 2) GROUP BY grp
    """
    return {row[0]: row[1] for row in connection.execute(sql, params)}


def spend(
    connection: sqlite3.Connection,
    by: str | None = None,
    since: float | None = None,
    until: float | None = None,
    filters: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Spend, native estimate, savings, calls, errors, cache use and medians, per group (or in total)."""
    group_sql = GROUPS[by] if by else "'all'"
    where, params = _where(since, until, filters)
    sql = f"""
        SELECT {group_sql} AS grp,
               COUNT(*) AS calls,
               SUM(outcome != 'completed') AS errors,
               SUM(fallback_attempt > 0) AS fallbacks,
               SUM(cost_micros) AS spend_micros,
               SUM(cost_micros IS NULL) AS unpriced,
               SUM(native_cost_micros) AS native_micros,
               SUM(CASE WHEN cost_micros IS NOT NULL AND native_cost_micros IS NOT NULL
                        THEN native_cost_micros - cost_micros END) AS savings_micros,
               SUM(input_tokens) AS input_tokens,
               SUM(cache_read_tokens) AS cache_read_tokens,
               SUM(cache_write_tokens) AS cache_write_tokens,
               SUM(output_tokens) AS output_tokens,
               SUM(cache_savings_micros) AS cache_savings_micros,
               MIN(started_at) AS first_at,
               MAX(started_at) AS last_at
        FROM calls {where} GROUP BY grp ORDER BY spend_micros DESC, calls DESC
    """
    rows = [dict(zip(_SPEND_KEYS, row, strict=True)) for row in connection.execute(sql, params)]
    ttft = _medians(connection, group_sql, "ttft_ms", where, params)
    tps = _medians(connection, group_sql, "output_tps", where, params)
    for row in rows:
        group = row["grp"]
        total_input = (row["input_tokens"] or 0) + (row["cache_read_tokens"] or 0) + (row["cache_write_tokens"] or 0)
        row["cache_hit_rate"] = (row["cache_read_tokens"] or 0) / total_input if total_input else None
        row["median_ttft_ms"] = ttft.get(group)
        row["median_output_tps"] = tps.get(group)
        row["savings_pct"] = (
            row["savings_micros"] / row["native_micros"]
            if row["native_micros"] and row["savings_micros"] is not None
            else None
        )
    return rows


_SPEND_KEYS = (
    "grp",
    "calls",
    "errors",
    "fallbacks",
    "spend_micros",
    "unpriced",
    "native_micros",
    "savings_micros",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cache_savings_micros",
    "first_at",
    "last_at",
)


def calls(
    connection: sqlite3.Connection,
    limit: int = 50,
    before_id: int | None = None,
    after_id: int | None = None,
    since: float | None = None,
    until: float | None = None,
    filters: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Calls newest first (keyset-paged by id, so deep pages stay fast on large ledgers)."""
    where, params = _where(since, until, filters)
    if before_id is not None:
        where += (" AND " if where else "WHERE ") + "id < ?"
        params.append(before_id)
    if after_id is not None:
        where += (" AND " if where else "WHERE ") + "id > ?"
        params.append(after_id)
    cursor = connection.execute(f"SELECT * FROM calls {where} ORDER BY id DESC LIMIT ?", [*params, limit])
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def call(connection: sqlite3.Connection, call_id: int) -> dict[str, Any] | None:
    """One call with every recorded field."""
    cursor = connection.execute("SELECT * FROM calls WHERE id = ?", (call_id,))
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([column[0] for column in cursor.description], row, strict=True))


def iterate(
    connection: sqlite3.Connection, since: float | None = None, until: float | None = None
) -> Iterator[dict[str, Any]]:
    """Every call in time order, streamed (for exports)."""
    where, params = _where(since, until)
    cursor = connection.execute(f"SELECT * FROM calls {where} ORDER BY id", params)
    names = [column[0] for column in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


def sessions(
    connection: sqlite3.Connection, since: float | None = None, until: float | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    """One row per harness session: span, calls, orchestrator vs subagent spend and tokens, savings."""
    where, params = _where(since, until)
    condition = f"{where} AND session_id IS NOT NULL" if where else "WHERE session_id IS NOT NULL"
    sql = f"""
        SELECT session_id, MIN(harness), MIN(started_at), MAX(started_at + duration_ms / 1000.0), COUNT(*),
               SUM(CASE WHEN role = 'orchestrator' THEN cost_micros END),
               SUM(CASE WHEN role != 'orchestrator' THEN cost_micros END),
               SUM(CASE WHEN role = 'orchestrator' THEN input_tokens + cache_read_tokens + output_tokens END),
               SUM(CASE WHEN role != 'orchestrator' THEN input_tokens + cache_read_tokens + output_tokens END),
               SUM(native_cost_micros) - SUM(cost_micros), SUM(cache_read_tokens),
               SUM(input_tokens + cache_read_tokens + cache_write_tokens), SUM(cache_savings_micros)
        FROM calls {condition} GROUP BY session_id ORDER BY MAX(started_at) DESC LIMIT ?
    """
    keys = (
        "session_id",
        "harness",
        "started_at",
        "ended_at",
        "calls",
        "orchestrator_micros",
        "subagent_micros",
        "orchestrator_tokens",
        "subagent_tokens",
        "savings_micros",
        "cache_read_tokens",
        "total_input_tokens",
        "cache_savings_micros",
    )
    rows = [dict(zip(keys, row, strict=True)) for row in connection.execute(sql, [*params, limit])]
    for row in rows:
        total = row["total_input_tokens"] or 0
        row["cache_hit_rate"] = (row["cache_read_tokens"] or 0) / total if total else None
    return rows


def series(
    connection: sqlite3.Connection,
    since: float | None,
    until: float | None,
    bucket_seconds: int,
    by: str = "model",
) -> list[tuple[float, str, int]]:
    """Spend per time bucket and group: (bucket start, group, micro-USD), oldest first."""
    where, params = _where(since, until)
    group_sql = GROUPS[by]
    sql = f"""
        SELECT CAST(started_at / ? AS INTEGER) * ? AS bucket, {group_sql} AS grp, SUM(COALESCE(cost_micros, 0))
        FROM calls {where} GROUP BY bucket, grp ORDER BY bucket
    """
    return [(row[0], row[1], row[2]) for row in connection.execute(sql, [bucket_seconds, bucket_seconds, *params])]


def recent_problems(connection: sqlite3.Connection, limit: int = 5) -> list[dict[str, Any]]:
    """The latest failed or fallen-back calls."""
    cursor = connection.execute(
        "SELECT * FROM calls WHERE outcome != 'completed' OR fallback_attempt > 0 ORDER BY id DESC LIMIT ?", (limit,)
    )
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def connect(path: Any = None) -> sqlite3.Connection | None:
    """A read-only connection to the ledger, or None when nothing has been recorded yet."""
    from switch.ledger.db import open_read_only

    return open_read_only(path)


def micros_to_usd(value: int | None) -> str:
    """Micro-USD as dollars for people; unpriced stays visibly unpriced."""
    if value is None:
        return "unpriced"
    return f"${value / 1_000_000:,.4f}" if abs(value) < 10_000_000 else f"${value / 1_000_000:,.2f}"
