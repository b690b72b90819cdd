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
# (header, width, priority). What a cost dashboard user looks at first stays on screen first: where the
# terminal is too narrow for every column, the columns that fit, lowest priority number first, come first
# (in this order) and the rest follow off screen to the right, reached by scrolling; no column is cut at the
# edge (a money figure cut mid-number reads as another amount). At 100 columns: time, harness, role, served
# model, cost, native estimate and saving; at 80: time, served model, cost, native, saved.
CALL_COLUMNS = (
    ("time", 14, 0),
    ("harness", 11, 3),
    ("role", 12, 4),
    ("served", 20, 2),
    ("cost", 8, 1),
    ("native", 8, 1),
    ("saved", 8, 1),
    ("requested", 18, 6),
    ("outcome", 16, 5),
    ("in", 8, 8),
    ("out", 7, 8),
    ("cached", 8, 9),
    ("TTFT", 7, 7),
    ("duration", 8, 9),
    ("", 1, 3),
)
CELL_PADDING = 2  # DataTable's cell padding, one column each side
OUTCOMES = (
    "completed",
    "upstream_error",
    "transport_error",
    "client_cancelled",
    "incomplete_stream",
    "rejected",
    "context_overflow",
)
STATUS_KEYS = "Enter: details · /: filter"
SESSION_KEYS = "Esc: all sessions"


def column_layout(width: int) -> list[tuple[str, int]]:
    """The columns in screen order for a table `width` cells wide, each with its width.

    The columns that fit come first, chosen by priority and shown in their usual order; the last of them is
    widened to the edge so the next column starts just off screen instead of showing cut.
    """
    used = 0
    shown: set[str] = set()
    for name, size, _priority in sorted(CALL_COLUMNS, key=lambda column: column[2]):
        if used + size + CELL_PADDING <= width:
            shown.add(name)
            used += size + CELL_PADDING
    visible = [(name, size) for name, size, _ in CALL_COLUMNS if name in shown]
    if visible:
        name, size = visible[-1]
        visible[-1] = (name, size + max(0, width - used))
    return visible + [(name, size) for name, size, _ in CALL_COLUMNS if name not in shown]


def saving(row: dict[str, Any]) -> int | None:
    """Native estimate minus cost, when the call was priced both ways."""
    cost, native = row["cost_micros"], row["native_cost_micros"]
    return None if cost is None or native is None else native - cost


def call_cells(row: dict[str, Any]) -> dict[str, str | Text]:
    """One ledger row as table cells by column; ledger text goes in as `Text`, since a plain string cell is markup."""
    saved = saving(row)
    return {
        "time": time.strftime("%m-%d %H:%M:%S", time.localtime(row["started_at"])),
        "harness": fmt.plain(row["harness"]),
        "role": fmt.plain(row["role"]),
        "served": fmt.plain(row["served_model"]),
        "cost": fmt.money_cell(row["cost_micros"]),
        "native": fmt.money_cell(row["native_cost_micros"]),
        "saved": "-" if saved is None else fmt.money_cell(saved),
        "requested": fmt.plain(row["requested_model"]),
        "outcome": fmt.plain(row["outcome"]),
        "in": fmt.count_cell(row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]),
        "out": fmt.count_cell(row["output_tokens"], 7),
        "cached": fmt.count_cell(row["cache_read_tokens"]),
        "TTFT": fmt.ms(row["ttft_ms"]),
        "duration": fmt.ms(row["duration_ms"]),
        "": "↻" if row["fallback_attempt"] else "",
    }


class CallsPane(LedgerPane):
    """The call list: new calls appear on top while the cursor stays on the call it was on."""

    class RowsLoaded(Message):
        """Calls read under `filters`; the subclass says which end of the list they go to."""

        bubble = False

        def __init__(self, filters: Filters, rows: list[dict[str, Any]], more: bool | None = None) -> None:
            super().__init__()
            self.filters = filters
            self.rows = rows
            self.more = more
            """Whether older calls than these exist (None: this read does not say)."""

    class NewerLoaded(RowsLoaded):
        """Calls newer than the newest shown, read under `filters`."""

    class OlderLoaded(RowsLoaded):
        """The page of calls older than the oldest shown, read under `filters`."""

    # A priority binding, so Enter opens the highlighted call from the filter dropdowns too (they open
    # with Space or the arrow keys); in the text filter and in an open dropdown Enter keeps its own meaning.
    # Escape on the list shows every session again after Enter on a Sessions row narrowed it to one (the
    # status line says so while it applies); in a filter, Escape first goes back to the list.
    BINDINGS = [
        Binding("enter", "open_call", "Open", priority=True),
        Binding("escape", "all_sessions", "All sessions", show=False),
    ]

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Calls", ledger, clock, pane_id="calls")
        self.filters = Filters()
        self.call_rows: list[dict[str, Any]] = []
        self.exhausted = False
        self.layout_columns: list[tuple[str, int]] = []

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
        self._fit_columns(self.app.size.width)

    def on_resize(self) -> None:
        if self.size.width:  # a hidden tab has no width: keep its layout for when it shows again
            self._fit_columns(self.size.width)

    def _fit_columns(self, pane_width: int) -> None:
        """Lay the columns out for the table's width (fixed widths: the table looks the same however its rows
        arrive); on a change of layout, the rows are drawn again with the cursor kept on its call."""
        table = self.query_one("#calls-table", DataTable)
        # The vertical scroll bar is counted whether or not it shows yet: rows arrive after the first layout.
        layout = column_layout(max(0, pane_width - table.styles.scrollbar_size_vertical))
        if layout == self.layout_columns:
            return
        self.layout_columns = layout
        keep = self._cursor_key()
        table.clear(columns=True)
        for column, width in layout:
            table.add_column(column, key=column, width=width)
        self._add_rows(self.call_rows)
        if keep is not None:
            table.move_cursor(row=table.get_row_index(keep), scroll=True)

    def _cursor_key(self) -> str | None:
        table = self.query_one("#calls-table", DataTable)
        if table.row_count and table.cursor_row >= 0 and self.call_rows:
            return str(self.call_rows[min(table.cursor_row, len(self.call_rows) - 1)]["id"])
        return None

    def _add_rows(self, rows: list[dict[str, Any]]) -> None:
        table = self.query_one("#calls-table", DataTable)
        for row in rows:
            cells = call_cells(row)
            table.add_row(*(cells[name] for name, _ in self.layout_columns), key=str(row["id"]))

    def reload(self, range_key: str) -> None:
        """Read calls newer than the newest shown (the list spans every time range)."""
        self._poll()

    def show_session(self, session_id: str) -> None:
        """Narrow the list to the calls of one session."""
        self.filters.session = session_id
        self._reset()

    def action_all_sessions(self) -> None:
        """Show the calls of every session again (Escape in a filter first goes back to the list)."""
        if self.filters.session is None or isinstance(self.app.focused, Input | Select):
            raise SkipAction()
        self.filters.session = None
        self._reset()
        self.notify("Calls of every session", markup=False)

    def focus_filter(self) -> None:
        """Put the cursor in the text filter."""
        self.query_one("#filter-text", Input).focus()

    @work(thread=True, exclusive=True, group="calls")
    def _load_newer(self, filters: Filters, newest: int | None) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            # The first read asks for one call more than a page: whether older ones exist, without a count.
            limit = PAGE + 1 if newest is None else PAGE
            fresh = queries.calls(connection, limit=limit, after_id=newest, filters=filters.as_query())
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        more = len(fresh) > PAGE if newest is None else None
        self.post_message(self.NewerLoaded(filters, fresh[:PAGE], more))

    @work(thread=True, exclusive=True, group="calls-page")
    def _load_older(self, filters: Filters, before: int) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            older = queries.calls(connection, limit=PAGE + 1, before_id=before, filters=filters.as_query())
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.OlderLoaded(filters, older[:PAGE], len(older) > PAGE))

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
        if message.more is not None and not self.call_rows:
            self.exhausted = not message.more  # the first page: are there older calls to scroll to?
        keep_key = self._cursor_key()
        scroll_y = table.scroll_y
        self.call_rows = fresh + self.call_rows
        table.clear()
        self._add_rows(self.call_rows)
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
        if not older or message.more is False:
            self.exhausted = True
        self.call_rows.extend(older)
        self._add_rows(older)
        self._show_status()

    def _show_status(self) -> None:
        loaded = len(self.call_rows)
        text = Text(f"{loaded:,} call{'' if loaded == 1 else 's'} loaded")
        if not self.exhausted:
            text.append(", scroll down for older")
        if self.filters.session is not None:
            # The one filter not in the bar above: say it applies, and how to lift it.
            session = self.filters.session
            shown = session if len(session) <= 20 else f"{session[:19]}…"
            text = Text.assemble((f" session {shown} ", "reverse"), f" {SESSION_KEYS} · ", text, " · Enter: details")
        else:
            text.append(f" · {STATUS_KEYS}")
        self.query_one("#calls-status", Static).update(text)

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
