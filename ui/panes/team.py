"""The Team tab (only with a [team] table in config.toml): the whole team's spend and savings by member and by
role over the chosen range, cache hit rate, and TTFT p50 by served model, read from the team's PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from .. import format as fmt
from ..data import RANGES, Ledger, since_of
from .base import LedgerPane

RANGE_LABELS = dict(RANGES)
MIN_INTERVAL = 15.0
"""Seconds between two reads of the same range: the team server is shared, the figures move slowly."""


@dataclass(frozen=True)
class TeamReport:
    """What the Team tab shows for one range."""

    total: dict[str, Any] | None
    by_member: list[dict[str, Any]]
    by_role: list[dict[str, Any]]
    by_model: list[dict[str, Any]]


def read_team(team: Any, connection: Any, since: float | None) -> TeamReport:
    """The team's figures from `since` on (blocking: run it off the UI thread)."""
    from switch.team.reports import spend

    total = spend(connection, None, since, None, medians=False)
    return TeamReport(
        total[0] if total else None,
        spend(connection, "member", since, None, medians=False),
        spend(connection, "role", since, None, medians=False),
        spend(connection, "model", since, None),
    )


class TeamPane(LedgerPane):
    """Spend, savings, cache and speed across the team."""

    class Loaded(Message):
        """The team's figures (or why they cannot be read) for `range_key`."""

        bubble = False

        def __init__(self, report: TeamReport | None, problem: str | None, range_key: str) -> None:
            super().__init__()
            self.report = report
            self.problem = problem
            self.range_key = range_key

    def __init__(self, ledger: Ledger, clock: Callable[[], float], team: Any) -> None:
        super().__init__("Team", ledger, clock, pane_id="team")
        self.team = team
        self._connection: Any = None
        self._last: tuple[str, float] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="team-summary")
            yield Static("[b]By member[/b]", classes="heading")
            yield DataTable(id="team-members", cursor_type="row", zebra_stripes=True)
            yield Static("[b]By role[/b]", classes="heading")
            yield DataTable(id="team-roles", cursor_type="row", zebra_stripes=True)
            yield Static("[b]Speed by served model[/b]", classes="heading")
            yield DataTable(id="team-models", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        for table_id, first in (("#team-members", "member"), ("#team-roles", "role")):
            self.query_one(table_id, DataTable).add_columns(
                first, "spend", "native", "saved", "saved %", "calls", "cache hit"
            )
        self.query_one("#team-models", DataTable).add_columns("served model", "calls", "TTFT p50", "tok/s p50")

    def reload(self, range_key: str) -> None:
        """Read the team's figures for `range_key` (at most every MIN_INTERVAL seconds for the same range)."""
        now = time.monotonic()
        if self._last is not None and self._last[0] == range_key and now - self._last[1] < MIN_INTERVAL:
            return
        self._last = (range_key, now)
        self._load(range_key)

    @work(thread=True, exclusive=True, group="team")
    def _load(self, range_key: str) -> None:
        from switch.team.server import connect, describe

        try:
            if self._connection is None or self._connection.closed:
                self._connection = connect(self.team)
            report = read_team(self.team, self._connection, since_of(range_key, self.clock()))
        except Exception as exc:  # noqa: BLE001 - any server failure is shown and retried, never a crash
            message = getattr(exc, "message", None) or describe(exc, self.team)
            if self._connection is not None:
                self._connection.close()
            self._connection = None
            self._last = None
            self.post_message(self.Loaded(None, message, range_key))
            return
        self.post_message(self.Loaded(report, None, range_key))

    @on(Loaded)
    def _show(self, message: Loaded) -> None:
        summary = self.query_one("#team-summary", Static)
        if message.problem is not None:
            summary.update(fmt.plain(f"Team ledger unreachable: {message.problem}"))
            return
        report = message.report
        assert report is not None
        label = RANGE_LABELS[message.range_key]
        total = report.total
        if total is None:
            summary.update(f"[b]{label}[/b] (r: change range) · no team calls in this range")
        else:
            summary.update(
                f"[b]{label}[/b] (r: change range) · {len(report.by_member)} members · spend "
                f"{fmt.money(total['spend_micros'])} · native {fmt.money(total['native_micros'])} · saved "
                f"{fmt.money(total['savings_micros'])} · cache hit {fmt.pct(total['cache_hit_rate'])}"
            )
        for table_id, rows in (("#team-members", report.by_member), ("#team-roles", report.by_role)):
            table = self.query_one(table_id, DataTable)
            table.clear()
            for row in rows:
                table.add_row(
                    fmt.plain(row["grp"]),
                    fmt.money(row["spend_micros"]),
                    fmt.money(row["native_micros"]),
                    fmt.money(row["savings_micros"]),
                    fmt.pct(row["savings_pct"]),
                    fmt.count(row["calls"]),
                    fmt.pct(row["cache_hit_rate"]),
                )
        models = self.query_one("#team-models", DataTable)
        models.clear()
        for row in report.by_model:
            models.add_row(
                fmt.plain(row["grp"]),
                fmt.count(row["calls"]),
                fmt.ms(row["median_ttft_ms"]),
                fmt.rate(row["median_output_tps"]),
            )

    def on_unmount(self) -> None:
        if self._connection is not None:
            self._connection.close()
