"""What fits the screen and what a filter says: figures never cut at 80x24, headers whole at 120 columns, the
footer whole, the session filter shown and cleared, the Calls count and paging hint honest, the Presets tab."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from switch.ui import format as fmt
from switch.ui.app import make_app
from switch.ui.panes.calls import CALL_COLUMNS, CELL_PADDING, PAGE, CallsPane, column_layout
from switch.ui.panes.overview import BREAKDOWNS, UNPRICED_LEGEND, shorten
from textual.widgets import DataTable, Input, Static

from switch.ledger.columns import COLUMNS
from switch.ledger.db import open_for_writing
from tests.ledger_seed import FROZEN_NOW, seed_ledger, seeded_rows, write_rows
from tests.ui.test_cost_view import screen_lines
from tests.ui.waiting import ready, settle

MONEY = re.compile(r"-?\$[\d,]+(?:\.\d+)?[kMBT]?")


def parse_short(text: str) -> float:
    """A shortened figure (`-$1.2k`, `12.35M`) back to a number."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-$").replace(",", "")
    scale = {"k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}.get(body[-1:], 1)
    return sign * float(body.rstrip("kMBT")) * scale


@given(st.integers(min_value=-(10**21), max_value=10**21), st.integers(min_value=8, max_value=12))
def test_a_money_cell_fits_its_width_and_keeps_its_value(micros: int, width: int) -> None:
    shown = fmt.money_cell(micros, width)
    assert len(shown) <= width
    assert shown.startswith("-$" if micros < 0 else "$")
    dollars = micros / 1_000_000
    # Shortened to fewer places or a larger unit: within half of its last digit, so at most 0.5 % off above $100.
    assert abs(parse_short(shown) - dollars) <= max(0.00005, abs(dollars) * 0.005)


@given(st.integers(min_value=0, max_value=10**14), st.integers(min_value=6, max_value=10))
def test_a_count_cell_fits_its_width_and_keeps_its_value(value: int, width: int) -> None:
    shown = fmt.count_cell(value, width)
    assert len(shown) <= width
    assert abs(parse_short(shown) - value) <= max(0.5, value * 0.005)


@given(st.integers(min_value=10, max_value=400))
def test_the_columns_on_screen_end_exactly_at_the_edge(width: int) -> None:
    layout = column_layout(width)
    assert sorted(name for name, _ in layout) == sorted(name for name, _, _ in CALL_COLUMNS)
    total = 0
    for index, (_name, size) in enumerate(layout):
        total += size + CELL_PADDING
        if total >= width:
            # The last column on screen reaches the edge; the next one starts beyond it, never cut.
            assert total == width or index == 0 or sum(s + CELL_PADDING for _, s in layout) <= width
            break
    used, shown = 0, set()
    for name, size in layout:
        used += size + CELL_PADDING
        if used > width:
            break
        shown.add(name)
    if width >= 80:
        assert {"time", "cost", "native", "saved", "served"} <= shown


def test_long_labels_keep_both_models_and_end_in_an_ellipsis() -> None:
    assert shorten("claude-opus-5-5 → moonshotai/Kimi-K3", 26) == "claude-opus-5-5 → Kimi-K3"
    assert shorten("moonshotai/Kimi-K3", 10) == "Kimi-K3"
    assert shorten("claude-opus-5-5", 10) == "claude-op…"
    cut = shorten("claude-opus-5-5 → zai-org/GLM-5.2", 12)
    assert len(cut) <= 12 and " → " in cut


def big_rows(now: float) -> list[tuple[object, ...]]:
    """Three calls whose figures are too wide for a plain money cell (a runaway agent's bill)."""
    rows = []
    for index, (cost, native) in enumerate(((12_345_678_901, 98_765_432_109), (3_700, 2_000_000_000_000), (0, 12))):
        values = dict(zip(COLUMNS, seeded_rows(1, now, 60, index)[0], strict=True))
        values.update(
            started_at=now - 10 + index,
            cost_micros=cost,
            native_cost_micros=native,
            input_tokens=123_456_789,
            session_id="runaway",
        )
        rows.append(tuple(values[column] for column in COLUMNS))
    return rows


@pytest.fixture
def wide_figures(isolated_home: Path) -> Path:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    seed_ledger(path, 60, FROZEN_NOW - 60, 3600)
    connection = open_for_writing(path)
    write_rows(connection, big_rows(FROZEN_NOW))
    connection.close()
    return path


def money_on(line: str) -> list[str]:
    return MONEY.findall(line)


async def test_at_80x24_every_call_figure_on_screen_is_whole(wide_figures: Path) -> None:
    app = make_app(wide_figures, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        lines = screen_lines(app)
        header = next(line for line in lines if " time " in line)
        assert re.search(r"time\s+served\s+cost\s+native\s+saved", header)
        connection = sqlite3.connect(wide_figures)
        expected = [
            [fmt.money_cell(cost), fmt.money_cell(native), fmt.money_cell(native - cost)]
            for cost, native in connection.execute(
                "SELECT cost_micros, native_cost_micros FROM calls ORDER BY id DESC LIMIT 3"
            )
        ]
        rows = [line for line in lines if re.match(r"\s*\d\d-\d\d \d\d:\d\d:\d\d", line)]
        assert [money_on(line) for line in rows[:3]] == expected
        assert expected[2] == ["$12,346", "$98,765", "$86,420"] and expected[1][1] == "$2.00M"
        # Every figure on screen (cards, breakdowns) is one formatter's whole output, never a cut one.
        await pilot.press("o")
        await settle(app, pilot)
        overview = app.query_one("#overview")
        for table_id, _label in BREAKDOWNS:
            table = overview.query_one(f"#{table_id}", DataTable)
            assert table.virtual_size.width <= table.scrollable_content_region.width, table_id


@pytest.mark.parametrize("width", [80, 100, 120, 160])
async def test_breakdown_headers_and_figures_are_whole(ledger_path: Path, width: int) -> None:
    app = make_app(ledger_path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(width, 60)) as pilot:
        await ready(app, pilot)
        await pilot.press("r")  # 7 days: `+14?` markers make the spend column its widest
        await settle(app, pilot)
        for table_id, _label in BREAKDOWNS:
            table = app.query_one(f"#{table_id}", DataTable)
            assert table.row_count
            assert table.virtual_size.width <= table.scrollable_content_region.width, (table_id, width)
        lines = screen_lines(app)
        headers = [line for line in lines if " spend " in line and " native " in line]
        assert len(headers) == 4 and all(line.count("cache hit") == 1 and "cache saved" in line for line in headers)
        if width >= 120:
            assert any("requested → served" in line for line in headers)
        assert any(UNPRICED_LEGEND in line for line in lines)


@pytest.fixture
def ledger_path(isolated_home: Path) -> Path:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    seed_ledger(path, 300, FROZEN_NOW, 3 * 86400)
    return path


@pytest.mark.parametrize("key", ["o", "c", "t", "s", "p"])
async def test_the_footer_is_whole_at_80_columns(ledger_path: Path, key: str) -> None:
    app = make_app(ledger_path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        await pilot.press(key)
        await settle(app, pilot)
        assert screen_lines(app)[-1].rstrip().endswith("r Range  q Quit")


async def test_a_chosen_session_is_shown_and_escape_brings_every_call_back(ledger_path: Path) -> None:
    app = make_app(ledger_path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await pilot.press("r")
        await pilot.press("s")
        await settle(app, pilot)
        sessions = app.query_one("#sessions-table", DataTable)
        chosen = str(sessions.coordinate_to_cell_key((0, 0)).row_key.value)
        await pilot.press("enter")
        await settle(app, pilot)
        calls = app.query_one("#calls-table", DataTable)
        pane = app.query_one(CallsPane)
        status = str(app.query_one("#calls-status", Static).render())
        assert f"session {chosen}" in status and "Esc: all sessions" in status
        narrowed = calls.row_count
        assert 0 < narrowed <= 40
        # `r` changes the other tabs' range; the text filter is its own filter: neither lifts the session.
        await pilot.press("r")
        await pilot.press("slash", "x")
        await settle(app, pilot)
        assert pane.filters.session == chosen and isinstance(app.focused, Input)
        await pilot.press("backspace", "escape")  # the first Escape only leaves the text filter
        await settle(app, pilot)
        assert pane.filters.session == chosen and app.focused is calls
        await pilot.press("escape")
        await settle(app, pilot)
        assert pane.filters.session is None
        assert calls.row_count == PAGE
        status = str(app.query_one("#calls-status", Static).render())
        assert "session" not in status and "Esc: all sessions" not in status
        await pilot.press("escape")  # nothing left to clear: Escape does no harm
        await settle(app, pilot)
        assert calls.row_count == PAGE


@pytest.mark.parametrize(("count", "shown", "more"), [(1, "1 call loaded", False), (PAGE, "200 calls", False)])
async def test_the_count_is_singular_for_one_and_older_is_offered_only_when_there_are_older(
    isolated_home: Path, count: int, shown: str, more: bool
) -> None:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    seed_ledger(path, count, FROZEN_NOW, 3600)
    app = make_app(path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        status = str(app.query_one("#calls-status", Static).render())
        assert status.startswith(shown + " ") or status.startswith(shown + ",")
        assert ("scroll down for older" in status) is more


async def test_scroll_down_for_older_goes_once_everything_is_loaded(ledger_path: Path) -> None:
    app = make_app(ledger_path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        assert "scroll down for older" in str(app.query_one("#calls-status", Static).render())
        table = app.query_one("#calls-table", DataTable)
        table.move_cursor(row=table.row_count - 1)
        await settle(app, pilot)
        assert table.row_count == 300
        status = str(app.query_one("#calls-status", Static).render())
        assert status.startswith("300 calls loaded") and "scroll down for older" not in status


async def test_the_unpriced_legend_shows_only_with_unpriced_calls(isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    connection = open_for_writing(path)
    write_rows(connection, [row for row in seeded_rows(30, FROZEN_NOW, 600) if row[COLUMNS.index("cost_micros")]])
    connection.close()
    app = make_app(path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        assert not app.query_one("#unpriced-legend", Static).display


async def test_presets_tab_says_switch_up_wraps_descriptions_and_dates_problems(ledger_path: Path) -> None:
    from switch.routing.presets import SHIPPED_DIR

    app = make_app(ledger_path, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        await pilot.press("p")
        await settle(app, pilot)
        health = str(app.query_one("#health", Static).render())
        assert "start it with `switch up`" in health and "switch serve" not in health
        table = app.query_one("#presets-table", DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width
        import tomllib

        for preset in SHIPPED_DIR.glob("*.toml"):
            description = tomllib.loads(preset.read_text())["description"]
            cell = str(table.get_cell(preset.stem, "description"))
            assert " ".join(cell.split()) == description, preset.stem
        connection = sqlite3.connect(ledger_path)
        started, outcome = connection.execute(
            "SELECT started_at, outcome FROM calls WHERE outcome != 'completed' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        import time

        assert f"{time.strftime('%m-%d %H:%M:%S', time.localtime(started))} {outcome}" in health
