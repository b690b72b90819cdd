"""Focus and keys as a user meets them: every tab opens on its table, Enter opens a call from anywhere
on the Calls tab, Escape leaves the filter, `q` quits except while typing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from switch.ui.app import make_app
from switch.ui.screens.detail import CallDetail
from textual.widgets import DataTable, Input, Select

from tests.ledger_seed import FROZEN_NOW, seed_ledger
from tests.ui.waiting import ready, settle


@pytest.fixture
def ledger(isolated_home: Path) -> Path:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")  # nothing listens on port 9
    path = isolated_home / "ledger.db"
    seed_ledger(path, 300, FROZEN_NOW, 3 * 86400)
    return path


def first_call_id(app: Any) -> int:
    table = app.query_one("#calls-table", DataTable)
    return int(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value)


@pytest.mark.parametrize(
    ("key", "table_id"),
    [("c", "calls-table"), ("t", "latency-table"), ("s", "sessions-table"), ("p", "presets-table")],
)
async def test_focus_lands_on_the_table_when_a_tab_opens(ledger: Path, key: str, table_id: str) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.focused is not None and app.focused.id == "by-model"  # the Overview's first table
        await pilot.press(key)
        await settle(app, pilot)
        assert app.focused is not None and app.focused.id == table_id
        await pilot.press("o")
        await settle(app, pilot)
        assert app.focused is not None and app.focused.id == "by-model"


async def test_enter_right_after_opening_the_calls_tab_shows_the_highlighted_call(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        await pilot.press("down", "down", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, CallDetail)
        table = app.query_one("#calls-table", DataTable)
        assert table.cursor_row == 2
        assert app.screen.row["id"] == first_call_id(app)


@pytest.mark.parametrize("select_id", ["filter-harness", "filter-role", "filter-outcome"])
async def test_enter_on_a_filter_dropdown_opens_the_highlighted_call(ledger: Path, select_id: str) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        app.query_one(f"#{select_id}", Select).focus()
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, CallDetail)
        assert app.screen.row["id"] == first_call_id(app)


async def test_enter_in_an_open_dropdown_still_picks_the_option(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        harness = app.query_one("#filter-harness", Select)
        harness.focus()
        await pilot.press("space")  # opens the dropdown
        await settle(app, pilot)
        assert harness.expanded
        await pilot.press("down", "down", "enter")  # the prompt, then claude-code, then codex
        await settle(app, pilot)
        assert not isinstance(app.screen, CallDetail)
        assert harness.value == "codex"
        table = app.query_one("#calls-table", DataTable)
        assert {str(table.get_row_at(i)[1]) for i in range(table.row_count)} == {"codex"}


async def test_enter_in_the_text_filter_goes_back_to_the_filtered_list_then_opens_a_call(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("slash")
        await settle(app, pilot)
        assert isinstance(app.focused, Input)
        await pilot.press(*"GLM")
        await pilot.press("enter")
        await settle(app, pilot)
        table = app.query_one("#calls-table", DataTable)
        assert app.focused is table
        assert not isinstance(app.screen, CallDetail)
        assert {str(table.get_row_at(i)[3]) for i in range(table.row_count)} == {"zai-org/GLM-5.2"}
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, CallDetail)
        assert app.screen.row["served_model"] == "zai-org/GLM-5.2"


async def test_q_types_in_the_filter_and_escape_then_q_quits(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("slash")
        await settle(app, pilot)
        await pilot.press("q")
        await settle(app, pilot)
        assert app.query_one("#filter-text", Input).value == "q"
        assert app.is_running
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.focused is app.query_one("#calls-table", DataTable)
        await pilot.press("q")
        await pilot.pause(0.1)
        assert app.return_code == 0 and not app.is_running


async def test_escape_leaves_a_filter_dropdown_and_q_quits_from_it(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        app.query_one("#filter-role", Select).focus()
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.focused is app.query_one("#calls-table", DataTable)
        app.query_one("#filter-role", Select).focus()
        await pilot.press("q")
        await pilot.pause(0.1)
        assert app.return_code == 0 and not app.is_running


@pytest.mark.parametrize("key", ["o", "c", "t", "s", "p"])
async def test_q_quits_from_every_tab(ledger: Path, key: str) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        await pilot.press(key)
        await settle(app, pilot)
        await pilot.press("q")
        await pilot.pause(0.1)
        assert app.return_code == 0 and not app.is_running
