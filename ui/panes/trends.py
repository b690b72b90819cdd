"""The Trends tab: spend over time by role, and latency (TTFT, output speed) over time by served model."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from .. import format as fmt
from ..data import RANGES, Ledger, Trends, clock_label, load_trends
from ..widgets.measured_table import MeasuredTable
from ..widgets.spend_chart import SpendChart
from .base import LedgerPane

RANGE_LABELS = dict(RANGES)
TREND_BUCKETS = 24  # the sparklines show at most this many of the most recent buckets
BUCKET_NAMES = {300: "5-minute", 3600: "hourly", 86400: "daily"}
LATENCY_HEADERS = ("served model", "measured", "TTFT last", "TTFT over time", "tok/s last", "tok/s over time")
BUCKET_HEADERS = ("time", "served model", "measured", "TTFT", "tok/s")


class TrendsPane(LedgerPane):
    """How spend per role and speed per model moved across the chosen time range."""

    class Loaded(Message):
        """The trends of `range_key` were read; None when nothing has been recorded yet."""

        bubble = False

        def __init__(self, trends: Trends | None, range_key: str) -> None:
            super().__init__()
            self.trends = trends
            self.range_key = range_key

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Trends", ledger, clock, pane_id="trends")

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="trends-range")
            yield Static("[b]Spend by role[/b]", classes="heading")
            yield SpendChart(id="role-chart")
            yield Static("[b]Latency by served model[/b] (median per bucket, oldest → newest)", classes="heading")
            yield MeasuredTable(id="latency-table", cursor_type="row", max_rows=13)
            yield MeasuredTable(id="latency-buckets", cursor_type="row", zebra_stripes=True, max_rows=13)

    def reload(self, range_key: str) -> None:
        """Read the trends of `range_key`."""
        self._load(range_key)

    @work(thread=True, exclusive=True, group="trends")
    def _load(self, range_key: str) -> None:
        try:
            connection = self.ledger.get()
            trends = None if connection is None else load_trends(connection, range_key, self.clock())
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.Loaded(trends, range_key))

    @on(Loaded)
    def _show(self, message: Loaded) -> None:
        label = RANGE_LABELS[message.range_key]
        trends = message.trends
        if trends is None:
            self.query_one("#trends-range", Static).update("No calls recorded yet.")
            return
        buckets = BUCKET_NAMES.get(trends.bucket_seconds, f"{trends.bucket_seconds} s")
        self.query_one("#trends-range", Static).update(f"[b]{label}[/b] (r: change range) · {buckets} buckets")
        size = self.app.size
        chart_rows = max(3, min(12, size.height - 16))
        self.query_one("#role-chart", SpendChart).show(
            trends.spend_by_role, trends.bucket_seconds, size.width, chart_rows
        )
        self._show_latency(trends)

    def _show_latency(self, trends: Trends) -> None:
        timeline = sorted({bucket for bucket, *_ in trends.latency})[-TREND_BUCKETS:]
        by_model: dict[str, dict[int, tuple[int, float | None, float | None]]] = {}
        for bucket, model, calls, ttft, tps in trends.latency:
            by_model.setdefault(model, {})[bucket] = (calls, ttft, tps)
        summary_rows: list[list[str | Text]] = []
        for model, points in sorted(by_model.items(), key=lambda item: -sum(p[0] for p in item[1].values())):
            recent = [points.get(bucket) for bucket in timeline]
            last = next((point for point in reversed(recent) if point is not None), None)
            summary_rows.append(
                [
                    fmt.plain(model),
                    fmt.count(sum(point[0] for point in points.values())),
                    fmt.ms(last[1] if last else None),
                    fmt.sparkline([point[1] if point else None for point in recent]),
                    fmt.rate(last[2] if last else None),
                    fmt.sparkline([point[2] if point else None for point in recent]),
                ]
            )
        self.query_one("#latency-table", MeasuredTable).fill(LATENCY_HEADERS, summary_rows)
        self.query_one("#latency-buckets", MeasuredTable).fill(
            BUCKET_HEADERS,
            [
                [
                    clock_label(bucket, trends.bucket_seconds),
                    fmt.plain(model),
                    fmt.count(calls),
                    fmt.ms(ttft),
                    fmt.rate(tps),
                ]
                for bucket, model, calls, ttft, tps in reversed(trends.latency)
            ],
        )
