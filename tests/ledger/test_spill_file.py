"""Whatever is in the spill file (rows, records spilled past the queue bound, lines cut short by a
crash, damaged or foreign lines), a replay records every good row once and skips the rest."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from switch.config import Settings
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from tests.ledger_seed import kimi_call, pricer_for

PRICER = pricer_for(Settings())


def good_record(index: int) -> CallRecord:
    return kimi_call(
        1_780_000_000.0 + index * 61.5,
        harness="codex",
        requested_model="gpt-5.5",
        inbound_api="openai-responses",
        streamed=False,
        input_tokens=100 + index,
        output_tokens=10,
        request_bytes=index,
    )


def priced_line(index: int) -> bytes:
    """A row as the writer spills it."""
    return orjson.dumps(PRICER.row(good_record(index)))


def record_line(index: int) -> bytes:
    """A record as `submit` spills it past the queue bound (priced when replayed)."""
    record = good_record(index)
    fields = {name: getattr(record, name) for name in CallRecord.__dataclass_fields__}
    return orjson.dumps({"_unpriced_record": True, **fields})


# Values each column must refuse (a boolean is a fine integer to SQLite, so it is not among them).
_NOT_TEXT = [None, 12, 1.5, [], {}, True]
_NOT_INTEGER = [None, "7", 12.5, 2**60, -(2**60), [], {}]
BROKEN: dict[str, list[Any]] = {
    **dict.fromkeys(("harness", "role", "provider", "served_model", "outcome"), _NOT_TEXT),
    **dict.fromkeys(("http_status", "input_tokens", "cost_micros"), _NOT_INTEGER[1:]),
    "started_at": [None, "1780000000", [], {}, 2.0**60],
}


@st.composite
def spill_lines(draw: st.DrawFn) -> tuple[list[bytes], set[int]]:
    """Lines of a spill file, and the indexes of the good rows among them."""
    lines: list[bytes] = []
    good: set[int] = set()
    for index in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["row", "record", "cut", "broken", "junk", "json"]))
        if kind == "row":
            lines.append(priced_line(index))
            good.add(index)
        elif kind == "record":
            lines.append(record_line(index))
            good.add(index)
        elif kind == "cut":
            whole = draw(st.sampled_from([priced_line, record_line]))(index)
            lines.append(whole[: draw(st.integers(0, len(whole) - 1))])
        elif kind == "broken":
            row: dict[str, Any] = orjson.loads(priced_line(index))
            column = draw(st.sampled_from(sorted(BROKEN)))
            row[column] = draw(st.sampled_from(BROKEN[column]))
            lines.append(orjson.dumps(row))
        elif kind == "junk":
            lines.append(draw(st.binary(max_size=60)))
        else:
            lines.append(
                orjson.dumps(
                    draw(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=10), st.lists(st.none())))
                )
            )
    return lines, good


@settings(max_examples=40, deadline=None)
@given(spill_lines(), st.booleans())
def test_replay_records_each_good_line_once_and_skips_the_rest(
    content: tuple[list[bytes], set[int]], ends_with_newline: bool
) -> None:
    lines, good = content
    with tempfile.TemporaryDirectory() as directory:
        database, spill = Path(directory) / "ledger.db", Path(directory) / "ledger.spill.jsonl"
        spill.write_bytes(b"\n".join(lines) + (b"\n" if ends_with_newline else b""))
        recorder = Recorder(pricer_for(Settings()), database=database, spill=spill, batch_window=0)
        recorder.start()
        recorder.submit(good_record(1000))  # written after the replay, whatever the file held
        recorder.close(timeout=60)
        connection = sqlite3.connect(database)
        try:
            recorded = connection.execute("SELECT request_bytes, cost_micros FROM calls").fetchall()
            (rolled_up,) = connection.execute("SELECT SUM(calls) FROM rollup").fetchone()
        finally:
            connection.close()
        health = recorder.health()
        assert not spill.exists()
    assert sorted(index for index, _ in recorded) == sorted({*good, 1000})
    assert all(cost == (100 + index) * 3 + 10 * 15 for index, cost in recorded)
    assert rolled_up == len(recorded)
    assert health["spill_bytes"] == 0 and health["unsaved"] == 0
