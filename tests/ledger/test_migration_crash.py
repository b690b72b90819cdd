"""A process killed in the middle of a migration leaves a ledger that opens and migrates cleanly."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from switch.ledger.columns import COLUMNS
from switch.ledger.db import open_for_writing
from switch.ledger.migrations import LATEST, MIGRATIONS, current_version, migrate
from switch.ledger.schema import Call
from tests.ledger.test_ledger_proxy import reaped

# The child counts the statements that change the schema or write a row (not BEGIN or COMMIT) and
# ends itself at once, with no clean-up of any kind, right after statement number `crash_after`.
CHILD = """
import os, sqlite3, sys
from switch.ledger.migrations import migrate

crash_after = int(sys.argv[2])

class Crashing(sqlite3.Connection):
    statements = 0

    def execute(self, sql, *args):
        cursor = super().execute(sql, *args)
        if sql.lstrip().split(None, 1)[0].upper() in ("CREATE", "ALTER", "DROP", "INSERT", "UPDATE"):
            Crashing.statements += 1
            if Crashing.statements == crash_after:
                os._exit(9)
        return cursor

connection = sqlite3.connect(sys.argv[1], factory=Crashing)
connection.execute("PRAGMA journal_mode=WAL")
migrate(connection)
"""


def statements(sql: str) -> int:
    return sum(1 for part in sql.split(";") if part.strip())


def run_child(database: Path, crash_after: int) -> int:
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(database), str(crash_after)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    with reaped(process):
        _, errors = process.communicate(timeout=60)
    assert process.returncode in (0, 9), errors.decode()
    return process.returncode


def test_a_crash_between_any_two_statements_of_a_migration_leaves_a_ledger_that_migrates(tmp_path: Path) -> None:
    # The version table, then each migration's statements and its version row.
    total = 1 + sum(statements(sql) + 1 for _, _, sql in MIGRATIONS)
    for crash_after in range(1, total + 1):
        database = tmp_path / f"crash-{crash_after}.db"
        assert run_child(database, crash_after) == 9, crash_after  # it did die mid-way
        connection = open_for_writing(database)
        try:
            assert current_version(connection) == LATEST, crash_after
            columns = {row[1] for row in connection.execute("PRAGMA table_info(calls)")}
            assert columns == {"id", *COLUMNS} == set(Call.model_fields), crash_after
            rollup = {row[1] for row in connection.execute("PRAGMA table_info(rollup)")}
            assert rollup >= {"bucket", "spend_micros"}, crash_after
        finally:
            connection.close()
    assert run_child(tmp_path / "whole.db", total + 1) == 0  # the count above reached every statement


def test_a_crash_while_the_rollups_are_rebuilt_keeps_every_call_and_its_sums(tmp_path: Path) -> None:
    version, _name, rebuild = next(m for m in MIGRATIONS if "quarter-hour rollups" in m[1])
    for crash_after in range(2, statements(rebuild) + 3):  # after the version table: each statement, the version row
        database = tmp_path / f"crash-{crash_after}.db"
        connection = sqlite3.connect(database)
        migrate(connection, upto=version - 1)
        with connection:
            connection.execute(
                "INSERT INTO calls (started_at, harness, role, preset, requested_model, provider, served_model,"
                " inbound_api, upstream_api, streamed, outcome, http_status, cost_micros)"
                " VALUES (1780000000.5, 'codex', 'subagent', 'p', 'gpt-5.5', 'baseten', 'k', 'openai-responses',"
                " 'openai-chat', 1, 'completed', 200, 1234)"
            )
        connection.close()
        assert run_child(database, crash_after) == 9, crash_after
        connection = open_for_writing(database)
        try:
            assert current_version(connection) == LATEST
            assert connection.execute("SELECT COUNT(*) FROM calls").fetchone() == (1,)
            assert connection.execute("SELECT SUM(calls), SUM(spend_micros) FROM rollup").fetchone() == (1, 1234)
            assert connection.execute("SELECT SUM(spend_micros) FROM rollup_session").fetchone() == (1234,)
        finally:
            connection.close()
