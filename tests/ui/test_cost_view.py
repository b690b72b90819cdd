"""What a cost dashboard user reads: cost columns on screen at 100 columns, money as `-$0.0007`, the
detail view in words, the Saved card whole at every size, spend by role and latency by model over time."""

from __future__ import annotations

import html
import re
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from switch.ui import format as fmt
from switch.ui.app import make_app
from switch.ui.data import BUCKETS, load_trends
from switch.ui.screens.detail import CallDetail
from switch.ui.screenshot import render_svg, save_svg
from textual.widgets import DataTable, Static

from switch.ledger import queries
from switch.ledger import series as ledger_series
from switch.ledger.times import local_bucket_start
from tests.ledger_seed import FROZEN_NOW, seed_ledger
from tests.ui.waiting import ready, settle

SPAN = 3 * 86400


@pytest.fixture
def ledger(isolated_home: Path) -> Path:
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    seed_ledger(path, 300, FROZEN_NOW, SPAN)
    return path


def screen_lines(app: Any) -> list[str]:
    """What the terminal shows, line by line, as plain text."""
    svg = app.export_screenshot()
    texts = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    rows: dict[str, list[str]] = {}
    for match in re.finditer(r'<text [^>]*y="([\d.]+)"[^>]*>(.*?)</text>', svg, flags=re.S):
        rows.setdefault(match.group(1), []).append(html.unescape(re.sub(r"<[^>]+>", "", match.group(2))))
    assert texts
    ordered = sorted(rows.items(), key=lambda item: float(item[0]))
    return ["".join(parts).replace("\xa0", " ") for _, parts in ordered]


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_money_puts_the_sign_before_the_dollar(micros: int) -> None:
    shown = fmt.money(micros)
    assert "$-" not in shown
    assert shown.startswith("-$" if micros < 0 else "$")
    digits = float(shown.lstrip("-$").replace(",", ""))
    places = 4 if abs(micros) < 10_000_000 else 2
    assert abs(digits - abs(micros) / 1_000_000) <= 0.5 * 10**-places + 1e-9


def test_money_examples() -> None:
    assert fmt.money(-700) == "-$0.0007"
    assert fmt.money(700) == "$0.0007"
    assert fmt.money(-12_345_678) == "-$12.35"
    assert fmt.money(None) == "unpriced"


async def test_cost_columns_are_on_screen_at_100_columns(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        lines = screen_lines(app)
        header = next(line for line in lines if " harness " in line and " role " in line)
        assert re.search(r"time\s+harness\s+role\s+served\s+cost\s+native\s+saved", header)
        row = queries.call(sqlite3.connect(ledger), 300)
        assert row is not None
        shown = next(
            line for line in lines if time.strftime("%m-%d %H:%M:%S", time.localtime(row["started_at"])) in line
        )
        saved = row["native_cost_micros"] - row["cost_micros"]
        assert re.search(
            re.escape(fmt.money(row["cost_micros"]))
            + r"\s+"
            + re.escape(fmt.money(row["native_cost_micros"]))
            + r"\s+"
            + re.escape(fmt.money(saved)),
            shown,
        )


async def test_detail_view_labels_are_words_and_money_is_dollars(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, CallDetail)
        row = app.screen.row
        text = str(app.screen.query_one("#detail-body", Static).render())  # all of it, scrolled or not
        assert "_micros" not in text and "ttft_ms" not in text and "served_model" not in text
        assert f"cost: {fmt.money(row['cost_micros'])}" in text
        assert f"native cost: {fmt.money(row['native_cost_micros'])}" in text
        assert f"saved against native: {fmt.money(row['native_cost_micros'] - row['cost_micros'])}" in text
        assert f"time to first token: {fmt.ms(row['ttft_ms'])}" in text
        assert "cost: $" in "\n".join(screen_lines(app))  # on screen without scrolling


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)])
async def test_saved_card_shows_the_cache_hit_figure_in_full(ledger: Path, size: tuple[int, int]) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        totals = queries.spend(sqlite3.connect(ledger), None, queries.parse_time("today", FROZEN_NOW), None)[0]
        hit = f"cache hit {fmt.pct(totals['cache_hit_rate'])}"
        saved = fmt.money(totals["savings_micros"])
        lines = screen_lines(app)
        assert any(hit in line for line in lines), lines[:8]
        assert any(saved in line for line in lines)


def hand_latency(path: Path, since: float, bucket: int) -> dict[tuple[int, str], tuple[float, float]]:
    samples: dict[tuple[int, str], tuple[list[float], list[float]]] = {}
    for started_at, model, ttft, tps in sqlite3.connect(path).execute(
        "SELECT started_at, served_model, ttft_ms, output_tps FROM calls WHERE started_at >= ?", (since,)
    ):
        ttfts, rates = samples.setdefault((local_bucket_start(started_at, bucket), model), ([], []))
        ttfts.append(ttft)
        rates.append(tps)
    return {key: (statistics.median(t), statistics.median(r)) for key, (t, r) in samples.items()}


def test_latency_series_is_the_median_per_bucket_and_model(ledger: Path) -> None:
    since = queries.parse_time("7d", FROZEN_NOW)
    assert since is not None
    expected = hand_latency(ledger, since, BUCKETS["7d"])
    got = ledger_series.latency_series(sqlite3.connect(ledger), since, None, BUCKETS["7d"])
    assert {(b, m): (t, r) for b, m, _n, t, r in got} == pytest.approx(expected)
    assert [(b, m) for b, m, *_ in got] == sorted(expected)


def test_latency_series_samples_a_large_range(ledger: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queries, "MEDIAN_SAMPLE", 30)
    got = ledger_series.latency_series(sqlite3.connect(ledger), None, None, 86400)
    assert 0 < sum(n for _b, _m, n, _t, _r in got) <= 30


async def test_trends_tab_shows_spend_by_role_and_latency_by_model(ledger: Path) -> None:
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(app, pilot)
        await pilot.press("r", "t")  # 7 days
        await settle(app, pilot)
        trends = load_trends(sqlite3.connect(ledger), "7d", FROZEN_NOW)
        roles = {group for _b, group, _m in trends.spend_by_role}
        assert roles == {"orchestrator", "subagent", "background"}
        text = "\n".join(screen_lines(app))
        assert all(f"■ {role}" in text for role in roles)
        since = queries.parse_time("7d", FROZEN_NOW)
        assert since is not None
        expected = hand_latency(ledger, since, BUCKETS["7d"])
        summary = app.query_one("#latency-table", DataTable)
        assert summary.row_count == 3
        for index in range(summary.row_count):
            model, _measured, ttft_last, _spark, tps_last, _spark2 = (str(c) for c in summary.get_row_at(index))
            last_bucket = max(b for b, m in expected if m == model)
            ttft, tps = expected[(last_bucket, model)]
            assert (ttft_last, tps_last) == (fmt.ms(ttft), fmt.rate(tps))
        assert app.query_one("#latency-buckets", DataTable).row_count == len(expected)


async def test_screenshot_renders_the_seeded_dashboard(ledger: Path, tmp_path: Path) -> None:
    svg = await render_svg(ledger, size=(100, 30), keys=("c",), clock=lambda: FROZEN_NOW)
    assert svg.startswith("<svg") and "harness" in svg


def test_screenshot_file(ledger: Path, tmp_path: Path) -> None:
    out = save_svg(ledger, tmp_path / "dash.svg", size=(120, 36), clock=lambda: FROZEN_NOW)
    text = out.read_text()
    totals = queries.spend(sqlite3.connect(ledger), None, queries.parse_time("today", FROZEN_NOW), None)[0]
    assert html.escape(fmt.money(totals["spend_micros"])).replace(" ", "&#160;") in text or fmt.money(
        totals["spend_micros"]
    ) in html.unescape(text)
