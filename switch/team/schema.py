"""The server's `team_calls` table, derived from the local row definition (`switch.ledger.schema.Call`).

Every column of the local class is copied as it is (names, portable types, defaults); the team columns
(`sql.IDENTITY`) and the unique (origin, local_id) that makes re-sending idempotent are added.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from switch.ledger.schema import CALLS
from switch.team.sql import CALLS_TABLE

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
