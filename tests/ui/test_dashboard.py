"""The dashboard on a seeded ledger with a frozen clock: totals, filters, details, presets, live rows."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from switch.ui import format as fmt
from switch.ui.app import make_app
from switch.ui.panes.calls import CallsPane
from switch.ui.panes.overview import EMPTY_HELP
from switch.ui.screens.detail import CallDetail
from textual.widgets import DataTable, Select, Static

from switch.routing.presets import active_name
from tests.ledger_seed import FROZEN_NOW, seed_ledger, seeded_rows, write_rows
from tests.ui.waiting import ready, settle

ROWS = 300
SPAN = 3 * 86400


@pytest.fixture
def ledger(isolated_home: Path) -> Path:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")  # nothing listens on port 9
    path = isolated_home / "ledger.db"
    seed_ledger(path, ROWS, FROZEN_NOW, SPAN)
    return path


def expected_spend(path: Path, since: float | None) -> int:
    connection = sqlite3.connect(path)
    total = 0
    for started_at, cost in connection.execute("SELECT started_at, cost_micros FROM calls"):
        if (since is None or started_at >= since) and cost is not None:
            total += cost
    connection.close()
    return total


def card(app: Any, name: str) -> str:
    return str(app.query_one(f"#card-{name}", Static).render())


def column(table: DataTable[Any], index: int) -> list[str]:
    """The texts of column `index`, top row first."""
    return [str(table.get_row_at(row)[index]) for row in range(table.row_count)]


async def open_table(app: Any, pilot: Any, key: str, table_id: str) -> DataTable[Any]:
    """Press `key` for a tab and return its table `#table_id` once the tab has loaded."""
    await pilot.press(key)
    await settle(app, pilot)
    return app.query_one(f"#{table_id}", DataTable)


async def choose_preset(app: Any, pilot: Any, name: str) -> tuple[DataTable[Any], list[str]]:
    """Choose preset `name` on the Presets tab; return its table and the preset names row by row."""
    table = await open_table(app, pilot, "p", "presets-table")
    names = column(table, 1)
    table.focus()
    table.move_cursor(row=names.index(name))
    await pilot.press("enter")
    await settle(app, pilot)
    return table, names


async def test_time_ranges_change_totals_to_hand_computed_values(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=60)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        from switch.ledger.queries import parse_time

        today = expected_spend(ledger, parse_time("today", FROZEN_NOW))
        assert fmt.money(today) in card(app, "spend")
        await pilot.press("r")  # 7 days: the whole seeded span
        await settle(app, pilot)
        assert fmt.money(expected_spend(ledger, None)) in card(app, "spend")
        unpriced = sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM calls WHERE cost_micros IS NULL").fetchone()[0]
        assert unpriced > 0 and f"{unpriced} unpriced" in str(app.query_one("#range", Static).render())
        assert card(app, "spend").startswith("Spend*")
        await pilot.press("r", "r", "r")  # back round to the last hour
        await settle(app, pilot)
        assert fmt.money(expected_spend(ledger, FROZEN_NOW - 3600)) in card(app, "spend")


async def test_filters_and_detail_view(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=60)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        table = await open_table(app, pilot, "c", "calls-table")
        assert table.row_count == 200  # the first page
        app.query_one("#filter-harness", Select).value = "codex"
        await settle(app, pilot)
        assert table.row_count == ROWS // 3
        assert set(column(table, 1)) == {"codex"}
        table.focus()
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, CallDetail)
        assert app.screen.row["harness"] == "codex"
        assert app.screen.row["id"] == int(table.coordinate_to_cell_key((0, 0)).row_key.value or 0)
        await pilot.press("escape")
        assert not isinstance(app.screen, CallDetail)


async def test_paging_loads_older_calls(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=60)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        table = await open_table(app, pilot, "c", "calls-table")
        table.focus()
        table.move_cursor(row=table.row_count - 1)
        await settle(app, pilot)
        assert table.row_count == ROWS


async def test_sessions_enter_filters_calls(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=60)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await pilot.press("r")  # 7 days
        sessions = await open_table(app, pilot, "s", "sessions-table")
        assert sessions.row_count == ROWS // 40 + 1
        sessions.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        calls = app.query_one("#calls-table", DataTable)
        assert 0 < calls.row_count <= 40
        assert app.query_one(CallsPane).filters.session is not None


async def test_switching_preset_from_dashboard_writes_active_preset(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=60)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        table, names = await choose_preset(app, pilot, "kimi-k3")
        assert active_name() == "kimi-k3"
        assert table.get_row_at(names.index("kimi-k3"))[0] == "●"


async def test_empty_ledger_shows_how_to_start(isolated_home: Path) -> None:
    app = make_app(isolated_home / "ledger.db", clock=lambda: FROZEN_NOW, poll=60)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert str(app.query_one("#empty", Static).render()) == EMPTY_HELP


async def test_new_calls_written_by_another_process_appear(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=0.2)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        table = await open_table(app, pilot, "c", "calls-table")
        before = table.row_count
        writer = (
            "import sys; sys.path.insert(0, '.')\n"
            "from tests.ledger_seed import seeded_rows\n"
            "from switch.ledger.db import open_for_writing\n"
            "from switch.ledger.columns import INSERT\n"
            f"c = open_for_writing(__import__('pathlib').Path({str(ledger)!r}))\n"
            f"rows = seeded_rows(5, {FROZEN_NOW + 60}, 60)\n"
            "with c:\n    c.executemany(INSERT, rows)\n"
        )
        subprocess.run([sys.executable, "-c", writer], check=True, cwd=Path(__file__).parents[2])
        for _ in range(40):
            await pilot.pause(0.1)
            if table.row_count == before + 5:
                break
        assert table.row_count == before + 5
        assert table.get_row_at(0)[0].startswith("11-18")


MARKUP_LIKE = ("[/v1/chat]", "[bold]", "[link=x]")


def ledger_text_row(now: float) -> tuple[object, ...]:
    """One call whose recorded texts look like Textual markup (error bodies often quote paths)."""
    from switch.ledger.columns import COLUMNS

    values = dict(zip(COLUMNS, seeded_rows(1, now, 60)[0], strict=True))
    values.update(
        harness="[bold]h",
        role="[/v1/chat]",
        preset="[link=x]p",
        requested_model="[link=x]req",
        provider="[/v1/chat]",
        served_model="[bold]srv",
        session_id="[/v1/chat]s",
        outcome="upstream_error",
        http_status=404,
        error="upstream said 404 for [/v1/chat] with [bold] and [link=x]",
    )
    return tuple(values[column] for column in COLUMNS)


def screen_text(app: Any) -> str:
    """What the terminal shows, as plain text."""
    import html
    import re

    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def shown_eventually(app: Any, pilot: Any, text: str, timeout: float = 20.0) -> str:
    """The screen once it shows `text` (toasts are drawn a refresh after they are raised)."""
    import time

    deadline = time.monotonic() + timeout
    shown = screen_text(app)
    while text not in shown and time.monotonic() < deadline:
        await pilot.pause(0.05)
        shown = screen_text(app)
    return shown


async def test_ledger_and_preset_texts_are_shown_literally_never_as_markup(isolated_home: Path) -> None:
    from switch.ledger.db import open_for_writing

    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "odd.toml").write_text(
        'description = "routes [/v1/chat] [bold]"\n[default]\norchestrator = "native"\n'
    )
    path = isolated_home / "ledger.db"
    seed_ledger(path, 30, FROZEN_NOW, 3600)
    connection = open_for_writing(path)
    write_rows(connection, [ledger_text_row(FROZEN_NOW - 30)])
    connection.close()
    app = make_app(path, clock=lambda: FROZEN_NOW, poll=0.1)  # refreshes keep re-rendering the texts
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(app, pilot)
        shown = screen_text(app)
        assert "[bold]srv" in shown and "[link=x]req" in shown and "[bold]h" in shown  # breakdowns
        table = await open_table(app, pilot, "c", "calls-table")
        shown = screen_text(app)
        assert "[bold]h" in shown and "[/v1/chat]" in shown and "[link=x]req" in shown and "[bold]srv" in shown
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, CallDetail)
        shown = screen_text(app)
        assert "upstream said 404 for [/v1/chat] with [bold] and [link=x]" in shown
        assert "[/v1/chat]s" in shown and "[link=x]p" in shown
        await pilot.press("escape")
        sessions = await open_table(app, pilot, "s", "sessions-table")
        assert "[/v1/chat]s" in screen_text(app)
        sessions.focus()
        sessions.move_cursor(row=column(sessions, 0).index("[/v1/chat]s"))
        await pilot.press("enter")  # filters the calls by that session, with a notification naming it
        await settle(app, pilot)
        assert app.query_one(CallsPane).filters.session == "[/v1/chat]s"
        await pilot.press("p")
        await settle(app, pilot)
        shown = screen_text(app)
        assert "routes [/v1/chat] [bold]" in shown
        assert "for [/v1/chat] with [bold]" in shown  # recent errors
        for _ in range(3):  # several refreshes of every text
            await pilot.pause(0.15)
            await settle(app, pilot)


async def test_an_unreadable_ledger_is_reported_once_and_presets_still_work(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switch.ui.app import SwitchDashboard

    monkeypatch.setattr(SwitchDashboard, "NOTIFICATION_TIMEOUT", 600)  # the toast outlives a slow machine
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    path.write_bytes(b"not a database, just bytes " * 512)
    app = make_app(path, clock=lambda: FROZEN_NOW, poll=3600)
    toasts: list[str] = []
    notify = app.notify
    monkeypatch.setattr(app, "notify", lambda message, **options: (toasts.append(message), notify(message, **options)))
    async with app.run_test(size=(200, 60), notifications=True) as pilot:
        await settle(app, pilot)
        for _ in range(3):  # every poll fails the same way
            app.refresh_data()
            await settle(app, pilot)
        # The real cause and the fix, not SQLite's words alone; once as a toast, and in a banner that stays.
        problem = f"Could not read the ledger: {path}: is not an SQLite database"
        assert [text for text in toasts if text.startswith("Could not read")] == [toasts[0]]
        assert toasts[0].startswith(problem) and "move it aside" in toasts[0]
        banner = str(app.query_one("#ledger-problem", Static).render())
        assert banner.startswith(f"Ledger unreadable: {path}: is not an SQLite database") and "move it aside" in banner
        table = await open_table(app, pilot, "p", "presets-table")
        assert "kimi-k3" in column(table, 1)
        assert "Proxy: not reachable on 127.0.0.1:9" in screen_text(app)
        assert app.query_one("#ledger-problem", Static).display

        # The fix as the banner gives it: the old file moved aside, a new ledger started there.
        path.rename(path.with_name("ledger.db.old"))
        seed_ledger(path, 5, FROZEN_NOW, 1800)
        await pilot.press("o")
        app.refresh_data()
        await settle(app, pilot)
        assert not app.query_one("#ledger-problem", Static).display
        assert "5" in card(app, "calls")
        assert path.with_name("ledger.db.old").read_bytes() == b"not a database, just bytes " * 512


async def test_choosing_a_broken_preset_leaves_the_active_one_like_switch_use(
    ledger: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switch.ui.app import SwitchDashboard

    from switch.routing.presets import set_active

    monkeypatch.setattr(SwitchDashboard, "NOTIFICATION_TIMEOUT", 600)
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "broken.toml").write_text('[default]\norchestrator = "nowhere/model"\n')
    set_active("kimi-k3")
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await ready(app, pilot)
        table, names = await choose_preset(app, pilot, "broken")
        assert active_name() == "kimi-k3"
        assert "Preset not changed" in await shown_eventually(app, pilot, "Preset not changed")
        assert table.get_row_at(names.index("kimi-k3"))[0] == "●"


async def test_quitting_while_the_refresh_timer_runs_ends_cleanly(isolated_home: Path) -> None:
    # Textual removes the panes before it stops the app's timers; a refresh in between found no pane for
    # the active tab and the dashboard ended with a traceback (a CI failure). A 1 ms poll makes the tick
    # land in that gap on every quit.
    path = isolated_home / "ledger.db"
    seed_ledger(path, 30, FROZEN_NOW, 3600)
    app = make_app(path, clock=lambda: FROZEN_NOW, poll=0.001)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("p")
        await pilot.pause(0.2)
    assert app.return_code is None  # Textual sets 1 when a handler raised (and run_test re-raises it)
