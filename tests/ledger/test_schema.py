"""The call row and its sums are defined once; the migrated ledger, the writer and the reports agree with it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateTable

from switch.ledger.columns import COLUMN_KINDS, COLUMNS, INSERT
from switch.ledger.migrations import LATEST, ROLLUP_KEYS, SESSION_KEYS, migrate
from switch.ledger.record import RECORD_ONLY_FIELDS, WRITER_COLUMNS, CallRecord
from switch.ledger.rollups import CALLS_SUMS_SQL, ROLLUP_SUMS, rollup_deltas, session_deltas
from switch.ledger.schema import CALLS, Call, sqlite_ddl

LEDGER = Path(__file__).resolve().parents[2] / "switch" / "ledger"


def table_shape(connection: sqlite3.Connection, table: str) -> tuple[dict[str, tuple[Any, ...]], dict[str, Any]]:
    """Each column's declared type, NOT NULL, default and key position; each index's columns and uniqueness."""
    columns = {
        name: (kind, bool(notnull) or bool(pk), default, pk)
        for _, name, kind, notnull, default, pk in connection.execute(f"PRAGMA table_info({table})")
    }
    indexes = {
        name: (bool(unique), [row[2] for row in connection.execute(f"PRAGMA index_info({name})")])
        for _, name, unique, origin, _ in connection.execute(f"PRAGMA index_list({table})")
        if origin == "c"  # declared with CREATE INDEX, not implied by a key
    }
    return columns, indexes


def test_a_ledger_migrated_from_any_version_has_exactly_the_calls_table_the_class_defines(tmp_path: Path) -> None:
    defined = sqlite3.connect(tmp_path / "defined.db")
    for statement in sqlite_ddl():
        defined.execute(statement)
    expected = table_shape(defined, "calls")
    assert set(expected[0]) == {"id", *COLUMNS} == set(Call.model_fields)
    for start in range(LATEST + 1):
        migrated = sqlite3.connect(tmp_path / f"from-{start}.db")
        migrate(migrated, upto=start)
        migrate(migrated)
        assert table_shape(migrated, "calls") == expected, start
        migrated.close()
    # The id is SQLite's rowid in both, so ids keep following time (the median sampler relies on it).
    defined.execute(INSERT, tuple("x" if COLUMN_KINDS[column][0] == (str,) else 0 for column in COLUMNS))
    assert defined.execute("SELECT id, rowid FROM calls").fetchone() == (1, 1)


def test_the_rollup_tables_hold_the_defined_sums(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "ledger.db")
    migrate(connection)
    for table, keys in (("rollup", ROLLUP_KEYS), ("rollup_session", SESSION_KEYS)):
        columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
        assert columns == [*keys, *ROLLUP_SUMS, "first_at", "last_at"], table


def test_a_call_record_carries_every_column_the_writer_does_not_compute() -> None:
    hints = typing.get_type_hints(CallRecord)
    assert {field.name for field in fields(CallRecord)} - RECORD_ONLY_FIELDS == set(COLUMNS) - WRITER_COLUMNS
    assert WRITER_COLUMNS < set(COLUMNS) and not RECORD_ONLY_FIELDS & set(COLUMNS)
    for name, hint in hints.items():
        if name in RECORD_ONLY_FIELDS:
            continue
        column = CALLS.columns[name]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)] if union else [hint]
        optional = union and type(None) in typing.get_args(hint)
        assert optional == column.nullable, name  # a None the table refuses would fail the writer's whole batch
        for option in options:
            if typing.get_origin(option) is typing.Literal:
                assert all(isinstance(value, column.type.python_type) for value in typing.get_args(option)), name
            else:
                assert option is column.type.python_type, name


def test_the_class_also_defines_a_postgresql_table() -> None:
    ddl = str(CreateTable(CALLS).compile(dialect=postgresql.dialect()))
    # Costs and byte counts outgrow 32 bits, and Unix times need double precision, on a team server.
    assert "cost_micros BIGINT" in ddl and "started_at DOUBLE PRECISION NOT NULL" in ddl
    assert "streamed BOOLEAN NOT NULL" in ddl and "usage_reported BOOLEAN DEFAULT true NOT NULL" in ddl


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
rows = st.fixed_dictionaries(
    {
        "started_at": st.floats(1.7e9, 1.8e9),
        "harness": st.sampled_from(["claude-code", "codex"]),
        "session_id": st.none() | text,
        "role": st.sampled_from(["orchestrator", "subagent"]),
        "preset": text,
        "provider": st.sampled_from(["baseten", "anthropic"]),
        "served_model": text,
        "requested_model": text,
        "outcome": st.sampled_from(["completed", "upstream_error", "client_cancelled"]),
        "fallback_attempt": st.integers(0, 3),
        "cost_micros": st.none() | st.integers(0, 10**9),
        "native_cost_micros": st.none() | st.integers(0, 10**9),
        "cache_savings_micros": st.none() | st.integers(0, 10**9),
        "input_tokens": st.integers(0, 10**7),
        "cache_read_tokens": st.integers(0, 10**7),
        "cache_write_tokens": st.integers(0, 10**7),
        "output_tokens": st.integers(0, 10**7),
    }
)


def full_row(partial: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(inbound_api="anthropic", upstream_api="openai-chat", streamed=1, http_status=200)
    row.update(reasoning_tokens=0, usage_reported=1, duration_ms=1.0, request_bytes=0, response_bytes=0)
    row.update(agent_id=None)
    row.update(partial)
    return row


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rows, min_size=1, max_size=30))
def test_sql_sums_over_calls_equal_the_writers_python_deltas_and_the_shipped_rebuild(
    tmp_path: Path, batch: list[dict[str, Any]]
) -> None:
    named = [full_row(row) for row in batch]
    path = tmp_path / "ledger.db"
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    try:
        migrate(connection, upto=3)  # before the quarter-hour rollups, which rebuild from the calls
        # Only the columns a version-3 ledger had: later migrations add the others.
        existing = {row[1] for row in connection.execute("PRAGMA table_info(calls)")}
        columns = [column for column in COLUMNS if column in existing]
        insert = f"INSERT INTO calls ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
        connection.executemany(insert, [tuple(row[column] for column in columns) for row in named])
        connection.commit()
        by_sql = connection.execute(f"SELECT {CALLS_SUMS_SQL} FROM calls").fetchone()
        totals = [sum(delta[len(ROLLUP_KEYS) + i] for delta in rollup_deltas(named)) for i in range(len(ROLLUP_SUMS))]
        assert list(by_sql[: len(ROLLUP_SUMS)]) == totals
        migrate(connection)  # the shipped migration fills the rollups with its own (frozen) SQL
        order = ", ".join(str(i + 1) for i in range(len(ROLLUP_KEYS)))
        rebuilt = connection.execute(f"SELECT * FROM rollup ORDER BY {order}").fetchall()
        assert rebuilt == sorted(rollup_deltas(named))
        order = ", ".join(str(i + 1) for i in range(len(SESSION_KEYS)))
        rebuilt = connection.execute(f"SELECT * FROM rollup_session ORDER BY {order}").fetchall()
        assert rebuilt == sorted(session_deltas(named))
    finally:
        connection.close()


def test_the_ledger_imports_neither_the_protocols_nor_the_settings() -> None:
    probe = (
        "import sys\n"
        "import switch.ledger.recorder, switch.ledger.queries, switch.ledger.pricing, switch.ledger.db\n"
        "print(sorted(m for m in sys.modules if m.startswith(('switch.protocols', 'switch.config', 'switch.proxy'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_the_writers_columns_module_is_what_the_class_defines() -> None:
    from switch.ledger.schema import derived_columns

    assert (COLUMNS, COLUMN_KINDS, INSERT) == derived_columns(), "run `python -m switch.ledger.schema`"


def test_serving_and_recording_never_import_sqlmodel() -> None:
    # The class costs ~20 MB and ~0.2 s at start; the proxy's writer needs only its generated constants.
    probe = (
        "import sys, switch.proxy.app, switch.ledger.recorder, switch.proxy.server_main, switch.cli.serve; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlmodel', 'sqlalchemy')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "[]"
