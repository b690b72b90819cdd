"""Versioned, transactional migrations of the team server's schema, recorded in `switch_team_meta`.

Each migration runs in one transaction together with the row that records it, under an advisory lock,
so two members running `switch team init` at once, or a crash half-way, leave a schema at a whole version.
Connections are in autocommit mode (see `server.connect`): each `transaction()` block is a real transaction.
Append only: a migration that has shipped never changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from switch.team.sql import CALLS_TABLE, DAILY_TABLE, daily_ddl, daily_upsert, helper_ddl

if TYPE_CHECKING:
    import psycopg

META_TABLE = "switch_team_meta"
_LOCK_KEY = 0x5377_7463_6854_6D31  # any constant: one lock id that only switch's migrations take
_LOCK_KEY = _LOCK_KEY - (1 << 64) if _LOCK_KEY >= 1 << 63 else _LOCK_KEY


@dataclass(frozen=True)
class Migration:
    """One schema step: its number, what it does in words, and its statements."""

    version: int
    description: str
    statements: Callable[[], list[str]]


def _calls_ddl() -> list[str]:
    # SQLAlchemy renders it from the local class: imported only when a migration runs (`switch team init`).
    from switch.team.schema import calls_ddl

    return calls_ddl()


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, f"create {CALLS_TABLE} (the local calls columns + origin, local_id, member, project)", _calls_ddl),
    Migration(
        2,
        f"create {DAILY_TABLE} (daily sums per member, project, harness, role, served model) and fill it",
        lambda: [*helper_ddl(), *daily_ddl(), daily_upsert(CALLS_TABLE)],
    ),
)
LATEST = MIGRATIONS[-1].version


def _ensure_meta(connection: psycopg.Connection[tuple[Any, ...]]) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {META_TABLE} (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
        "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )


def current_version(connection: psycopg.Connection[tuple[Any, ...]]) -> int:
    """The server schema's version (0: switch never created it)."""
    row = connection.execute("SELECT to_regclass(%s)", (META_TABLE,)).fetchone()
    if row is None or row[0] is None:
        return 0
    version = connection.execute(f"SELECT COALESCE(MAX(version), 0) FROM {META_TABLE}").fetchone()
    return int(version[0]) if version else 0


def pending(connection: psycopg.Connection[tuple[Any, ...]], target: int = LATEST) -> list[Migration]:
    """The migrations `migrate` would apply, oldest first."""
    version = current_version(connection)
    return [migration for migration in MIGRATIONS if version < migration.version <= target]


def migrate(connection: psycopg.Connection[tuple[Any, ...]], target: int = LATEST) -> list[Migration]:
    """Apply what is pending up to `target`, each migration in its own transaction; returns what was applied."""
    applied: list[Migration] = []
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        _ensure_meta(connection)
    for migration in MIGRATIONS:
        if migration.version > target:
            break
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            # Read under the lock: another member's `team init` may have applied it meanwhile.
            if current_version(connection) >= migration.version:
                continue
            for statement in migration.statements():
                connection.execute(statement)
            connection.execute(
                f"INSERT INTO {META_TABLE} (version, description) VALUES (%s, %s)",
                (migration.version, migration.description),
            )
        applied.append(migration)
    return applied
