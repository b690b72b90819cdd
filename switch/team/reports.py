"""The team reports, read from PostgreSQL: whole UTC days from `team_daily`, the partial days at the edges of a
range from `team_calls`, the derived figures exactly as the local reports derive them (`queries.finish`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from switch.ledger.queries import finish
from switch.ledger.ranges import range_conditions, split_range
from switch.ledger.rollups import SUMS, merge_sums
from switch.team.sql import CALLS_TABLE, DAILY_SUMS, DAILY_TABLE, DAY_SQL, pg_sum

if TYPE_CHECKING:
    import psycopg

DAY = 86400
BY: dict[str, tuple[str, str]] = {
    # --by NAME: (over team_daily, over team_calls)
    "member": ("member", "member"),
    "project": ("project", "project"),
    "harness": ("harness", "harness"),
    "role": ("role", "role"),
    "model": ("served_model", "served_model"),
    "day": ("to_char(day, 'YYYY-MM-DD')", f"to_char({DAY_SQL}, 'YYYY-MM-DD')"),
}
MEDIAN_SAMPLE = 100_000
"""Above this many calls in a range, medians come from a sample of about this many (TABLESAMPLE)."""
_KEYS = ("grp", *DAILY_SUMS, "first_at", "last_at")
_CALLS_SUMS = ", ".join(pg_sum(item.sql) for item in SUMS) + ", MIN(started_at), MAX(started_at)"
_DAILY_SUMS = ", ".join(f"SUM({name})::bigint" for name in DAILY_SUMS) + ", MIN(first_at), MAX(last_at)"


def _day(timestamp: float) -> Any:
    return datetime.fromtimestamp(timestamp, UTC).date()


def _range(column: str, low: Any, high: Any) -> tuple[str, list[Any]]:
    clauses, params = range_conditions(column, low, high, "%s")
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _merge(merged: dict[Any, list[Any]], rows: list[tuple[Any, ...]]) -> None:
    merge_sums(merged, rows, len(DAILY_SUMS), len(DAILY_SUMS) + 1)


def spend(
    connection: psycopg.Connection[tuple[Any, ...]],
    by: str | None = None,
    since: float | None = None,
    until: float | None = None,
    medians: bool = True,
) -> list[dict[str, Any]]:
    """The team's spend, native estimate, savings, calls, errors and cache use per group (or in total), with
    median TTFT and output speed unless `medians` is False; the same figures and names as `queries.spend`."""
    daily_group, calls_group = BY[by] if by else ("'all'", "'all'")
    whole, edges = split_range(since, until, DAY)
    merged: dict[Any, list[Any]] = {}
    if whole is not None:
        low, high = whole
        where, params = _range("day", None if low is None else _day(low), None if high is None else _day(high))
        sql = f"SELECT {daily_group}, {_DAILY_SUMS} FROM {DAILY_TABLE} {where} GROUP BY 1"
        _merge(merged, connection.execute(sql, params).fetchall())
    for low, high in edges:
        where, params = _range("started_at", low, high)
        sql = f"SELECT {calls_group}, {_CALLS_SUMS} FROM {CALLS_TABLE} {where} GROUP BY 1"
        _merge(merged, connection.execute(sql, params).fetchall())
    rows = [finish(dict(zip(_KEYS, (group, *values), strict=True))) for group, values in merged.items()]
    rows.sort(key=lambda row: (-(row["spend_micros"] or 0), -(row["calls"] or 0)))
    ttft, tps = (
        _medians(connection, calls_group, since, until, sum(row["calls"] for row in rows)) if medians else ({}, {})
    )
    for row in rows:
        row["median_ttft_ms"] = ttft.get(row["grp"])
        row["median_output_tps"] = tps.get(row["grp"])
    return rows


def _medians(
    connection: psycopg.Connection[tuple[Any, ...]], group: str, since: float | None, until: float | None, calls: int
) -> tuple[dict[Any, float], dict[Any, float]]:
    """Median TTFT and output tokens/s per group: exact up to MEDIAN_SAMPLE calls, sampled above."""
    if not calls:
        return {}, {}
    where, params = _range("started_at", since, until)
    sample = ""
    if calls > MEDIAN_SAMPLE:
        # A page sample reads about MEDIAN_SAMPLE rows of the whole table whatever the range (a sample is
        # drawn before the range applies), so a 10-million-row table answers in a fraction of a second.
        found = connection.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (CALLS_TABLE,))
        estimate = found.fetchone()
        table_rows = max(float(estimate[0]) if estimate else 0.0, float(calls))
        sample = f" TABLESAMPLE SYSTEM ({100.0 * MEDIAN_SAMPLE / table_rows:.6f}) REPEATABLE (0)"
    sql = (
        f"SELECT {group}, percentile_cont(0.5) WITHIN GROUP (ORDER BY ttft_ms), "
        f"percentile_cont(0.5) WITHIN GROUP (ORDER BY output_tps) FROM {CALLS_TABLE}{sample} {where} GROUP BY 1"
    )
    ttft: dict[Any, float] = {}
    tps: dict[Any, float] = {}
    for name, median_ttft, median_tps in connection.execute(sql, params).fetchall():
        if median_ttft is not None:
            ttft[name] = float(median_ttft)
        if median_tps is not None:
            tps[name] = float(median_tps)
    return ttft, tps


def members(connection: psycopg.Connection[tuple[Any, ...]]) -> int:
    """How many members have shipped anything."""
    row = connection.execute(f"SELECT COUNT(DISTINCT member) FROM {DAILY_TABLE}").fetchone()
    return int(row[0]) if row else 0
