"""The Overview tab: spend, native estimate, savings, calls and speed cards, a spend chart, four breakdowns."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Static

from .. import format as fmt
from ..data import RANGES, Ledger, Overview, load_overview
from ..widgets.measured_table import MeasuredTable
from ..widgets.spend_chart import SpendChart
from .base import LedgerPane

EMPTY_HELP = (
    "No calls recorded yet.\n\n"
    "1. Start the proxy:        switch up\n"
    "2. Point a harness at it:  ANTHROPIC_BASE_URL=http://127.0.0.1:8742 claude\n"
    "   (or: switch claude on / switch codex on / switch langchain env)\n"
    "3. Choose who does what:   switch use hybrid\n\n"
    "Calls appear here as they happen."
)
BREAKDOWNS = (
    ("by-model", "served model"),
    ("by-role", "role"),
    ("by-harness", "harness"),
    ("by-mapping", "requested → served"),
)
BREAKDOWN_HEADERS = ("spend", "native", "saved", "calls", "cache hit", "cache saved")
UNPRICED_LEGEND = "+N? after a spend: N of those calls have no price (not counted as $0)"
SCROLLBAR = 2  # a scroll bar's width, counted whether or not it shows
CELL_PADDING = 2  # DataTable's cell padding, one column each side
MIN_LABEL = 10
MAX_TABLE_ROWS = 11
MONEY_WIDTH = 9  # `$1,234.56`; larger sums are shortened (`$12,346`, `$1.23M`) so two tables fit side by side
RANGE_LABELS = dict(RANGES)
BUDGET_BAR = 20


_budgets_seen: tuple[Any, list[Any]] = (None, [])


def _configured_budgets() -> list[Any]:
    """config.toml's budgets, read again only when the file changed (the overview reloads often)."""
    global _budgets_seen
    from switch import locations
    from switch.config import file_signature, load_settings
    from switch.errors import ConfigError

    signature = file_signature(locations.config_file())
    if signature is None or signature != _budgets_seen[0]:
        try:
            budgets: list[Any] = load_settings().budgets if signature is not None else []
        except ConfigError:
            budgets = []  # the health pane says what is wrong with config.toml
        _budgets_seen = (signature, budgets)
    return _budgets_seen[1]


def budget_bars(connection: sqlite3.Connection | None, now: float) -> list[str]:
    """One bar per `[[budgets]]` entry: this period's spend against its limit (none when config.toml has none)."""
    from switch.budgets.status import budget_report

    budgets = _configured_budgets()
    lines = []
    for entry in budget_report(budgets, connection, now):
        used = entry["used"]
        filled = min(BUDGET_BAR, round(used * BUDGET_BAR))
        colour = "red" if entry["action"] == "block" else "yellow" if entry["action"] else "green"
        action = f" · {entry['action']}" if entry["action"] else ""
        lines.append(
            f"Budget [b]{entry['name']}[/b] [{colour}]{'█' * filled}[/{colour}]{'░' * (BUDGET_BAR - filled)} "
            f"{fmt.money(entry['spent_micros'])} of {fmt.money(entry['limit_micros'])} per {entry['period']}"
            f" ({used:.0%}){action}"
        )
    return lines


def plan_bars(connection: sqlite3.Connection | None, now: float) -> list[str]:
    """One bar per window of each native plan its answers reported (a window past its reset: stale)."""
    from switch.ledger.plan_quota import percent, plans, resets_in

    lines = []
    for plan in plans(connection, now) if connection is not None else []:
        rejected = " · [red]rejected[/red]" if plan["status"] == "rejected" else ""
        for window in plan["windows"]:
            used = float(window.get("utilization") or 0)
            filled = min(BUDGET_BAR, round(used * BUDGET_BAR))
            name = f"Plan [b]{plan['provider']}[/b] {window.get('name')}"
            if window.get("stale"):
                lines.append(f"{name} [dim]{'░' * BUDGET_BAR} stale: {percent(used)} before its reset[/dim]")
                continue
            colour = "red" if used >= 0.9 else "yellow" if used >= 0.7 else "green"
            lines.append(
                f"{name} [{colour}]{'█' * filled}[/{colour}]{'░' * (BUDGET_BAR - filled)} {percent(used)} used, "
                f"{resets_in(window.get('resets_at'), now)}{rejected}"
            )
    return lines


class OverviewPane(LedgerPane):
    """Totals and breakdowns for the chosen time range."""

    class Loaded(Message):
        """The overview of `range_key` was read; None when nothing has been recorded yet."""

        bubble = False

        def __init__(self, overview: Overview | None, range_key: str, budgets: list[str] | None = None) -> None:
            super().__init__()
            self.overview = overview
            self.range_key = range_key
            self.budgets = budgets or []

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Overview", ledger, clock, pane_id="overview")

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="empty", classes="help")
            yield Static(id="range")
            yield Static(id="budgets")
            with Horizontal(id="cards"):
                for card in ("spend", "native", "saved", "calls", "speed"):
                    yield Static(id=f"card-{card}", classes="card")
            yield SpendChart(id="chart")
            for pair in (BREAKDOWNS[:2], BREAKDOWNS[2:]):
                with Horizontal(classes="breakdowns"):
                    for table_id, _label in pair:
                        yield MeasuredTable(
                            id=table_id, classes="breakdown", cursor_type="row", max_rows=MAX_TABLE_ROWS
                        )
            yield Static(UNPRICED_LEGEND, id="unpriced-legend", classes="legend")

    def reload(self, range_key: str) -> None:
        """Read the overview of `range_key`."""
        self._load(range_key)

    @work(thread=True, exclusive=True, group="overview")
    def _load(self, range_key: str) -> None:
        try:
            connection = self.ledger.get()
            overview = None if connection is None else load_overview(connection, range_key, self.clock())
            budgets = budget_bars(connection, self.clock()) + plan_bars(connection, self.clock())
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.Loaded(overview, range_key, budgets))

    @on(Loaded)
    def _show(self, message: Loaded) -> None:
        bars = self.query_one("#budgets", Static)
        bars.display = bool(message.budgets)
        bars.update("\n".join(message.budgets))
        empty = self.query_one("#empty", Static)
        if message.overview is None:
            empty.update(EMPTY_HELP)
            empty.display = True
            return
        overview = message.overview
        label = RANGE_LABELS[message.range_key]
        totals = overview.totals
        empty.display = not totals
        if not totals:
            empty.update(f"No calls in this range ({label.lower()}). Press r to widen it.")
        unpriced = totals.get("unpriced") or 0
        note = f" · [b]{unpriced}[/b] unpriced calls (not counted as $0)" if unpriced else ""
        if overview.refused:
            note += f" · rejected: [b]{overview.refused}[/b] (before any provider, no cost)"
        self.query_one("#range", Static).update(f"[b]{label}[/b] (r: change range){note}")
        self._show_cards(totals, unpriced)
        size = self.app.size
        chart_rows = max(3, min(12, size.height - 18))
        self.query_one("#chart", SpendChart).show(overview.series, overview.bucket_seconds, size.width, chart_rows)
        cells = {
            table_id: [breakdown_cells(row) for row in rows]
            for table_id, rows in (
                ("by-model", overview.by_model),
                ("by-role", overview.by_role),
                ("by-harness", overview.by_harness),
                ("by-mapping", overview.by_mapping),
            )
        }
        stacked, label_width = breakdown_layout(cells, size.width)
        self.set_class(stacked, "stacked")
        # Each table's width in the layout just chosen (side by side: half each).
        room = size.width if stacked else size.width // 2
        for table_id, label in BREAKDOWNS:
            rows_cells = [[shorten(row[0], label_width), *row[1:]] for row in cells[table_id]]
            self.query_one(f"#{table_id}", MeasuredTable).fill(
                [shorten(label, label_width), *BREAKDOWN_HEADERS],
                [[fmt.plain(label_text), *figures] for label_text, *figures in rows_cells],
                room,
            )
        unpriced_rows = any(row["unpriced"] for row in overview.by_model)
        self.query_one("#unpriced-legend", Static).display = unpriced_rows

    def _show_cards(self, totals: dict[str, Any], unpriced: int) -> None:
        spend = fmt.money(totals.get("spend_micros")) if totals else "$0.0000"
        self.query_one("#card-spend", Static).update(f"Spend{'*' if unpriced else ''}\n[b]{spend}[/b]")
        native = fmt.money(totals.get("native_micros")) if totals else "-"
        self.query_one("#card-native", Static).update(f"Native est.\n[b]{native}[/b]")
        saved = fmt.money(totals.get("savings_micros")) if totals else "-"
        cache_hit = fmt.pct(totals.get("cache_hit_rate"))
        # Three short lines, so the cache hit figure shows in full on an 80-column terminal too.
        self.query_one("#card-saved", Static).update(
            f"Saved {fmt.pct(totals.get('savings_pct'))}\n[b]{saved}[/b]\ncache hit {cache_hit}"
        )
        self.query_one("#card-calls", Static).update(
            f"Calls [b]{fmt.count(totals.get('calls'))}[/b]\n{fmt.count(totals.get('errors'))} err"
            f" · {fmt.count(totals.get('fallbacks'))} fb"
        )
        self.query_one("#card-speed", Static).update(
            f"TTFT [b]{fmt.ms(totals.get('median_ttft_ms'))}[/b]\n"
            f"[b]{fmt.rate(totals.get('median_output_tps'))}[/b] out"
        )


def breakdown_cells(row: dict[str, Any]) -> list[str]:
    """One breakdown row as text: its label, then the figures under BREAKDOWN_HEADERS."""
    spent = fmt.money_cell(row["spend_micros"], MONEY_WIDTH) + (f" +{row['unpriced']}?" if row["unpriced"] else "")
    return [
        str(row["grp"]) if row["grp"] is not None else "-",
        spent,
        fmt.money_cell(row["native_micros"], MONEY_WIDTH),
        fmt.money_cell(row["savings_micros"], MONEY_WIDTH),
        fmt.count_cell(row["calls"]),
        fmt.pct(row["cache_hit_rate"]),
        fmt.money_cell(row["cache_savings_micros"], MONEY_WIDTH),
    ]


def breakdown_layout(cells: dict[str, list[list[str]]], width: int) -> tuple[bool, int | None]:
    """Whether the four breakdowns go one under another, and the label width that keeps every figure whole.

    Side by side while each fits half the screen; else one per line, and a label too long for the line is
    shortened (the label, never a figure or a header: a cut figure reads as another amount).
    """
    labels = ("served model", "role", "harness", "requested → served")
    figures = 0
    label = 0
    for label_header, rows in zip(labels, cells.values(), strict=True):
        columns = [[label_header, *BREAKDOWN_HEADERS], *rows]
        widths = [max(len(row[index]) for row in columns) + CELL_PADDING for index in range(len(columns[0]))]
        label = max(label, widths[0])
        figures = max(figures, sum(widths[1:]))
    half = (width - SCROLLBAR) // 2 - SCROLLBAR
    if label + figures <= half:
        return False, None
    room = width - 2 * SCROLLBAR - figures - CELL_PADDING
    return True, None if label - CELL_PADDING <= room else max(MIN_LABEL, room)


def shorten(text: str, width: int | None) -> str:
    """A label in at most `width` characters: model names lose their `org/` first, then end in `…`.

    `requested → served` keeps both sides, each shortened alike, so the served model never disappears.
    """
    if width is None or len(text) <= width:
        return text
    if " → " in text:
        requested, served = (_bare(side) for side in text.split(" → ", 1))
        if len(requested) + len(served) + 3 <= width:
            return f"{requested} → {served}"
        side = max(1, (width - 3) // 2)
        return f"{_cut(requested, side)} → {_cut(served, width - 3 - side)}"
    return _cut(_bare(text), width)


def _bare(name: str) -> str:
    """A model name without its organisation (`moonshotai/Kimi-K3` → `Kimi-K3`)."""
    return name.rsplit("/", 1)[-1] if "/" in name else name


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
