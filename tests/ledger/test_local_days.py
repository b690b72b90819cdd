"""Spend by day is spend by *local* day in every time zone, including those a half or three
quarters of an hour from UTC, across a daylight-saving change, and for ledgers made before."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from switch.cli import app
from switch.config import Settings
from switch.ledger import queries
from switch.ledger import series as ledger_series
from switch.ledger.columns import COLUMNS
from switch.ledger.migrations import migrate
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from tests.ledger_seed import kimi_call, pricer_for

ZONES = ["UTC", "Asia/Kolkata", "America/St_Johns", "Asia/Kathmandu"]
# St. John's turns its clocks back on 1 November 2026: the calls span that night.
START = datetime(2026, 10, 29, tzinfo=UTC).timestamp()
SPAN = 5 * 86400


@contextmanager
def local_zone(name: str) -> Iterator[None]:
    """Run the block with the process's local time zone set to `name` (SQLite's too)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def calls(count: int, seed: int) -> list[CallRecord]:
    """Calls spread over the span, many of them within minutes of some zone's midnight."""
    rng = random.Random(seed)
    moments = [START + rng.random() * SPAN for _ in range(count // 2)]
    quarter_hours = [START + rng.randrange(SPAN // 900) * 900 for _ in range(count - len(moments))]
    moments += [edge + rng.uniform(-120, 120) for edge in quarter_hours]
    return [
        kimi_call(
            moment,
            role=rng.choice(["orchestrator", "subagent"]),
            input_tokens=rng.randrange(1, 5000),
            output_tokens=rng.randrange(1, 500),
        )
        for moment in moments
    ]


def record_all(database: Path, records: list[CallRecord]) -> None:
    """Write `records` the way the proxy does: through the recorder and its rollups."""
    recorder = Recorder(pricer_for(Settings()), database=database, spill=database.with_suffix(".spill"), batch_size=97)
    recorder.start()
    for record in records:
        recorder.submit(record)
    recorder.close(timeout=60)
    assert recorder.written == len(records)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    database = tmp_path_factory.mktemp("local-days") / "ledger.db"
    record_all(database, calls(3000, seed=14))
    return database


def by_local_day(connection: sqlite3.Connection, since: float | None, until: float | None) -> dict[str, list[int]]:
    """[calls, spend] per local day, added up in Python from the raw rows."""
    totals: dict[str, list[int]] = {}
    for started_at, cost in connection.execute("SELECT started_at, cost_micros FROM calls"):
        if (since is None or started_at >= since) and (until is None or started_at < until):
            day = datetime.fromtimestamp(started_at).strftime("%Y-%m-%d")
            entry = totals.setdefault(day, [0, 0])
            entry[0] += 1
            entry[1] += cost
    return totals


def reported(groups: list[dict[str, Any]]) -> dict[str, list[int]]:
    return {group["grp"]: [group["calls"], group["spend_micros"]] for group in groups}


moments = st.one_of(st.none(), st.floats(START - 86400, START + SPAN + 86400))


@pytest.mark.parametrize("zone", ZONES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(since=moments, until=moments)
def test_spend_by_day_is_the_sum_of_the_calls_of_each_local_day(
    ledger: Path, zone: str, since: float | None, until: float | None
) -> None:
    connection = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        with local_zone(zone):
            expected = by_local_day(connection, since, until)
            assert reported(queries.spend(connection, "day", since, until, medians=False)) == expected
    finally:
        connection.close()


@pytest.mark.parametrize("zone", ZONES)
def test_switch_spend_by_day_in_the_local_zone_even_for_a_ledger_made_before(isolated_home: Path, zone: str) -> None:
    database = isolated_home / "ledger.db"
    records = calls(400, seed=7)
    pricer = pricer_for(Settings())
    connection = sqlite3.connect(database)
    migrate(connection, upto=2)
    # Only the columns a version-2 ledger had: later migrations add the others.
    existing = {row[1] for row in connection.execute("PRAGMA table_info(calls)")}
    columns = [column for column in COLUMNS if column in existing]
    with connection:
        connection.executemany(
            f"INSERT INTO calls ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            [tuple(row[column] for column in columns) for row in map(pricer.row, records[:200])],
        )
    migrate(connection, upto=3)  # hourly rollups built from those calls: a ledger as switch made them then
    connection.close()
    with local_zone(zone):
        first = CliRunner().invoke(app, ["spend", "--by", "day", "--json"])  # migrates the old ledger
        assert first.exit_code == 0, first.output
        record_all(database, records[200:])  # and the writer adds to the new rollups
        result = CliRunner().invoke(app, ["spend", "--by", "day", "--json"])
        assert result.exit_code == 0, result.output
        connection = sqlite3.connect(database)
        try:
            expected = by_local_day(connection, None, None)
        finally:
            connection.close()
    assert len(expected) >= 5
    assert sum(count for count, _ in expected.values()) == 400
    assert reported(json.loads(result.output)["groups"]) == expected


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("bucket_seconds", [300, 3600, 86400])
def test_the_dashboard_series_buckets_start_at_local_midnight(ledger: Path, zone: str, bucket_seconds: int) -> None:
    connection = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        with local_zone(zone):
            series = ledger_series.series(connection, None, None, bucket_seconds, "role")
            expected: dict[tuple[int, str], int] = {}
            for started_at, role, cost in connection.execute("SELECT started_at, role, cost_micros FROM calls"):
                moment = datetime.fromtimestamp(started_at)
                midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
                offset = 0 if bucket_seconds == 86400 else (started_at - midnight) // bucket_seconds * bucket_seconds
                key = (int(midnight + offset), role)
                expected[key] = expected.get(key, 0) + cost
            starts = {datetime.fromtimestamp(bucket) for bucket, _, _ in series}
    finally:
        connection.close()
    assert {(bucket, role): micros for bucket, role, micros in series} == expected
    assert [bucket for bucket, _, _ in series] == sorted(bucket for bucket, _, _ in series)
    assert all(
        start.second == 0 and start.minute % (bucket_seconds // 60 if bucket_seconds < 3600 else 60) == 0
        for start in starts
    )
    if bucket_seconds == 86400:
        assert all(start.hour == 0 and start.minute == 0 for start in starts)
