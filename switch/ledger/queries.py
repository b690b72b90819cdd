"""Everything the CLI and the dashboard read from the ledger (read-only SQL, no writes)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from switch.ledger.migrations import BUCKET_SECONDS
from switch.ledger.ranges import range_conditions, split_range
from switch.ledger.rollups import CALLS_SUMS_SQL, ROLLUP_SUMS, ROLLUP_SUMS_SQL, merge_sums
from switch.ledger.times import parse_time as parse_time  # where the CLI and the dashboard look for it

TYPE_CHECKING = False  # the status line imports this module: keep `typing` off its start-up path
if TYPE_CHECKING:
    from typing import Any

# A call refused before any provider (400, 413: no provider recorded) has no served model: in a grouping by
# what served it, its group is NULL, which the reports leave out and count apart (`refused_calls`).
_SERVED = "CASE WHEN provider = '' THEN NULL ELSE {} END"
GROUPS: dict[str, str] = {
    "day": "strftime('%Y-%m-%d', started_at, 'unixepoch', 'localtime')",
    "model": _SERVED.format("served_model"),
    "role": "role",
    "harness": "harness",
    "session": "COALESCE(session_id, '(none)')",
    "preset": "preset",
    "provider": _SERVED.format("provider"),
    "requested": _SERVED.format("requested_model || ' → ' || served_model"),
}
SERVED_GROUPS = frozenset({"model", "provider", "requested"})
"""Groupings by what served a call: refused calls are not a group of these."""
# The same groups over the quarter-hour rollups (session ids are stored there as '' for none). A local
# day is a whole number of quarter hours in every zone (see migrations.BUCKET_SECONDS), so the local
# date of a bucket's start is the date of every call in it.
ROLLUP_GROUPS: dict[str, str] = {
    **GROUPS,
    "day": "strftime('%Y-%m-%d', bucket, 'unixepoch', 'localtime')",
    "session": "CASE WHEN session_id = '' THEN '(none)' ELSE session_id END",
}
# Where first and last start sit in a row of sums (after the sums themselves).
_FIRST_AT, _LAST_AT = len(ROLLUP_SUMS), len(ROLLUP_SUMS) + 1
MEDIAN_SAMPLE = 5_000


def where_clause(
    since: float | None, until: float | None, extra: dict[str, str] | None = None
) -> tuple[str, list[Any]]:
    """`WHERE …` (or nothing) and its parameters for calls started in [since, until) matching `extra`."""
    clauses, params = range_conditions("started_at", since, until)
    for column, value in (extra or {}).items():
        if column == "text":
            clauses.append("(requested_model LIKE ? OR served_model LIKE ? OR COALESCE(error,'') LIKE ?)")
            params.extend([f"%{value}%"] * 3)
        else:
            clauses.append(f"{column} = ?")
            params.append(value)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _medians(
    connection: sqlite3.Connection, group_sql: str, where: str, params: list[Any]
) -> tuple[dict[Any, float], dict[Any, float]]:
    """Median TTFT and median output tokens/s per group.

    Exact up to MEDIAN_SAMPLE calls; above that, computed over MEDIAN_SAMPLE calls picked evenly by
    id across the range (ids follow time), so a million-row ledger answers in milliseconds.
    """
    import statistics

    sampled = sample(connection, where, params)
    if sampled is None:
        return {}, {}
    condition, sample_params = sampled
    ttfts: dict[Any, list[float]] = {}
    rates: dict[Any, list[float]] = {}
    for group, ttft, tps in connection.execute(
        f"SELECT {group_sql}, ttft_ms, output_tps FROM calls {condition}", sample_params
    ):
        if ttft is not None:
            ttfts.setdefault(group, []).append(ttft)
        if tps is not None:
            rates.setdefault(group, []).append(tps)
    return {g: statistics.median(v) for g, v in ttfts.items()}, {g: statistics.median(v) for g, v in rates.items()}


def sample(connection: sqlite3.Connection, where: str, params: list[Any]) -> tuple[str, list[Any]] | None:
    """The condition for at most MEDIAN_SAMPLE of the calls `where` selects, picked evenly by id (ids follow
    time), and its parameters; None when it selects no call."""
    low, high = connection.execute(f"SELECT MIN(id), MAX(id) FROM calls {where}", params).fetchone()
    if low is None:
        return None
    if high - low + 1 <= MEDIAN_SAMPLE:
        return where, list(params)
    step = (high - low + 1) / MEDIAN_SAMPLE
    ids = sorted({low + int(index * step) for index in range(MEDIAN_SAMPLE)})
    placeholders = ",".join("?" * len(ids))
    condition = f"{where} AND id IN ({placeholders})" if where else f"WHERE id IN ({placeholders})"
    return condition, [*params, *ids]


def _merge(target: dict[Any, list[Any]], rows: Any) -> None:
    merge_sums(target, rows, _FIRST_AT, _LAST_AT)


def _aggregate(
    connection: sqlite3.Connection, by: str | None, since: float | None, until: float | None
) -> dict[Any, list[Any]]:
    """Per-group sums: whole buckets from the rollup table, the partial buckets at the edges from calls."""
    whole, edges = split_range(since, until, BUCKET_SECONDS)
    merged: dict[Any, list[Any]] = {}
    if whole is not None:
        clauses, params = range_conditions("bucket", *whole)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rollup_group = ROLLUP_GROUPS[by] if by else "'all'"
        table = "rollup_session" if by == "session" else "rollup"
        _merge(
            merged,
            connection.execute(f"SELECT {rollup_group}, {ROLLUP_SUMS_SQL} FROM {table} {where} GROUP BY 1", params),
        )
    calls_group = GROUPS[by] if by else "'all'"
    for low, high in edges:
        edge_where, edge_params = where_clause(low, high)
        _merge(
            merged,
            connection.execute(
                f"SELECT {calls_group}, {CALLS_SUMS_SQL} FROM calls {edge_where} GROUP BY 1", edge_params
            ),
        )
    return merged


def spend(
    connection: sqlite3.Connection,
    by: str | None = None,
    since: float | None = None,
    until: float | None = None,
    filters: dict[str, str] | None = None,
    medians: bool = True,
) -> list[dict[str, Any]]:
    """Spend, native estimate, savings, calls, errors, cache use and (unless `medians` is False) median
    TTFT and output speed, per group (or in total)."""
    group_sql = GROUPS[by] if by else "'all'"
    where, params = where_clause(since, until, filters)
    if filters:
        sql = f"SELECT {group_sql}, {CALLS_SUMS_SQL} FROM calls {where} GROUP BY 1"
        merged: dict[Any, list[Any]] = {}
        _merge(merged, connection.execute(sql, params))
    else:
        merged = _aggregate(connection, by, since, until)
    rows = [
        dict(zip(_SPEND_KEYS, (group, *values), strict=True))
        for group, values in merged.items()
        if group is not None or by not in SERVED_GROUPS
    ]
    rows.sort(key=lambda row: (-(row["spend_micros"] or 0), -(row["calls"] or 0)))
    ttft, tps = _medians(connection, group_sql, where, params) if medians else ({}, {})
    for row in rows:
        _finish(row)
        row["median_ttft_ms"] = ttft.get(row["grp"])
        row["median_output_tps"] = tps.get(row["grp"])
    return rows


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    """The derived figures every report shows, defined once: spend and savings stay unknown (None) when no
    call was priced, the other sums count missing as zero, cache hit rate and savings share of native."""
    for name in ROLLUP_SUMS:
        if row.get(name) is None:
            row[name] = 0
    if row["unpriced"] and row["unpriced"] == row["calls"]:
        row["spend_micros"] = row["savings_micros"] = None  # nothing priced: unknown, not free
    total_input = row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
    row["cache_hit_rate"] = row["cache_read_tokens"] / total_input if total_input else None
    row["savings_pct"] = (
        row["savings_micros"] / row["native_micros"]
        if row["native_micros"] and row["savings_micros"] is not None
        else None
    )
    return row


_SPEND_KEYS = ("grp", *ROLLUP_SUMS, "first_at", "last_at")


def refused_calls(connection: sqlite3.Connection, since: float | None = None, until: float | None = None) -> int:
    """Calls refused before any provider (no model, no cost) in the range: shown as their own count."""
    refused = _aggregate(connection, "provider", since, until).get(None)
    return int(refused[0] or 0) if refused else 0


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
    where, params = where_clause(since, until, filters)
    if before_id is not None:
        where += (" AND " if where else "WHERE ") + "id < ?"
        params.append(before_id)
    if after_id is not None:
        where += (" AND " if where else "WHERE ") + "id > ?"
        params.append(after_id)
    cursor = connection.execute(f"SELECT * FROM calls {where} ORDER BY id DESC LIMIT ?", [*params, limit])
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def calls_after(connection: sqlite3.Connection, after_id: int, limit: int) -> list[dict[str, Any]]:
    """The first `limit` calls after `after_id`, oldest first (what a follower pages through without a gap)."""
    cursor = connection.execute("SELECT * FROM calls WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))
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
    where, params = where_clause(since, until)
    cursor = connection.execute(f"SELECT * FROM calls {where} ORDER BY id", params)
    names = [column[0] for column in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


_SESSION_KEYS = (
    "session_id",
    "harness",
    "started_at",
    "ended_at",
    *ROLLUP_SUMS,
    "first_at",
    "last_at",
    "orchestrator_micros",
    "subagent_micros",
    "orchestrator_tokens",
    "subagent_tokens",
    "orchestrator_calls",
    "subagent_calls",
    "orchestrator_unpriced",
    "subagent_unpriced",
)
# Subagent figures are those of every call not on the main thread (subagents and background calls).
_ROLE_SIDES = (("orchestrator", "role = 'orchestrator'"), ("subagent", "role != 'orchestrator'"))
_ROLE_SUMS = ",\n".join(
    [f"SUM(CASE WHEN {where} THEN cost_micros END)" for _side, where in _ROLE_SIDES]
    + [f"SUM(CASE WHEN {where} THEN input_tokens + cache_read_tokens + output_tokens END)" for _s, where in _ROLE_SIDES]
    + [f"SUM({where})" for _side, where in _ROLE_SIDES]
    + [f"SUM({where} AND cost_micros IS NULL AND provider != '')" for _side, where in _ROLE_SIDES]
)


def sessions(
    connection: sqlite3.Connection,
    since: float | None = None,
    until: float | None = None,
    limit: int = 200,
    session_id: str | None = None,
) -> list[dict[str, Any]]:
    """One row per harness session (or just `session_id`), newest first: span, calls, orchestrator vs
    subagent calls, spend (None only when unpriced), unpriced calls and tokens, and the same spend, native,
    savings and cache figures as `spend --by session`."""
    where, params = where_clause(since, until, {"session_id": session_id} if session_id else None)
    condition = f"{where} AND session_id IS NOT NULL" if where else "WHERE session_id IS NOT NULL"
    sql = f"""
        SELECT session_id, MIN(harness), MIN(started_at), MAX(started_at + duration_ms / 1000.0), {CALLS_SUMS_SQL},
               {_ROLE_SUMS}
        FROM calls {condition} GROUP BY session_id ORDER BY MAX(started_at) DESC LIMIT ?
    """
    rows = [dict(zip(_SESSION_KEYS, row, strict=True)) for row in connection.execute(sql, [*params, limit])]
    for row in rows:
        _finish(row)
        row["total_input_tokens"] = row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
        for side, _where in _ROLE_SIDES:
            # A side with no calls spent nothing (its calls count says so); it is unpriced only when it has
            # calls and none of those that reached a provider could be priced.
            if row[f"{side}_micros"] is None and not row[f"{side}_unpriced"]:
                row[f"{side}_micros"] = 0
            row[f"{side}_tokens"] = row[f"{side}_tokens"] or 0
    return rows


ROLES = ("orchestrator", "subagent", "background")


def session_status(connection: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    """One session's figures (the rollup `spend --by session` reads, finished the same way), the model
    that last served each role, and how its latest call ended; None for a session with no calls.

    Runs after every harness message, so every read is an index lookup: the rollup by session id, and
    the calls newest first on (session_id, started_at), stopping at the first match."""
    row = connection.execute(
        f"SELECT MIN(harness), {ROLLUP_SUMS_SQL} FROM rollup_session WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None or not row[1]:
        return None
    status = _finish(dict(zip(("harness", *ROLLUP_SUMS, "first_at", "last_at"), row, strict=True)))
    status["session_id"] = session_id
    models: dict[str, str] = {}
    for role in ROLES:
        served = connection.execute(
            "SELECT served_model FROM calls INDEXED BY ix_calls_session"
            " WHERE session_id = ? AND role = ? AND outcome = 'completed' ORDER BY started_at DESC LIMIT 1",
            (session_id, role),
        ).fetchone()
        if served is not None:
            models[role] = served[0]
    status["models"] = models
    last = connection.execute(
        "SELECT outcome, fallback_attempt, served_model, http_status FROM calls INDEXED BY ix_calls_session"
        " WHERE session_id = ? ORDER BY started_at DESC, id DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    status["last"] = dict(zip(("outcome", "fallback_attempt", "served_model", "http_status"), last, strict=True))
    return status


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
    # The sign goes before the dollar sign (`-$0.0007`), as people write it.
    sign = "-" if value < 0 else ""
    dollars = abs(value) / 1_000_000
    return f"{sign}${dollars:,.4f}" if abs(value) < 10_000_000 else f"{sign}${dollars:,.2f}"


finish = _finish
"""The derived figures of a row of sums (the team reports use the same definition)."""
