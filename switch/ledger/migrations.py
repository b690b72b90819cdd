"""Numbered, append-only schema migrations for the ledger (never edit one that has shipped)."""

from __future__ import annotations

import sqlite3
import time

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "create calls",
        """
        CREATE TABLE calls (
            id INTEGER PRIMARY KEY,
            started_at REAL NOT NULL,
            harness TEXT NOT NULL,
            session_id TEXT,
            agent_id TEXT,
            role TEXT NOT NULL,
            preset TEXT NOT NULL,
            requested_model TEXT NOT NULL,
            provider TEXT NOT NULL,
            served_model TEXT NOT NULL,
            inbound_api TEXT NOT NULL,
            upstream_api TEXT NOT NULL,
            streamed INTEGER NOT NULL,
            outcome TEXT NOT NULL,
            http_status INTEGER NOT NULL,
            stop_reason TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            usage_reported INTEGER NOT NULL DEFAULT 1,
            cost_micros INTEGER,
            native_cost_micros INTEGER,
            price_source TEXT,
            native_price_source TEXT,
            price_input REAL,
            price_cached_input REAL,
            price_cache_write REAL,
            price_output REAL,
            ttft_ms REAL,
            duration_ms REAL NOT NULL DEFAULT 0,
            output_tps REAL,
            fallback_attempt INTEGER NOT NULL DEFAULT 0,
            fallback_trigger TEXT,
            request_bytes INTEGER NOT NULL DEFAULT 0,
            response_bytes INTEGER NOT NULL DEFAULT 0,
            error TEXT
        );
        CREATE INDEX ix_calls_started_at ON calls (started_at);
        CREATE INDEX ix_calls_session ON calls (session_id, started_at);
        CREATE INDEX ix_calls_model ON calls (served_model, started_at);
        CREATE INDEX ix_calls_role ON calls (role, started_at);
        CREATE INDEX ix_calls_harness ON calls (harness, started_at);
        """,
    ),
    (
        2,
        "cache savings per call",
        """
        ALTER TABLE calls ADD COLUMN cache_savings_micros INTEGER;
        CREATE INDEX ix_calls_outcome ON calls (outcome, started_at);
        """,
    ),
)
# Migrations 3 and 4 keep the sums as they shipped, literally (history never changes): the current
# sums are defined once in `rollups.SUMS`, and a test holds the migrated tables to that definition.
# A new sum is a new migration that adds its column and fills it from `rollups.SUMS`.
# Migration 3's hourly rollups keep their own key names.
_HOURLY_KEYS = ("hour", "harness", "role", "preset", "provider", "served_model", "requested_model")
_HOURLY_SESSION_KEYS = ("hour", "session_id", "harness")
_SHIPPED_SUMS = (
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
)
_SUM_SELECT = """COUNT(*), SUM(outcome != 'completed'), SUM(fallback_attempt > 0), COALESCE(SUM(cost_micros), 0),
               SUM(cost_micros IS NULL), COALESCE(SUM(native_cost_micros), 0),
               COALESCE(SUM(CASE WHEN cost_micros IS NOT NULL AND native_cost_micros IS NOT NULL
                                 THEN native_cost_micros - cost_micros END), 0),
               SUM(input_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(output_tokens),
               COALESCE(SUM(cache_savings_micros), 0), MIN(started_at), MAX(started_at)"""
_SUM_COLUMNS = ", ".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name in _SHIPPED_SUMS)
MIGRATIONS = (
    *MIGRATIONS,
    (
        3,
        "hourly rollups for reports",
        f"""
        CREATE TABLE rollup (
            hour INTEGER NOT NULL, harness TEXT NOT NULL, role TEXT NOT NULL, preset TEXT NOT NULL,
            provider TEXT NOT NULL, served_model TEXT NOT NULL, requested_model TEXT NOT NULL,
            {_SUM_COLUMNS}, first_at REAL, last_at REAL,
            PRIMARY KEY ({", ".join(_HOURLY_KEYS)})
        ) WITHOUT ROWID;
        INSERT INTO rollup
        SELECT CAST(started_at / 3600 AS INTEGER) * 3600, harness, role, preset, provider, served_model,
               requested_model, {_SUM_SELECT}
        FROM calls GROUP BY 1, 2, 3, 4, 5, 6, 7;
        CREATE TABLE rollup_session (
            hour INTEGER NOT NULL, session_id TEXT NOT NULL, harness TEXT NOT NULL,
            {_SUM_COLUMNS}, first_at REAL, last_at REAL,
            PRIMARY KEY ({", ".join(_HOURLY_SESSION_KEYS)})
        ) WITHOUT ROWID;
        INSERT INTO rollup_session
        SELECT CAST(started_at / 3600 AS INTEGER) * 3600, COALESCE(session_id, ''), harness, {_SUM_SELECT}
        FROM calls GROUP BY 1, 2, 3;
        """,
    ),
)
# Rollups are kept per quarter hour: every time zone in use today is a whole number of quarter hours
# from UTC (India +5:30, Newfoundland -3:30, Nepal +5:45, Chatham +12:45), so every local midnight and
# every local hour starts on a bucket edge and a report by local day or hour is a sum of whole buckets.
# Hourly buckets cannot give a local day in a :30 or :45 zone; a quarter hour costs at most four times
# the rows of an hour, which stays small next to the calls themselves.
BUCKET_SECONDS = 900
ROLLUP_KEYS = ("bucket", "harness", "role", "preset", "provider", "served_model", "requested_model")
SESSION_KEYS = ("bucket", "session_id", "harness")
MIGRATIONS = (
    *MIGRATIONS,
    (
        4,
        "quarter-hour rollups, so local days add up in every time zone",
        f"""
        DROP TABLE rollup;
        DROP TABLE rollup_session;
        CREATE TABLE rollup (
            bucket INTEGER NOT NULL, harness TEXT NOT NULL, role TEXT NOT NULL, preset TEXT NOT NULL,
            provider TEXT NOT NULL, served_model TEXT NOT NULL, requested_model TEXT NOT NULL,
            {_SUM_COLUMNS}, first_at REAL, last_at REAL,
            PRIMARY KEY ({", ".join(ROLLUP_KEYS)})
        ) WITHOUT ROWID;
        INSERT INTO rollup
        SELECT CAST(started_at / {BUCKET_SECONDS} AS INTEGER) * {BUCKET_SECONDS}, harness, role, preset, provider,
               served_model, requested_model, {_SUM_SELECT}
        FROM calls GROUP BY 1, 2, 3, 4, 5, 6, 7;
        CREATE TABLE rollup_session (
            bucket INTEGER NOT NULL, session_id TEXT NOT NULL, harness TEXT NOT NULL,
            {_SUM_COLUMNS}, first_at REAL, last_at REAL,
            PRIMARY KEY ({", ".join(SESSION_KEYS)})
        ) WITHOUT ROWID;
        INSERT INTO rollup_session
        SELECT CAST(started_at / {BUCKET_SECONDS} AS INTEGER) * {BUCKET_SECONDS}, COALESCE(session_id, ''), harness,
               {_SUM_SELECT}
        FROM calls GROUP BY 1, 2, 3;
        """,
    ),
    (
        5,
        "per-session lookups in the session rollup",
        # The status line reads one session's sums after every harness message; the rollup's key starts
        # with the bucket, so without this it would scan every session's rows.
        "CREATE INDEX ix_rollup_session_session ON rollup_session (session_id)",
    ),
    (
        6,
        "calls refused before any provider are not unpriced",
        f"""
        UPDATE rollup SET unpriced = 0 WHERE provider = '';
        UPDATE rollup_session SET unpriced = unpriced - (
            SELECT COUNT(*) FROM calls
            WHERE provider = '' AND cost_micros IS NULL
              AND CAST(started_at / {BUCKET_SECONDS} AS INTEGER) * {BUCKET_SECONDS} = rollup_session.bucket
              AND COALESCE(session_id, '') = rollup_session.session_id AND harness = rollup_session.harness
        );
        """,
    ),
    (
        7,
        "no output speed where none was measured",
        # Output tok/s was once output tokens over (duration - TTFT), which for a whole body is about zero
        # seconds: rates like 310,231 tok/s that skewed every median. Only a stream shows a rate; an old
        # stream's chunk count was never recorded, so its rate (first byte to end) stays. The rollups
        # hold no rates, so they need nothing.
        "UPDATE calls SET output_tps = NULL WHERE streamed = 0 AND output_tps IS NOT NULL",
    ),
)
MIGRATIONS = (
    *MIGRATIONS,
    (
        8,
        "which budget acted on a call, and how",
        """
        ALTER TABLE calls ADD COLUMN budget TEXT;
        ALTER TABLE calls ADD COLUMN budget_action TEXT;
        """,
    ),
    (
        9,
        "what each call was for (compaction, fork, review, ...) and which agent spawned its agent",
        """
        ALTER TABLE calls ADD COLUMN request_kind TEXT;
        ALTER TABLE calls ADD COLUMN parent_agent_id TEXT;
        """,
    ),
    (
        10,
        "each native plan's quota as its answers last told it (never a credential: the account is a hash)",
        """
        CREATE TABLE plan_quota (
            provider TEXT NOT NULL,
            account TEXT NOT NULL,
            source TEXT NOT NULL,
            status TEXT,
            windows TEXT NOT NULL,
            binding TEXT,
            retry_until REAL,
            observed_at REAL NOT NULL,
            PRIMARY KEY (provider, account)
        );
        """,
    ),
)
MIGRATIONS = (
    *MIGRATIONS,
    (
        11,
        "how the call reached switch: http, or websocket (a Responses turn over Codex's WebSocket)",
        # Every earlier call came over HTTP: switch served nothing else.
        "ALTER TABLE calls ADD COLUMN transport TEXT NOT NULL DEFAULT 'http';",
    ),
)
LATEST = MIGRATIONS[-1][0]
_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
)


def current_version(connection: sqlite3.Connection) -> int:
    """The highest migration applied to this database (0 for a new one)."""
    connection.execute(_VERSION_TABLE)
    return _applied(connection)


def _applied(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(connection: sqlite3.Connection, upto: int = LATEST) -> int:
    """Apply every pending migration up to `upto`, each in its own transaction; return the version."""
    # Python's sqlite3 commits DDL as it goes unless it is told to stay out of transaction control:
    # in autocommit mode the explicit BEGIN below is the only transaction, so a crash anywhere inside
    # a migration leaves the database exactly as it was before that migration.
    isolation_level = connection.isolation_level
    connection.isolation_level = None
    try:
        version = current_version(connection)
        for number, name, sql in MIGRATIONS:
            if number <= version or number > upto:
                continue
            # IMMEDIATE takes the write lock first, so two processes starting at once cannot both
            # apply the same migration: the second sees the version the first committed.
            connection.execute("BEGIN IMMEDIATE")
            try:
                if _applied(connection) < number:
                    for statement in sql.split(";"):
                        if statement.strip():
                            connection.execute(statement)
                    connection.execute(
                        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                        (number, name, time.time()),
                    )
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            version = number
    finally:
        connection.isolation_level = isolation_level
    return version
