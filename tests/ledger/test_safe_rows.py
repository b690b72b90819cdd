"""Every row the writer builds is one every store accepts: no NUL, no lone surrogate, bounded text, and
numbers that are finite, at least 0 and within 2**53, whatever the client and the upstream sent."""

from __future__ import annotations

import csv
import io
import json
import math
import sqlite3
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from switch.config import load_settings
from switch.ledger.columns import COLUMN_KINDS, COLUMNS, INSERT
from switch.ledger.db import open_for_writing
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from switch.ledger.safe import ERROR_TEXT_LIMIT, NUMBER_LIMIT, TEXT_LIMIT, safe_row
from switch.ledger.spill import storable
from tests.ledger_seed import kimi_call, pricer_for

# Text as hostile as JSON can carry it: NUL, lone surrogates, control characters, long runs.
HOSTILE_TEXT = st.text(
    alphabet=st.sampled_from(["a", "\x00", "\ud800", "\udfff", "é", "\U0001f600", "\n", "\x7f", "'"]), max_size=40
) | st.text(max_size=3000)
NUMBERS = st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.none() | st.booleans()


@cache
def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="switch-safe-rows-"))


@cache
def _ledger() -> sqlite3.Connection:
    return open_for_writing(_scratch() / "ledger.db")


@cache
def _recorder() -> Recorder:
    return Recorder(pricer_for(load_settings()), database=_scratch() / "unused.db", spill=_scratch() / "unused.spill")


def assert_safe(row: dict[str, Any]) -> None:
    for column, (kinds, required) in COLUMN_KINDS.items():
        value = row[column]
        if value is None:
            assert not required, column
            continue
        if kinds == (str,):
            assert type(value) is str
            assert "\x00" not in value, column
            value.encode("utf-8")  # no lone surrogate
            assert len(value) <= (ERROR_TEXT_LIMIT if column == "error" else TEXT_LIMIT)
        else:
            assert isinstance(value, kinds) and not isinstance(value, bool), (column, value)
            assert math.isfinite(value) and 0 <= value <= NUMBER_LIMIT, (column, value)
    assert storable(row)


@given(texts=st.fixed_dictionaries({}, optional={c: HOSTILE_TEXT for c in COLUMNS}), numbers=st.lists(NUMBERS))
def test_any_row_made_safe_fits_every_column_and_stays_safe(texts: dict[str, str], numbers: list[Any]) -> None:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    numeric = [c for c, (kinds, _required) in COLUMN_KINDS.items() if kinds != (str,)]
    for column, value in zip(numeric, numbers, strict=False):
        row[column] = value
    row.update({c: v for c, v in texts.items() if COLUMN_KINDS[c][0] == (str,)})
    safe = safe_row(dict(row))
    assert_safe(safe)
    assert safe_row(dict(safe)) == safe  # made safe once: doing it again changes nothing
    # Every store takes it: SQLite, JSON, CSV; PostgreSQL text refuses NUL only, checked above.
    connection = _ledger()
    try:
        connection.execute(INSERT, tuple(safe[c] for c in COLUMNS))
    finally:
        connection.rollback()
    json.dumps(safe, allow_nan=False)
    orjson.dumps(safe)
    csv.writer(io.StringIO()).writerow([safe[c] for c in COLUMNS])


@given(
    model=HOSTILE_TEXT,
    error=HOSTILE_TEXT,
    tokens=st.lists(st.integers(-(2**40), 2**40), min_size=5, max_size=5),
    timings=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.none(), min_size=3, max_size=3),
)
def test_a_record_with_hostile_values_is_priced_into_a_safe_row(
    model: str, error: str, tokens: list[int], timings: list[float | None]
) -> None:
    record = kimi_call(
        1_780_000_000.0,
        requested_model=model,
        error=error,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cache_read_tokens=tokens[2],
        cache_write_tokens=tokens[3],
        reasoning_tokens=tokens[4],
        ttft_ms=timings[0],
        duration_ms=timings[1] if timings[1] is not None else 0.0,
        output_ms=timings[2],
    )
    row = _recorder()._price(record)
    assert_safe(row)
    for column in ("cost_micros", "native_cost_micros", "cache_savings_micros"):
        assert row[column] is None or row[column] >= 0


def test_the_writer_stores_what_sqlite_and_postgresql_both_take(isolated_home: Any) -> None:
    record: CallRecord = kimi_call(
        1_780_000_000.0, requested_model="kimi\x00\ud800", error="boom\x00", input_tokens=-5, output_tokens=-3
    )
    recorder = Recorder(pricer_for(load_settings()), batch_window=0)
    recorder.start()
    recorder.submit(record)
    recorder.close()
    connection = sqlite3.connect(isolated_home / "ledger.db")
    try:
        model, error, tokens, cost = connection.execute(
            "SELECT requested_model, error, input_tokens + output_tokens, cost_micros FROM calls"
        ).fetchone()
    finally:
        connection.close()
    assert (model, error, tokens, cost) == ("kimi\ufffd\ufffd", "boom\ufffd", 0, 0)
