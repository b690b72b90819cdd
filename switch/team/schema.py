"""The server's tables, derived from the local row definition (`switch.ledger.schema.Call`), never restated.

`team_calls` holds every column of the local `calls` table (same names and portable types) plus who
and where it came from: `origin` (this home's install uuid), `local_id` (the row's id in that home's
ledger), `member` and `project`. (origin, local_id) is unique, so re-sending a batch inserts nothing
twice. `team_daily` sums the same figures the local reports sum (`switch.ledger.rollups.SUMS`) per UTC
day, member, project, harness, role and served model.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from switch.ledger.rollups import SUMS
from switch.ledger.schema import CALLS

CALLS_TABLE = "team_calls"
DAILY_TABLE = "team_daily"
IDENTITY = ("origin", "local_id", "member", "project")
"""The columns a shipped row has beyond the local ones."""
LOCAL_COLUMNS: tuple[str, ...] = tuple(column.name for column in CALLS.columns if not column.primary_key)
"""The local ledger's columns that are shipped, in the class's order (exactly what the ledger stores)."""
SHIPPED_COLUMNS: tuple[str, ...] = (*IDENTITY, *LOCAL_COLUMNS)
DAILY_KEYS = ("day", "member", "project", "harness", "role", "served_model")
DAILY_SUMS: tuple[str, ...] = tuple(item.name for item in SUMS)

_metadata = sa.MetaData()


def _calls_table() -> sa.Table:
    copied = [column._copy() for column in CALLS.columns if not column.primary_key]
    return sa.Table(
        CALLS_TABLE,
        _metadata,
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("local_id", sa.BigInteger, nullable=False),
        sa.Column("member", sa.Text, nullable=False),
        sa.Column("project", sa.Text, nullable=False, server_default=""),
        *copied,
        sa.UniqueConstraint("origin", "local_id", name="uq_team_calls_origin_local"),
        sa.Index("ix_team_calls_started_at", "started_at"),
        sa.Index("ix_team_calls_member", "member", "started_at"),
        sa.Index("ix_team_calls_model", "served_model", "started_at"),
    )


TEAM_CALLS = _calls_table()


def calls_ddl() -> list[str]:
    """CREATE TABLE and CREATE INDEX statements for `team_calls` on PostgreSQL, from the local class."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    indexes = sorted(TEAM_CALLS.indexes, key=lambda index: str(index.name))
    return [str(CreateTable(TEAM_CALLS).compile(dialect=dialect))] + [
        str(CreateIndex(index).compile(dialect=dialect)) for index in indexes
    ]


def pg_sum(sql: str) -> str:
    """One `SUMS` expression summed on PostgreSQL (its comparisons are booleans there: `switch_n` counts them)."""
    return f"COALESCE(SUM(switch_n({sql})), 0)"


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
