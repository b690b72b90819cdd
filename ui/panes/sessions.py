"""The Sessions tab: one row per harness session in the time range; Enter shows that session's calls."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable

from switch.ledger import queries

from .. import format as fmt
from ..data import Ledger, since_of
from .base import LedgerPane


class SessionsPane(LedgerPane):
    """Spend and savings per session, split into orchestrator and subagents."""

    class Loaded(Message):
        """The sessions of the chosen time range were read."""

        bubble = False

        def __init__(self, rows: list[dict[str, Any]]) -> None:
            super().__init__()
            self.rows = rows

    class SessionChosen(Message):
        """The user picked a session: the app shows its calls."""

        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Sessions", ledger, clock, pane_id="sessions")

    def compose(self) -> ComposeResult:
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#sessions-table", DataTable).add_columns(
            "session", "harness", "start", "duration", "calls", "orchestrator", "subagents", "saved", "cache hit"
        )

    def reload(self, range_key: str) -> None:
        """Read the sessions that started in `range_key`."""
        self._load(range_key)

    @work(thread=True, exclusive=True, group="sessions")
    def _load(self, range_key: str) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            rows = queries.sessions(connection, since_of(range_key, self.clock()))
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.Loaded(rows))

    @on(Loaded)
    def _show(self, message: Loaded) -> None:
        rows = message.rows
        table = self.query_one("#sessions-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            duration = (row["ended_at"] or row["started_at"]) - row["started_at"]
            table.add_row(
                fmt.plain(str(row["session_id"])[:18]),
                fmt.plain(row["harness"]),
                time.strftime("%m-%d %H:%M", time.localtime(row["started_at"])),
                fmt.ms(duration * 1000),
                fmt.count(row["calls"]),
                _side(row, "orchestrator"),
                _side(row, "subagent"),
                fmt.money(row["savings_micros"]),
                fmt.pct(row["cache_hit_rate"]),
                key=str(row["session_id"]),
            )
        if rows and cursor >= 0:
            table.move_cursor(row=min(cursor, len(rows) - 1), scroll=False)

    @on(DataTable.RowSelected, "#sessions-table")
    def _choose(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(self.SessionChosen(event.row_key.value))


def _side(row: dict[str, Any], side: str) -> str:
    """One side's spend and tokens; `none` when it made no call, so a session without subagents is not unpriced."""
    if not row[f"{side}_calls"]:
        return "none"
    return f"{fmt.money(row[f'{side}_micros'])} / {fmt.count(row[f'{side}_tokens'])} tok"
