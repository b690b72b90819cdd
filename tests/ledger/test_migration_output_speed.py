"""Migration 7: a ledger written when tok/s was computed for whole (non-streamed) bodies loses those absurd
rates, keeps the streamed ones, and every median of output speed leaves the unmeasured calls out."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from switch.cli import app
from switch.config import Settings
from switch.ledger import queries
from switch.ledger import series as ledger_series
from switch.ledger.columns import COLUMNS
from switch.ledger.migrations import LATEST, current_version, migrate
from tests.ledger_seed import FROZEN_NOW, kimi_call, pricer_for, write_rows

STREAMED_RATES = (42.0, 55.0, 61.0)  # tok/s of three streams: the median is 55


def old_rows() -> list[tuple[object, ...]]:
    """Rows as switch 6 wrote them: rates from `output / (duration - TTFT)` for streams and whole bodies alike."""
    pricer = pricer_for(Settings())
    rows = []
    for index, rate in enumerate(STREAMED_RATES):
        record = kimi_call(FROZEN_NOW + index, output_tokens=500, ttft_ms=400.0, duration_ms=400.0 + 500_000 / rate)
        rows.append({**pricer.row(record), "output_tps": rate})
    for index, (model, rate) in enumerate((("moonshotai/Kimi-K3", 310_231.0), ("zai-org/GLM-5.2", 187_500.0))):
        # A whole body: duration and TTFT a hair apart, so the old formula divided by almost nothing.
        record = kimi_call(
            FROZEN_NOW + 10 + index,
            streamed=False,
            served_model=model,
            output_tokens=600,
            ttft_ms=2000.0,
            duration_ms=2001.9,
        )
        rows.append({**pricer.row(record), "output_tps": rate})
    return [tuple(row[column] for column in COLUMNS) for row in rows]


def test_migration_7_nulls_rates_of_whole_bodies_and_medians_skip_them(isolated_home: Path) -> None:
    database = isolated_home / "ledger.db"
    connection = sqlite3.connect(database)
    migrate(connection, upto=6)
    write_rows(connection, old_rows())
    before = connection.execute("SELECT * FROM calls ORDER BY id").fetchall()
    connection.close()

    # Any report opens an old ledger through the migrations first.
    result = CliRunner().invoke(app, ["spend", "--by", "model", "--json"])
    assert result.exit_code == 0, result.output
    groups = {group["grp"]: group for group in json.loads(result.output)["groups"]}
    assert groups["moonshotai/Kimi-K3"]["median_output_tps"] == 55.0
    assert groups["moonshotai/Kimi-K3"]["calls"] == 4
    assert groups["zai-org/GLM-5.2"]["median_output_tps"] is None  # no stream: no speed, not 187,500
    table = CliRunner().invoke(app, ["spend", "--by", "model"]).output
    assert "310231" not in table.replace(",", "") and "187500" not in table.replace(",", "")

    connection = sqlite3.connect(database)
    try:
        assert current_version(connection) == LATEST
        rates = connection.execute("SELECT streamed, output_tps FROM calls ORDER BY id").fetchall()
        assert rates == [(1, rate) for rate in STREAMED_RATES] + [(0, None), (0, None)]
        # Nothing else in a row changed.
        tps = [column[1] for column in connection.execute("PRAGMA table_info(calls)")].index("output_tps")
        # Later migrations add columns after the old ones: compare the columns the old ledger had.
        after = [row[: len(before[0])] for row in connection.execute("SELECT * FROM calls ORDER BY id")]
        assert [row[:tps] + row[tps + 1 :] for row in after] == [row[:tps] + row[tps + 1 :] for row in before]
        totals = queries.spend(connection)[0]
        assert totals["median_output_tps"] == 55.0
        latency = ledger_series.latency_series(connection, None, None, 86400)
        assert {model: tps for _bucket, model, _calls, _ttft, tps in latency} == {
            "moonshotai/Kimi-K3": 55.0,
            "zai-org/GLM-5.2": None,
        }
    finally:
        connection.close()
