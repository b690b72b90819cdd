"""LiteLLM's table indexed, not held: the same entries as a whole parse, from any bytes, in a bounded memory."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.ledger.limits import LimitTable
from switch.ledger.litellm_table import EntryIndex, shared_index
from switch.ledger.pricer import Pricer
from switch.ledger.pricing import PriceTable, litellm_table_path
from switch.ledger.recorder import Recorder
from tests.servers import wait_until

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
)
_TABLES = st.dictionaries(
    st.text(max_size=10), st.dictionaries(st.text(max_size=8), _VALUES, max_size=4) | _SCALARS, max_size=12
)


def _expected(table: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str]]:
    """What a whole parse gives, key by lower-cased key: the last value of a key wins."""
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            found[key.lower()] = (value, key)
        else:
            found.pop(key.lower(), None)
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=_TABLES, indent=st.sampled_from([None, 0, 2, 4]), ascii_only=st.booleans())
def test_the_index_finds_what_a_whole_parse_finds(
    table: dict[str, Any], indent: int | None, ascii_only: bool, tmp_path: Path
) -> None:
    raw = json.dumps(table, indent=indent, ensure_ascii=ascii_only).encode()
    path = tmp_path / "table.json"
    path.write_bytes(raw)
    expected = _expected(table)
    for index in (EntryIndex(raw), EntryIndex(raw, path)):
        assert len(index) == len(expected)
        for lowered, entry in expected.items():
            assert index.get(lowered) == entry
        assert dict(index.entries()) == expected
        assert index.get("\x00 not a key") is None


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_index_without_raising(raw: bytes) -> None:
    index = EntryIndex(raw)
    for lowered, (entry, key) in index.entries():
        assert isinstance(entry, dict) and key.lower() == lowered
        assert index.get(lowered) == (entry, key)


def test_a_table_changed_after_indexing_gives_no_wrong_entry(tmp_path: Path) -> None:
    path = tmp_path / "table.json"
    path.write_bytes(json.dumps({"a/model": {"input_cost_per_token": 1e-6}, "b/model": {"x": 1}}, indent=4).encode())
    index = EntryIndex(path.read_bytes(), path)
    path.write_bytes(b'{"b/model": {"x": 2}}')
    assert index.get("a/model") is None
    assert index.get("b/model") is None or index.get("b/model") == ({"x": 2}, "b/model")
    path.unlink()
    assert index.get("b/model") is None
    assert list(index.entries()) == []


def test_the_shared_index_is_rebuilt_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "table.json"
    path.write_bytes(b'{"m": {"max_input_tokens": 1}}')
    first = shared_index(path)
    assert shared_index(path) is first
    path.write_bytes(b'{"m": {"max_input_tokens": 22}, "n": {}}')
    assert shared_index(path).get("m") == ({"max_input_tokens": 22}, "m")


TABLE = litellm_table_path()
needs_table = pytest.mark.skipif(TABLE is None, reason="litellm's bundled table is not installed")


@needs_table
def test_every_entry_of_litellms_table_is_found_as_parsed() -> None:
    assert TABLE is not None
    parsed = orjson.loads(TABLE.read_bytes())
    index = EntryIndex(TABLE.read_bytes(), TABLE)
    expected = _expected(parsed)
    assert len(index) == len(expected) > 1000
    assert dict(index.entries()) == expected
    for lowered in list(expected)[::97]:  # read back from the file one by one
        assert index.get(lowered) == expected[lowered]


@needs_table
def test_prices_and_limits_do_not_hold_litellms_table() -> None:
    # Parsed whole and kept, the table held ~6.5 MB for prices and ~1.5 MB more for limits, for a proxy that
    # prices a handful of models. The index of keys and offsets holds well under one megabyte.
    tracemalloc.start()
    try:
        prices, limits = PriceTable(), LimitTable()
        assert prices.lookup("baseten", "moonshotai/Kimi-K3") is not None
        assert prices.lookup("anthropic", "claude-sonnet-4-5") is not None
        assert limits.lookup("anthropic", "claude-sonnet-4-5").context_window
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1.5 * 2**20, f"{held / 2**20:.1f} MB held"


def test_the_writer_indexes_the_price_table_at_start_before_any_call(tmp_path: Path) -> None:
    # Built at start, the index is not built in the first batch mid-traffic, nor on the event loop for the
    # first call's context window (the limits share it).
    pricer = Pricer(baseline_anthropic="claude-sonnet-4-5", baseline_openai="gpt-5")
    recorder = Recorder(pricer, database=tmp_path / "ledger.db", spill=tmp_path / "ledger.spill.jsonl")
    recorder.start()
    try:
        wait_until(lambda: pricer._table is not None, what="the price table loaded with no call made")
    finally:
        recorder.close()
    assert recorder.written == 0
