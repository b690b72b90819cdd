"""Migration 8 adds the budget columns to a ledger made by an earlier switch; its rows keep their values."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from switch.ledger.migrations import LATEST, current_version, migrate


def test_a_version_6_ledger_migrates_to_latest_with_empty_budget_marks(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "ledger.db")
    try:
        migrate(connection, upto=6)
        connection.execute(
            "INSERT INTO calls (started_at, harness, role, preset, requested_model, provider, served_model, "
            "inbound_api, upstream_api, streamed, outcome, http_status, cost_micros) "
            "VALUES (1.0, 'codex', 'subagent', 'p', 'm', 'baseten', 'k', 'openai-responses', 'openai-chat', 1, "
            "'completed', 200, 42)"
        )
        connection.commit()
        assert migrate(connection) == LATEST == current_version(connection)
        row = connection.execute("SELECT harness, cost_micros, budget, budget_action FROM calls").fetchone()
        assert row == ("codex", 42, None, None)
        connection.execute("UPDATE calls SET budget = 'codex/day', budget_action = 'warn'")
        assert connection.execute("SELECT budget, budget_action FROM calls").fetchone() == ("codex/day", "warn")
    finally:
        connection.close()
