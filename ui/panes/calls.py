"""The Calls tab: every call, newest first, filtered, paged backwards on scroll; Enter opens one call."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Input, Select, Static

from switch.ledger import queries

from .. import format as fmt
from ..data import Filters, Ledger
from ..screens.detail import CallDetail
from .base import LedgerPane

PAGE = 200
# What a cost dashboard user looks at first comes first: at 100 columns the time, harness, role, served
# model, cost, native estimate and saving are on screen, the rest scrolls in horizontally.
CALL_COLUMNS = (
    ("time", 14),
    ("harness", 11),
    ("role", 12),
    ("served", 20),
    ("cost", 8),
    ("native", 8),
    ("saved", 8),
    ("requested", 18),
    ("outcome", 16),
    ("in", 8),
    ("out", 7),
    ("cached", 8),
    ("TTFT", 7),
    ("duration", 8),
    ("", 1),
)
OUTCOMES = (
    "completed",
    "upstream_error",
    "transport_error",
    "client_cancelled",
    "incomplete_stream",
    "rejected",
    "context_overflow",
)
STATUS_KEYS = "Enter: details · /: filter, Enter or Esc: back to list"


def saving(row: dict[str, Any]) -> int | None:
    """Native estimate minus cost, when the call was priced both ways."""
    cost, native = row["cost_micros"], row["native_cost_micros"]
    return None if cost is None or native is None else native - cost


def call_cells(row: dict[str, Any]) -> tuple[str | Text, ...]:
    """One ledger row as table cells; ledger text goes in as `Text`, since a plain string cell is markup."""
    saved = saving(row)
    return (
        time.strftime("%m-%d %H:%M:%S", time.localtime(row["started_at"])),
        fmt.plain(row["harness"]),
        fmt.plain(row["role"]),
        fmt.plain(row["served_model"]),
        fmt.money(row["cost_micros"]),
        fmt.money(row["native_cost_micros"]),
        "-" if saved is None else fmt.money(saved),
        fmt.plain(row["requested_model"]),
        fmt.plain(row["outcome"]),
        fmt.count(row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]),
        fmt.count(row["output_tokens"]),
        fmt.count(row["cache_read_tokens"]),
        fmt.ms(row["ttft_ms"]),
        fmt.ms(row["duration_ms"]),
        "↻" if row["fallback_attempt"] else "",
    )


class CallsPane(LedgerPane):
    """The call list: new calls appear on top while the cursor stays on the call it was on."""

    class RowsLoaded(Message):
        """Calls read under `filters`; the subclass says which end of the list they go to."""

        bubble = False

        def __init__(self, filters: Filters, rows: list[dict[str, Any]]) -> None:
            super().__init__()
            self.filters = filters
            self.rows = rows

    class NewerLoaded(RowsLoaded):
        """Calls newer than the newest shown, read under `filters`."""

    class OlderLoaded(RowsLoaded):
        """The page of calls older than the oldest shown, read under `filters`."""

    # A priority binding, so Enter opens the highlighted call from the filter dropdowns too (they open
    # with Space or the arrow keys); in the text filter and in an open dropdown Enter keeps its own meaning.
    BINDINGS = [Binding("enter", "open_call", "Details", priority=True)]

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Calls", ledger, clock, pane_id="calls")
        self.filters = Filters()
        self.call_rows: list[dict[str, Any]] = []
        self.exhausted = False

    def compose(self) -> ComposeResult:
        with Vertical():
            with Horizontal(id="filters"):
                yield Input(placeholder="filter text (model, error)…", id="filter-text")
                yield Select(
                    [(h, h) for h in ("claude-code", "codex", "langchain", "other")],
                    prompt="harness",
                    id="filter-harness",
                )
                yield Select(
                    [(r, r) for r in ("orchestrator", "subagent", "background")], prompt="role", id="filter-role"
                )
                yield Select([(o, o) for o in OUTCOMES], prompt="outcome", id="filter-outcome")
            yield Static(id="calls-status")
            yield DataTable(id="calls-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#calls-table", DataTable)
        # Fixed widths: the table looks the same however and whenever its rows arrive.
        for column, width in CALL_COLUMNS:
            table.add_column(column, key=column, width=width)

    def reload(self, range_key: str) -> None:
        """Read calls newer than the newest shown (the list spans every time range)."""
        self._poll()

    def show_session(self, session_id: str) -> None:
        """Narrow the list to the calls of one session."""
        self.filters.session = session_id
        self._reset()

    def focus_filter(self) -> None:
        """Put the cursor in the text filter."""
        self.query_one("#filter-text", Input).focus()

    @work(thread=True, exclusive=True, group="calls")
    def _load_newer(self, filters: Filters, newest: int | None) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            fresh = queries.calls(connection, limit=PAGE, after_id=newest, filters=filters.as_query())
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.NewerLoaded(filters, fresh))

    @work(thread=True, exclusive=True, group="calls-page")
    def _load_older(self, filters: Filters, before: int) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            older = queries.calls(connection, limit=PAGE, before_id=before, filters=filters.as_query())
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.OlderLoaded(filters, older))

    @on(NewerLoaded)
    def _show_newer(self, message: NewerLoaded) -> None:
        if message.filters != self.filters:
            return  # read under filters since changed
        # Polls can overlap; only rows newer than what is shown are new.
        newest = self.call_rows[0]["id"] if self.call_rows else 0
        fresh = [row for row in message.rows if row["id"] > newest]
        table = self.query_one("#calls-table", DataTable)
        if not fresh and table.row_count == len(self.call_rows) and self.call_rows:
            return
        keep_key = None
        if table.row_count and table.cursor_row >= 0:
            keep_key = str(self.call_rows[min(table.cursor_row, len(self.call_rows) - 1)]["id"])
        scroll_y = table.scroll_y
        self.call_rows = fresh + self.call_rows
        table.clear()
        for row in self.call_rows:
            table.add_row(*call_cells(row), key=str(row["id"]))
        if keep_key is not None:
            table.move_cursor(row=table.get_row_index(keep_key), scroll=False)
            table.scroll_to(y=scroll_y + (len(fresh) if scroll_y > 0 else 0), animate=False)
        self._show_status()

    @on(OlderLoaded)
    def _show_older(self, message: OlderLoaded) -> None:
        if message.filters != self.filters:
            return
        oldest = self.call_rows[-1]["id"] if self.call_rows else None
        older = [row for row in message.rows if oldest is None or row["id"] < oldest]
        table = self.query_one("#calls-table", DataTable)
        if not older:
            self.exhausted = True
        for row in older:
            self.call_rows.append(row)
            table.add_row(*call_cells(row), key=str(row["id"]))
        self._show_status()

    def _show_status(self) -> None:
        more = "" if self.exhausted else " (scroll down for older)"
        self.query_one("#calls-status", Static).update(f"{len(self.call_rows):,} calls loaded{more} · {STATUS_KEYS}")

    def _reset(self) -> None:
        self.call_rows = []
        self.exhausted = False
        self.query_one("#calls-table", DataTable).clear()
        self._poll()

    def _poll(self) -> None:
        newest = self.call_rows[0]["id"] if self.call_rows else None
        self._load_newer(Filters(**vars(self.filters)), newest)

    @on(DataTable.RowHighlighted, "#calls-table")
    def _maybe_page(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if not self.exhausted and self.call_rows and event.cursor_row >= table.row_count - 5:
            self._load_older(Filters(**vars(self.filters)), self.call_rows[-1]["id"])

    def action_open_call(self) -> None:
        """Open the highlighted call (in the text filter: go back to the list, the filter already applies)."""
        focused = self.app.focused
        ancestors = focused.ancestors_with_self if focused is not None else []
        dropdown = next((node for node in ancestors if isinstance(node, Select)), None)
        if dropdown is not None and dropdown.expanded:
            raise SkipAction()  # Enter picks the option of an open dropdown
        if isinstance(focused, Input):
            self.focus_table()
            return
        table = self.query_one("#calls-table", DataTable)
        if table.row_count and table.cursor_row >= 0:
            self._open(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    @on(DataTable.RowSelected, "#calls-table")
    def _open_clicked(self, event: DataTable.RowSelected) -> None:
        self._open(event.row_key.value)

    def _open(self, key: str | None) -> None:
        connection = self.ledger.get()
        if connection is None or key is None:
            return
        row = queries.call(connection, int(key))
        if row is not None:
            self.app.push_screen(CallDetail(row))

    def focus_target(self) -> Widget | None:
        """The call list, whatever sits above it."""
        return self.query_one("#calls-table", DataTable)

    def focus_table(self) -> None:
        """Put the focus on the call list."""
        self.query_one("#calls-table", DataTable).focus()

    @on(Input.Changed, "#filter-text")
    def _text_filter(self, event: Input.Changed) -> None:
        self.filters.text = event.value.strip()
        self._reset()

    @on(Select.Changed)
    def _select_filter(self, event: Select.Changed) -> None:
        value = event.value if isinstance(event.value, str) else None
        field = (event.select.id or "").removeprefix("filter-")
        if field in ("harness", "role", "outcome"):
            setattr(self.filters, field, value)
            self._reset()
