"""Huge usage figures never cost an answered call its row: tokens and costs are clamped where the row is
built (and the row says so), so every priced row is kept and no sum over the ledger leaves 64 bits."""

from __future__ import annotations

import sqlite3
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from switch.config import load_settings
from switch.ledger.recorder import Recorder
from switch.ledger.rollups import ROLLUP_SUMS
from switch.ledger.safe import CLAMPED_NOTE, COST_COLUMNS, COST_LIMIT_MICROS, TOKEN_COLUMNS, TOKEN_LIMIT, safe_row
from tests.ledger_seed import kimi_call, pricer_for

INT64_MAX = 2**63 - 1
# Usage as any upstream may report it: small, just past the clamp, 2**53 and far beyond.
COUNTS = st.integers(0, 2**70) | st.sampled_from([0, TOKEN_LIMIT, TOKEN_LIMIT + 1, 2**53, 2**63, 2**64])


@cache
def _recorder() -> Recorder:
    scratch = Path(tempfile.mkdtemp(prefix="switch-clamps-"))
    return Recorder(pricer_for(load_settings()), database=scratch / "unused.db", spill=scratch / "unused.spill")


def _huge_call(started_at: float, count: int = 2**53, **fields: Any) -> Any:
    return kimi_call(started_at, **dict.fromkeys(TOKEN_COLUMNS, count), usage_reported=True, **fields)


@given(counts=st.lists(COUNTS, min_size=5, max_size=5), error=st.none() | st.text(max_size=2500))
def test_any_usage_is_priced_into_a_row_within_the_plausible_bounds(counts: list[int], error: str | None) -> None:
    record = kimi_call(
        1_780_000_000.0, error=error, usage_reported=True, **dict(zip(TOKEN_COLUMNS, counts, strict=True))
    )
    row = _recorder()._price(record)
    for column in TOKEN_COLUMNS:
        assert 0 <= row[column] <= TOKEN_LIMIT
    for column in COST_COLUMNS:
        assert row[column] is None or 0 <= row[column] <= COST_LIMIT_MICROS
    assert row["cost_micros"] is not None  # still priced: a clamped call is kept as a priced call
    if max(counts) > TOKEN_LIMIT:
        assert CLAMPED_NOTE in row["error"]
    assert safe_row(dict(row)) == row


@given(costs=st.lists(st.integers(0, 2**53) | st.floats(0, 2.0**53), min_size=3, max_size=3))
def test_a_row_spilled_with_a_huge_cost_comes_back_clamped(costs: list[float]) -> None:
    row = _recorder()._price(kimi_call(1_780_000_000.0))
    row.update(zip(COST_COLUMNS, costs, strict=True))
    safe = safe_row(row)
    assert all(safe[column] <= COST_LIMIT_MICROS for column in COST_COLUMNS)
    assert (CLAMPED_NOTE in (safe["error"] or "")) == (max(costs) > COST_LIMIT_MICROS)


@settings(max_examples=5, deadline=None)
@given(count=st.sampled_from([2**53, 2**62, 2**70]) | st.integers(TOKEN_LIMIT + 1, 2**70))
def test_thousands_of_calls_with_huge_usage_all_land_and_every_sum_stays_in_64_bits(count: int) -> None:
    # 1,100 calls of 2**53 tokens each in one quarter hour: unclamped, the rollup's token sum passes 2**63,
    # the batch fails, spills, and replay rejects the rows; clamped, every one is kept, priced.
    scratch = Path(tempfile.mkdtemp(prefix="switch-clamps-"))
    database = scratch / "ledger.db"
    recorder = Recorder(pricer_for(load_settings()), database=database, spill=scratch / "spill.jsonl", batch_window=0)
    recorder.start()
    for index in range(1100):
        recorder.submit(
            _huge_call(1_780_000_000.0 + index / 1000, count, error="upstream said so" if index % 2 else None)
        )
    recorder.close()
    assert (recorder.written, recorder.spilled, recorder.last_error) == (1100, 0, None)
    connection = sqlite3.connect(database)
    try:
        rows, priced, noted = connection.execute(
            "SELECT COUNT(*), COUNT(cost_micros), SUM(error LIKE ?) FROM calls", (f"%{CLAMPED_NOTE}%",)
        ).fetchone()
        sums = connection.execute(f"SELECT {', '.join(f'SUM({c})' for c in ROLLUP_SUMS)} FROM rollup").fetchone()
        totals = connection.execute(f"SELECT {', '.join(f'SUM({c})' for c in TOKEN_COLUMNS)} FROM calls").fetchone()
    finally:
        connection.close()
    assert (rows, priced, noted) == (1100, 1100, 1100)
    assert not (scratch / "spill.jsonl").exists()
    assert all(abs(value) <= INT64_MAX for value in (*sums, *totals))
    assert all(total <= 1100 * TOKEN_LIMIT for total in totals)
