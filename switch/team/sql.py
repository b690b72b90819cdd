"""The team server's SQL as plain strings (no SQLAlchemy: the shipper runs inside the proxy process).

`team_calls` holds every column of the local `calls` table plus who and where it came from: `origin`
(this home's install uuid), `local_id` (the row's id in that home's ledger), `member` and `project`.
(origin, local_id) is unique, so re-sending a batch inserts nothing twice. `team_daily` sums the figures
the local reports sum (`switch.ledger.rollups.SUMS`, the same expressions) per UTC day, member, project,
harness, role and served model. Its DDL is in `schema`, derived from the local row class.
"""

from __future__ import annotations

from switch.ledger.columns import COLUMNS
from switch.ledger.rollups import SUMS

CALLS_TABLE = "team_calls"
DAILY_TABLE = "team_daily"
IDENTITY = ("origin", "local_id", "member", "project")
"""The columns a shipped row has beyond the local ones."""
LOCAL_COLUMNS: tuple[str, ...] = COLUMNS
"""The local ledger's columns that are shipped (exactly what the ledger stores; generated from `Call`)."""
SHIPPED_COLUMNS: tuple[str, ...] = (*IDENTITY, *LOCAL_COLUMNS)
DAILY_KEYS = ("day", "member", "project", "harness", "role", "served_model")
DAILY_SUMS: tuple[str, ...] = tuple(item.name for item in SUMS)


def pg_sum(sql: str) -> str:
    """One `SUMS` expression summed on PostgreSQL (its comparisons are booleans there: `switch_n` counts them)."""
    return f"COALESCE(SUM(switch_n({sql})), 0)::bigint"


def helper_ddl() -> list[str]:
    """`switch_n`: a number from either a count (boolean) or an amount (bigint), so `SUMS` reads as it is."""
    return [
        "CREATE FUNCTION switch_n(boolean) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE "
        "AS 'SELECT $1::int::bigint'",
        "CREATE FUNCTION switch_n(bigint) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT $1'",
    ]


DAY_SQL = "(to_timestamp(started_at) AT TIME ZONE 'UTC')::date"
"""The UTC day of a call: a team spans time zones, so its days are UTC days."""


def daily_ddl() -> list[str]:
    """The daily rollup table (sums in `SUMS` order, first and last start)."""
    sums = ", ".join(f"{name} BIGINT NOT NULL DEFAULT 0" for name in DAILY_SUMS)
    return [
        f"CREATE TABLE {DAILY_TABLE} (day DATE NOT NULL, member TEXT NOT NULL, project TEXT NOT NULL, "
        f"harness TEXT NOT NULL, role TEXT NOT NULL, served_model TEXT NOT NULL, {sums}, "
        f"first_at DOUBLE PRECISION, last_at DOUBLE PRECISION, PRIMARY KEY ({', '.join(DAILY_KEYS)}))",
        f"CREATE INDEX ix_team_daily_member ON {DAILY_TABLE} (member, day)",
    ]


def daily_upsert(source: str) -> str:
    """Add the sums of the rows of `source` (a table or CTE shaped like team_calls) to the daily rollup."""
    keys = ", ".join(DAILY_KEYS)
    sums = ", ".join(pg_sum(item.sql) for item in SUMS)
    update = ", ".join(f"{name} = {DAILY_TABLE}.{name} + excluded.{name}" for name in DAILY_SUMS)
    return (
        f"INSERT INTO {DAILY_TABLE} ({keys}, {', '.join(DAILY_SUMS)}, first_at, last_at) "
        f"SELECT {DAY_SQL}, member, project, harness, role, served_model, {sums}, MIN(started_at), MAX(started_at) "
        f"FROM {source} GROUP BY 1, 2, 3, 4, 5, 6 "
        f"ON CONFLICT ({keys}) DO UPDATE SET {update}, "
        f"first_at = LEAST({DAILY_TABLE}.first_at, excluded.first_at), "
        f"last_at = GREATEST({DAILY_TABLE}.last_at, excluded.last_at)"
    )
