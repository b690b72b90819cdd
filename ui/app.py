"""`switch dash`: the Textual dashboard over the ledger (read-only, its own process).

Data flow: a one-second timer starts a thread worker that reads the ledger for the visible tab
and posts the result back; widgets are only touched on the app's thread. Nothing here writes the
ledger; switching the active preset writes only the active-preset file (as `switch use` does).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, Input, Select, Static, TabbedContent, TabPane

from switch.ledger import queries

from . import format as fmt
from .data import RANGES, Filters, Ledger, Overview, load_overview, now_seconds, since_of
from .screens.detail import CallDetail
from .widgets.spend_chart import SpendChart

PAGE = 200
EMPTY_HELP = (
    "No calls recorded yet.\n\n"
    "1. Start the proxy:        switch serve\n"
    "2. Point a harness at it:  ANTHROPIC_BASE_URL=http://127.0.0.1:8742 claude\n"
    "   (or: switch claude on / switch codex on / switch langchain env)\n"
    "3. Choose who does what:   switch use hybrid\n\n"
    "Calls appear here as they happen."
)
CALL_WIDTHS = (14, 11, 12, 18, 20, 16, 8, 7, 8, 10, 10, 7, 8, 1)
CALL_COLUMNS = (
    "time",
    "harness",
    "role",
    "requested",
    "served",
    "outcome",
    "in",
    "out",
    "cached",
    "cost",
    "native",
    "TTFT",
    "duration",
    "",
)


@dataclass
class HealthInfo:
    """What the Presets & health tab shows."""

    presets: list[tuple[str, str, bool, str | None]]
    active: str | None
    routes: Text
    keys: dict[str, str | None]
    proxy: str
    problems: list[dict[str, Any]]


class SwitchDashboard(App[None]):
    """Spend, savings, speed and every call, live."""

    CSS_PATH = "app.tcss"
    TITLE = "switch"
    BINDINGS = [
        Binding("o", "show_tab('overview')", "Overview"),
        Binding("c", "show_tab('calls')", "Calls"),
        Binding("s", "show_tab('sessions')", "Sessions"),
        Binding("p", "show_tab('presets')", "Presets"),
        Binding("r", "cycle_range", "Range"),
        Binding("slash", "focus_filter", "Filter", show=False),
        Binding("q", "quit", "Quit"),
    ]

    class Loaded(Message):
        """A worker finished reading the ledger."""

        def __init__(self, kind: str, payload: Any) -> None:
            super().__init__()
            self.kind = kind
            self.payload = payload

    def __init__(
        self,
        ledger_path: Path | None = None,
        clock: Callable[[], float] = now_seconds,
        poll_seconds: float = 1.0,
    ) -> None:
        super().__init__()
        self.ledger = Ledger(ledger_path)
        self.clock = clock
        self.poll_seconds = poll_seconds
        self.range_index = 1
        self.filters = Filters()
        self.call_rows: list[dict[str, Any]] = []
        self.exhausted = False

    # ---- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="overview"):
            with TabPane("Overview", id="overview"):
                with VerticalScroll():
                    yield Static(id="empty", classes="help")
                    yield Static(id="range")
                    with Horizontal(id="cards"):
                        for card in ("spend", "native", "saved", "calls", "speed"):
                            yield Static(id=f"card-{card}", classes="card")
                    yield SpendChart(id="chart")
                    with Horizontal(classes="breakdowns"):
                        yield DataTable(id="by-model", classes="breakdown", cursor_type="row")
                        yield DataTable(id="by-role", classes="breakdown", cursor_type="row")
                    with Horizontal(classes="breakdowns"):
                        yield DataTable(id="by-harness", classes="breakdown", cursor_type="row")
                        yield DataTable(id="by-mapping", classes="breakdown", cursor_type="row")
            with TabPane("Calls", id="calls"):
                with Vertical():
                    with Horizontal(id="filters"):
                        yield Input(placeholder="filter text (model, error)…", id="filter-text")
                        yield Select(
                            [(h, h) for h in ("claude-code", "codex", "langchain", "other")],
                            prompt="harness",
                            id="filter-harness",
                        )
                        yield Select(
                            [(r, r) for r in ("orchestrator", "subagent", "background")],
                            prompt="role",
                            id="filter-role",
                        )
                        yield Select(
                            [
                                (o, o)
                                for o in (
                                    "completed",
                                    "upstream_error",
                                    "transport_error",
                                    "client_cancelled",
                                    "incomplete_stream",
                                    "rejected",
                                )
                            ],
                            prompt="outcome",
                            id="filter-outcome",
                        )
                    yield Static(id="calls-status")
                    yield DataTable(id="calls-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Sessions", id="sessions"):
                yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Presets & health", id="presets"):
                with Horizontal():
                    yield DataTable(id="presets-table", cursor_type="row")
                    with VerticalScroll(id="health-side"):
                        yield Static(id="routes")
                        yield Static(id="health")
        yield Footer()

    def on_mount(self) -> None:
        self._setup_tables()
        self.refresh_data()
        self.set_interval(self.poll_seconds, self.refresh_data)

    def _setup_tables(self) -> None:
        for table_id, label in (
            ("by-model", "served model"),
            ("by-role", "role"),
            ("by-harness", "harness"),
            ("by-mapping", "requested → served"),
        ):
            table = self.query_one(f"#{table_id}", DataTable)
            table.add_columns(label, "spend", "native", "saved", "calls", "cache hit", "cache saved")
        calls = self.query_one("#calls-table", DataTable)
        # Fixed widths: the table looks the same however and whenever its rows arrive.
        for column, width in zip(CALL_COLUMNS, CALL_WIDTHS, strict=True):
            calls.add_column(column, key=column, width=width)
        self.query_one("#sessions-table", DataTable).add_columns(
            "session", "harness", "start", "duration", "calls", "orchestrator", "subagents", "saved", "cache hit"
        )
        self.query_one("#presets-table", DataTable).add_columns("", "preset", "description")

    # ---- polling -------------------------------------------------------------------------------

    @property
    def range_key(self) -> str:
        """The chosen time range."""
        return RANGES[self.range_index][0]

    def refresh_data(self) -> None:
        """Load what the visible tab shows (in a worker thread)."""
        tab = self.query_one(TabbedContent).active
        self._load(tab, self.range_key, Filters(**vars(self.filters)), self._newest_id())

    def _newest_id(self) -> int | None:
        return self.call_rows[0]["id"] if self.call_rows else None

    @work(thread=True, exclusive=True, group="poll")
    def _load(self, tab: str, range_key: str, filters: Filters, newest: int | None) -> None:
        connection = self.ledger.get()
        if tab == "presets":
            self.post_message(self.Loaded("presets", self._health(connection)))
            return
        if connection is None:
            self.post_message(self.Loaded("empty", None))
            return
        try:
            if tab == "overview":
                self.post_message(self.Loaded("overview", load_overview(connection, range_key, self.clock())))
            elif tab == "calls":
                fresh = queries.calls(connection, limit=PAGE, after_id=newest, filters=filters.as_query())
                self.post_message(self.Loaded("calls", (filters, fresh)))
            elif tab == "sessions":
                since = since_of(range_key, self.clock())
                self.post_message(self.Loaded("sessions", queries.sessions(connection, since)))
        except sqlite3.Error as exc:
            self.post_message(self.Loaded("error", str(exc)))

    def _health(self, connection: sqlite3.Connection | None) -> HealthInfo:
        from switch import daemon, keys
        from switch.config import load_settings
        from switch.errors import SwitchError
        from switch.routing.presets import active_name, load_preset, preset_files

        try:
            settings = load_settings()
        except SwitchError as exc:
            return HealthInfo([], None, fmt.plain(f"config.toml is invalid: {exc.message}"), {}, "unknown", [])
        providers = set(settings.providers)
        active = active_name()
        listed: list[tuple[str, str, bool, str | None]] = []
        routes = fmt.plain(f"No preset chosen: every call goes to {settings.defaults.model}.")
        for name in preset_files():
            try:
                preset = load_preset(name, providers)
                listed.append((name, preset.description, name == active, None))
                if name == active:
                    lines = [fmt.labelled(name, preset.description)]
                    for harness in preset.sections:
                        chains = ", ".join(
                            f"{role} → {' → '.join(preset.chain(harness, role))}"
                            for role in ("orchestrator", "subagent", "background")
                        )
                        lines.append(fmt.plain(f"  {harness}: {chains}"))
                    routes = Text("\n").join(lines)
            except SwitchError as exc:
                listed.append((name, "", name == active, exc.message))
        key_sources = keys.sources({name: p.api_key_env for name, p in settings.providers.items()})
        proxy = _proxy_status(daemon.proxy_port(settings.server.port))
        problems = queries.recent_problems(connection) if connection is not None else []
        return HealthInfo(listed, active, routes, key_sources, proxy, problems)

    # ---- results -------------------------------------------------------------------------------

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if not self.is_running or not self.query("#empty"):
            return  # a late result while the app shuts down
        empty = self.query_one("#empty", Static)
        if message.kind == "empty":
            empty.update(EMPTY_HELP)
            empty.display = True
            return
        if message.kind == "overview":
            self._show_overview(message.payload)
        elif message.kind == "calls":
            filters, fresh = message.payload
            if filters == self.filters:
                self._show_new_calls(fresh)
        elif message.kind == "older":
            filters, older = message.payload
            if filters == self.filters:
                self._append_calls(older)
        elif message.kind == "sessions":
            self._show_sessions(message.payload)
        elif message.kind == "presets":
            self._show_health(message.payload)

    def _show_overview(self, overview: Overview) -> None:
        totals = overview.totals
        empty = self.query_one("#empty", Static)
        empty.display = not totals
        if not totals:
            empty.update(f"No calls in this range ({RANGES[self.range_index][1].lower()}). Press r to widen it.")
        label = RANGES[self.range_index][1]
        unpriced = totals.get("unpriced") or 0
        note = f" · [b]{unpriced}[/b] unpriced calls (not counted as $0)" if unpriced else ""
        self.query_one("#range", Static).update(f"[b]{label}[/b] (r: change range){note}")
        spend = fmt.money(totals.get("spend_micros")) if totals else "$0.0000"
        self.query_one("#card-spend", Static).update(f"Spend{'*' if unpriced else ''}\n[b]{spend}[/b]")
        native = fmt.money(totals.get("native_micros")) if totals else "-"
        self.query_one("#card-native", Static).update(f"Native est.\n[b]{native}[/b]")
        saved = fmt.money(totals.get("savings_micros")) if totals else "-"
        cache_hit = fmt.pct(totals.get("cache_hit_rate"))
        self.query_one("#card-saved", Static).update(
            f"Saved {fmt.pct(totals.get('savings_pct'))}\n[b]{saved}[/b] · cache hit {cache_hit}"
        )
        self.query_one("#card-calls", Static).update(
            f"Calls [b]{fmt.count(totals.get('calls'))}[/b]\n{fmt.count(totals.get('errors'))} err"
            f" · {fmt.count(totals.get('fallbacks'))} fb"
        )
        self.query_one("#card-speed", Static).update(
            f"TTFT [b]{fmt.ms(totals.get('median_ttft_ms'))}[/b]\n"
            f"[b]{fmt.rate(totals.get('median_output_tps'))}[/b] out"
        )
        chart_rows = max(3, min(12, self.size.height - 18))
        self.query_one("#chart", SpendChart).show(overview.series, overview.bucket_seconds, self.size.width, chart_rows)
        for table_id, rows in (
            ("by-model", overview.by_model),
            ("by-role", overview.by_role),
            ("by-harness", overview.by_harness),
            ("by-mapping", overview.by_mapping),
        ):
            table = self.query_one(f"#{table_id}", DataTable)
            table.clear()
            for row in rows:
                spent = fmt.money(row["spend_micros"]) + (f" +{row['unpriced']}?" if row["unpriced"] else "")
                table.add_row(
                    fmt.plain(row["grp"]),
                    spent,
                    fmt.money(row["native_micros"]),
                    fmt.money(row["savings_micros"]),
                    fmt.count(row["calls"]),
                    fmt.pct(row["cache_hit_rate"]),
                    fmt.money(row["cache_savings_micros"]),
                )

    def _call_cells(self, row: dict[str, Any]) -> tuple[str | Text, ...]:
        import time as _time

        # Ledger text goes in as `Text`: a plain string cell would be parsed as markup.
        return (
            _time.strftime("%m-%d %H:%M:%S", _time.localtime(row["started_at"])),
            fmt.plain(row["harness"]),
            fmt.plain(row["role"]),
            fmt.plain(row["requested_model"]),
            fmt.plain(row["served_model"]),
            fmt.plain(row["outcome"]),
            fmt.count(row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]),
            fmt.count(row["output_tokens"]),
            fmt.count(row["cache_read_tokens"]),
            fmt.money(row["cost_micros"]),
            fmt.money(row["native_cost_micros"]),
            fmt.ms(row["ttft_ms"]),
            fmt.ms(row["duration_ms"]),
            "↻" if row["fallback_attempt"] else "",
        )

    def _show_new_calls(self, fresh: list[dict[str, Any]]) -> None:
        # Polls can overlap; only rows newer than what is shown are new.
        newest = self.call_rows[0]["id"] if self.call_rows else 0
        fresh = [row for row in fresh if row["id"] > newest]
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
            table.add_row(*self._call_cells(row), key=str(row["id"]))
        if keep_key is not None:
            table.move_cursor(row=table.get_row_index(keep_key), scroll=False)
            table.scroll_to(y=scroll_y + (len(fresh) if scroll_y > 0 else 0), animate=False)
        self._calls_status()

    def _append_calls(self, older: list[dict[str, Any]]) -> None:
        oldest = self.call_rows[-1]["id"] if self.call_rows else None
        older = [row for row in older if oldest is None or row["id"] < oldest]
        table = self.query_one("#calls-table", DataTable)
        if not older:
            self.exhausted = True
        for row in older:
            self.call_rows.append(row)
            table.add_row(*self._call_cells(row), key=str(row["id"]))
        self._calls_status()

    def _calls_status(self) -> None:
        more = "" if self.exhausted else " (scroll down for older)"
        self.query_one("#calls-status", Static).update(
            f"{len(self.call_rows):,} calls loaded{more} · Enter: details · /: filter"
        )

    @on(DataTable.RowHighlighted, "#calls-table")
    def _maybe_page(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if not self.exhausted and self.call_rows and event.cursor_row >= table.row_count - 5:
            self._load_older(Filters(**vars(self.filters)), self.call_rows[-1]["id"])

    @work(thread=True, exclusive=True, group="page")
    def _load_older(self, filters: Filters, before: int) -> None:
        connection = self.ledger.get()
        if connection is None:
            return
        older = queries.calls(connection, limit=PAGE, before_id=before, filters=filters.as_query())
        self.post_message(self.Loaded("older", (filters, older)))

    @on(DataTable.RowSelected, "#calls-table")
    def _open_call(self, event: DataTable.RowSelected) -> None:
        connection = self.ledger.get()
        if connection is None or event.row_key.value is None:
            return
        row = queries.call(connection, int(event.row_key.value))
        if row is not None:
            self.push_screen(CallDetail(row))

    def _show_sessions(self, rows: list[dict[str, Any]]) -> None:
        import time as _time

        table = self.query_one("#sessions-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            duration = (row["ended_at"] or row["started_at"]) - row["started_at"]
            table.add_row(
                fmt.plain(str(row["session_id"])[:18]),
                fmt.plain(row["harness"]),
                _time.strftime("%m-%d %H:%M", _time.localtime(row["started_at"])),
                fmt.ms(duration * 1000),
                fmt.count(row["calls"]),
                f"{fmt.money(row['orchestrator_micros'])} / {fmt.count(row['orchestrator_tokens'])} tok",
                f"{fmt.money(row['subagent_micros'])} / {fmt.count(row['subagent_tokens'])} tok",
                fmt.money(row["savings_micros"]),
                fmt.pct(row["cache_hit_rate"]),
                key=str(row["session_id"]),
            )
        if rows and cursor >= 0:
            table.move_cursor(row=min(cursor, len(rows) - 1), scroll=False)

    @on(DataTable.RowSelected, "#sessions-table")
    def _filter_session(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is None:
            return
        self.filters.session = event.row_key.value
        self._reset_calls()
        self.query_one(TabbedContent).active = "calls"
        self.notify(f"Calls of session {event.row_key.value[:18]}", markup=False)

    def _show_health(self, info: HealthInfo) -> None:
        table = self.query_one("#presets-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for name, description, active, problem in info.presets:
            table.add_row("●" if active else "", fmt.plain(name), fmt.plain(problem or description), key=name)
        if info.presets and cursor >= 0:
            table.move_cursor(row=min(cursor, len(info.presets) - 1), scroll=False)
        self.query_one("#routes", Static).update(
            Text.assemble(info.routes, ("\n\nEnter on a preset makes it active.", "dim"))
        )
        keys = "\n".join(f"  {name}: {source or 'no key'}" for name, source in sorted(info.keys.items()))
        problems = (
            "\n".join(f"  {row['outcome']} {row['served_model']} {row['error'] or ''}"[:100] for row in info.problems)
            or "  none"
        )
        self.query_one("#health", Static).update(
            Text.assemble(
                ("Proxy", "bold"),
                ": ",
                fmt.plain(info.proxy),
                "\n",
                ("Keys", "bold"),
                ":\n",
                fmt.plain(keys),
                "\n",
                ("Recent errors and fallbacks", "bold"),
                ":\n",
                fmt.plain(problems),
            )
        )

    @on(DataTable.RowSelected, "#presets-table")
    def _use_preset(self, event: DataTable.RowSelected) -> None:
        from switch.routing.presets import set_active

        if event.row_key.value is None:
            return
        set_active(event.row_key.value)
        self.notify(f"Active preset: {event.row_key.value}", markup=False)
        self.refresh_data()

    # ---- filters and actions -------------------------------------------------------------------

    def _reset_calls(self) -> None:
        self.call_rows = []
        self.exhausted = False
        self.query_one("#calls-table", DataTable).clear()
        self.refresh_data()

    @on(Input.Changed, "#filter-text")
    def _text_filter(self, event: Input.Changed) -> None:
        self.filters.text = event.value.strip()
        self._reset_calls()

    @on(Select.Changed)
    def _select_filter(self, event: Select.Changed) -> None:
        value = event.value if isinstance(event.value, str) else None
        field = (event.select.id or "").removeprefix("filter-")
        if field in ("harness", "role", "outcome"):
            setattr(self.filters, field, value)
            self._reset_calls()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_data()

    def action_show_tab(self, tab: str) -> None:
        """Switch to a tab."""
        self.query_one(TabbedContent).active = tab

    def action_cycle_range(self) -> None:
        """Next time range."""
        self.range_index = (self.range_index + 1) % len(RANGES)
        self.notify(f"Range: {RANGES[self.range_index][1]}")
        self.refresh_data()

    def action_focus_filter(self) -> None:
        """Jump to the text filter on the Calls tab."""
        self.query_one(TabbedContent).active = "calls"
        self.query_one("#filter-text", Input).focus()


def _proxy_status(port: int) -> str:
    from switch import daemon

    health = daemon.healthy(port, timeout=0.3)
    if health is None:
        return f"not reachable on 127.0.0.1:{port} (start it with `switch serve`)"
    if not daemon.is_ours(health):
        return f"not running for this home: port {port} is held by {daemon.describe_other(health)}"
    return f"running on 127.0.0.1:{port} (up {fmt.ms((health.get('uptime_s') or 0) * 1000)})"


def make_app(
    ledger_path: Path | None = None, clock: Callable[[], float] = now_seconds, poll: float = 1.0
) -> SwitchDashboard:
    """The dashboard app (tests pass a frozen clock and a seeded ledger)."""
    return SwitchDashboard(ledger_path, clock, poll)
