"""The sums every report shows, defined once: as SQL over `calls` and as Python over a row.

The rollup tables hold them per quarter hour (see `migrations.BUCKET_SECONDS`); the writer adds each
batch's deltas, computed here in Python, and the queries add the SQL form over the calls at the edges
of a range. Both forms come from the same `SUMS` entries, and a test holds them equal on any rows.
"""

from __future__ import annotations

from switch.ledger.migrations import BUCKET_SECONDS, ROLLUP_KEYS, SESSION_KEYS

TYPE_CHECKING = False  # the status line imports this module (through queries): keep `typing` off its path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Row = Mapping[str, Any]


class Sum:
    """One additive figure: what a single call adds, in SQL (over one `calls` row) and in Python."""

    __slots__ = ("name", "sql", "of")

    def __init__(self, name: str, sql: str, of: Callable[[Row], int]) -> None:
        self.name = name
        self.sql = sql
        self.of = of


def _both_priced(row: Row) -> int:
    cost, native = row["cost_micros"], row["native_cost_micros"]
    return int(native - cost) if cost is not None and native is not None else 0


SUMS: tuple[Sum, ...] = (
    Sum("calls", "1", lambda row: 1),
    Sum("errors", "outcome != 'completed'", lambda row: int(row["outcome"] != "completed")),
    Sum("fallbacks", "fallback_attempt > 0", lambda row: int(row["fallback_attempt"] > 0)),
    Sum("spend_micros", "cost_micros", lambda row: row["cost_micros"] or 0),
    # A call refused before any provider (no provider recorded) cost nothing: it is not "unpriced".
    Sum(
        "unpriced",
        "cost_micros IS NULL AND provider != ''",
        lambda row: int(row["cost_micros"] is None and row["provider"] != ""),
    ),
    Sum("native_micros", "native_cost_micros", lambda row: row["native_cost_micros"] or 0),
    # Savings count only calls priced both ways: an unpriced call is unknown, not a saving.
    Sum(
        "savings_micros",
        "CASE WHEN cost_micros IS NOT NULL AND native_cost_micros IS NOT NULL"
        " THEN native_cost_micros - cost_micros END",
        _both_priced,
    ),
    Sum("input_tokens", "input_tokens", lambda row: row["input_tokens"]),
    Sum("cache_read_tokens", "cache_read_tokens", lambda row: row["cache_read_tokens"]),
    Sum("cache_write_tokens", "cache_write_tokens", lambda row: row["cache_write_tokens"]),
    Sum("output_tokens", "output_tokens", lambda row: row["output_tokens"]),
    Sum("cache_savings_micros", "cache_savings_micros", lambda row: row["cache_savings_micros"] or 0),
)
ROLLUP_SUMS: tuple[str, ...] = tuple(item.name for item in SUMS)
"""The rollup tables' sum columns, in order; each table also keeps `first_at` and `last_at`."""
CALLS_SUMS_SQL = ", ".join(f"COALESCE(SUM({item.sql}), 0)" for item in SUMS) + ", MIN(started_at), MAX(started_at)"
"""The sums (then first and last start) over a set of `calls` rows, in `ROLLUP_SUMS` order."""
ROLLUP_SUMS_SQL = ", ".join(f"SUM({name})" for name in ROLLUP_SUMS) + ", MIN(first_at), MAX(last_at)"
"""The same over a set of rollup rows."""


def _upsert(table: str, keys: tuple[str, ...]) -> str:
    return (
        f"INSERT INTO {table} ({', '.join(keys)}, {', '.join(ROLLUP_SUMS)}, first_at, last_at) "
        f"VALUES ({', '.join('?' for _ in (*keys, *ROLLUP_SUMS))}, ?, ?) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
        + ", ".join(f"{name} = {name} + excluded.{name}" for name in ROLLUP_SUMS)
        + ", first_at = MIN(first_at, excluded.first_at), last_at = MAX(last_at, excluded.last_at)"
    )


UPSERT_ROLLUP = _upsert("rollup", ROLLUP_KEYS)
UPSERT_SESSION = _upsert("rollup_session", SESSION_KEYS)
_VALUES = tuple(item.of for item in SUMS)


def _sums(rows: Sequence[dict[str, Any]], key_of: Callable[[Row], tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = key_of(row)
        values = [value(row) for value in _VALUES]
        started = row["started_at"]
        current = sums.get(key)
        if current is None:
            sums[key] = [*values, started, started]
        else:
            for position, value in enumerate(values):
                current[position] += value
            current[-2] = min(current[-2], started)
            current[-1] = max(current[-1], started)
    return [(*key, *value) for key, value in sums.items()]


def bucket_of(started_at: float) -> int:
    """The start of the quarter hour holding `started_at` (a rollup key)."""
    return int(started_at // BUCKET_SECONDS) * BUCKET_SECONDS


def rollup_deltas(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per-bucket sums of a batch of rows, keyed like the `rollup` table."""
    return _sums(
        rows,
        lambda row: (
            bucket_of(row["started_at"]),
            row["harness"],
            row["role"],
            row["preset"],
            row["provider"],
            row["served_model"],
            row["requested_model"],
        ),
    )


def session_deltas(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per-bucket sums of a batch of rows by session, keyed like the `rollup_session` table."""
    return _sums(rows, lambda row: (bucket_of(row["started_at"]), row["session_id"] or "", row["harness"]))


def merge_sums(merged: dict[Any, list[Any]], rows: Any, first_at: int, last_at: int) -> None:
    """Add rows of (group, sums…, first start, last start) into `merged`: sums add, the starts take min and max."""
    for row in rows:
        group, values = row[0], list(row[1:])
        current = merged.get(group)
        if current is None:
            merged[group] = values
            continue
        for position, value in enumerate(values):
            if value is None:
                continue
            if current[position] is None:
                current[position] = value
            elif position == first_at:
                current[position] = min(current[position], value)
            elif position == last_at:
                current[position] = max(current[position], value)
            else:
                current[position] += value
