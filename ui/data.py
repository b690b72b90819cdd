"""What the dashboard shows, loaded in one go from the read-only ledger (runs in a worker thread)."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from switch.ledger import queries
from switch.ledger import series as ledger_series

RANGES: tuple[tuple[str, str], ...] = (
    ("1h", "Last hour"),
    ("today", "Today"),
    ("7d", "7 days"),
    ("30d", "30 days"),
    ("all", "All time"),
)
BUCKETS = {"1h": 300, "today": 3600, "7d": 86400, "30d": 86400, "all": 86400}


@dataclass
class Overview:
    """Totals, a spend series and breakdowns for one time range."""

    totals: dict[str, Any]
    series: list[tuple[float, str, int]]
    bucket_seconds: int
    by_model: list[dict[str, Any]]
    by_role: list[dict[str, Any]]
    by_harness: list[dict[str, Any]]
    by_mapping: list[dict[str, Any]]
    refused: int = 0
    """Calls refused before any provider (no model, no cost): a count of their own, never a model."""


@dataclass
class Trends:
    """Spend per role and latency per served model, per time bucket, for one time range."""

    spend_by_role: list[tuple[float, str, int]]
    latency: list[tuple[int, str, int, float | None, float | None]]
    bucket_seconds: int


@dataclass
class Filters:
    """What the Calls table is narrowed to."""

    harness: str | None = None
    role: str | None = None
    outcome: str | None = None
    model: str | None = None
    session: str | None = None
    text: str = ""

    def as_query(self) -> dict[str, str]:
        """The filter as column → value for `queries.calls`."""
        query: dict[str, str] = {}
        for column, value in (
            ("harness", self.harness),
            ("role", self.role),
            ("outcome", self.outcome),
            ("served_model", self.model),
            ("session_id", self.session),
        ):
            if value:
                query[column] = value
        if self.text:
            query["text"] = self.text
        return query


@dataclass
class Ledger:
    """A lazily opened read-only ledger connection (None until the file exists)."""

    path: Path | None = None
    connection: sqlite3.Connection | None = field(default=None, repr=False)

    def get(self) -> sqlite3.Connection | None:
        """The connection, opening it once the ledger exists."""
        if self.connection is None:
            self.connection = queries.connect(self.path)
        return self.connection

    def problem(self) -> str | None:
        """Why the ledger file cannot be read, with the fix (None: it reads now); looks at the file afresh."""
        from switch.ledger.db import ledger_problem

        return ledger_problem(self.path)

    def reopen(self) -> None:
        """Forget the connection, so the next read opens the file now at the path (one moved aside is left alone)."""
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()


def since_of(range_key: str, now: float) -> float | None:
    """Start of the range."""
    return queries.parse_time(range_key, now)


def load_overview(connection: sqlite3.Connection, range_key: str, now: float) -> Overview:
    """Everything the Overview screen needs for `range_key`."""
    since = since_of(range_key, now)
    totals = queries.spend(connection, None, since, None)
    bucket = BUCKETS[range_key]
    return Overview(
        totals=totals[0] if totals else {},
        series=ledger_series.series(connection, since, None, bucket, "model"),
        bucket_seconds=bucket,
        by_model=queries.spend(connection, "model", since, None, medians=False),
        by_role=queries.spend(connection, "role", since, None, medians=False),
        by_harness=queries.spend(connection, "harness", since, None, medians=False),
        by_mapping=queries.spend(connection, "requested", since, None, medians=False),
        refused=queries.refused_calls(connection, since, None),
    )


def load_trends(connection: sqlite3.Connection, range_key: str, now: float) -> Trends:
    """Everything the Trends screen needs for `range_key`."""
    since = since_of(range_key, now)
    bucket = BUCKETS[range_key]
    return Trends(
        spend_by_role=ledger_series.series(connection, since, None, bucket, "role"),
        latency=ledger_series.latency_series(connection, since, None, bucket),
        bucket_seconds=bucket,
    )


def clock_label(timestamp: float, bucket_seconds: int) -> str:
    """A short label for a series bucket."""
    moment = datetime.fromtimestamp(timestamp)
    return moment.strftime("%H:%M") if bucket_seconds < 86400 else moment.strftime("%m-%d")


def now_seconds() -> float:
    """The real clock (tests pass a frozen one instead)."""
    return time.time()
