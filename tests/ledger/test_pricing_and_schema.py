"""Prices from the bundled tables, exact micro-dollar costs, and the migrated schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from switch.config import load_settings
from switch.ledger.columns import COLUMNS
from switch.ledger.migrations import LATEST, MIGRATIONS, current_version, migrate
from switch.ledger.pricing import PriceTable, Tokens
from switch.ledger.record import CallRecord
from switch.ledger.schema import Call
from tests.ledger_seed import kimi_call, pricer_for


def test_kimi_k3_on_baseten_costs_to_the_micro_dollar() -> None:
    price = PriceTable().lookup("baseten", "moonshotai/Kimi-K3")
    assert price is not None and price.source == "litellm:baseten/moonshotai/Kimi-K3"
    # $3.00 input, $0.30 cached input, $15.00 output per million tokens
    usage = Tokens(input_tokens=1000, cache_read_tokens=500, output_tokens=200)
    assert price.cost_micros(usage) == 1000 * 3 + 500 * 0.3 + 200 * 15 == 6150
    assert price.cost_micros(Tokens(input_tokens=1, output_tokens=0)) == 3
    assert price.cache_savings_micros(usage) == 500 * (3 - 0.3) == 1350


def test_claude_and_gpt_counterfactual_prices() -> None:
    table = PriceTable()
    opus = table.lookup("anthropic", "claude-opus-5-5")
    assert opus is not None
    usage = Tokens(input_tokens=1000, cache_read_tokens=500, cache_write_tokens=100, output_tokens=200)
    assert opus.cost_micros(usage) == 1000 * 4 + 500 * 0.2 + 100 * 5 + 200 * 20
    assert table.lookup("openai", "gpt-5.5") is not None
    assert table.lookup("moonshot", "kimi-k3") is not None


def test_unknown_model_is_unpriced_and_overrides_win() -> None:
    assert PriceTable().lookup("baseten", "nobody/never-heard-of-it") is None
    table = PriceTable({"baseten/moonshotai/Kimi-K3": {"input": 1.0, "cached_input": 0.1, "output": 2.0}})
    price = table.lookup("baseten", "moonshotai/Kimi-K3")
    assert price is not None and price.source == "config:baseten/moonshotai/Kimi-K3"
    assert price.cost_micros(Tokens(input_tokens=1_000_000, cache_read_tokens=1_000_000, output_tokens=1_000_000)) == (
        3_100_000
    )


def record(**fields: object) -> CallRecord:
    usage: dict[str, object] = {
        "input_tokens": 2000,
        "cache_read_tokens": 8000,
        "output_tokens": 300,
        "ttft_ms": 200.0,
        "duration_ms": 1200.0,
        "output_ms": 1000.0,
    }
    return kimi_call(1.0, **{**usage, **fields})


def test_row_carries_cost_native_cost_and_the_prices_used() -> None:
    row = pricer_for(load_settings()).row(record())
    assert row["cost_micros"] == 2000 * 3 + 8000 * 0.3 + 300 * 15
    assert row["native_cost_micros"] == 2000 * 4 + 8000 * 0.2 + 300 * 20
    assert (row["price_input"], row["price_cached_input"], row["price_output"]) == (3.0, 0.3, 15.0)
    assert row["native_price_source"] == "litellm:claude-opus-5-5"
    assert row["output_tps"] == 300 / 1.0


def test_unknown_requested_model_falls_back_to_the_baseline() -> None:
    row = pricer_for(load_settings()).row(record(requested_model="env-main-model", provider="nobody", served_model="x"))
    assert row["cost_micros"] is None and row["price_source"] is None
    assert row["native_price_source"] == "litellm:claude-opus-5-5"


def test_migrations_from_empty_and_from_every_earlier_version(tmp_path: Path) -> None:
    for start in (0, *(number for number, _, _ in MIGRATIONS)):
        connection = sqlite3.connect(tmp_path / f"from-{start}.db")
        migrate(connection, upto=start)
        assert current_version(connection) == start
        assert migrate(connection) == LATEST
        columns = [row[1] for row in connection.execute("PRAGMA table_info(calls)")]
        assert set(columns) == {"id", *COLUMNS} == set(Call.model_fields)
        connection.close()
    # Increasing and unique; a reserved number may leave a gap until the branches that hold the others merge.
    numbers = [number for number, _, _ in MIGRATIONS]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1 and numbers[-1] == LATEST


def test_spend_from_rollup_matches_a_full_scan(tmp_path: Path) -> None:
    import random

    from switch.ledger import queries
    from tests.ledger_seed import FROZEN_NOW, seed_ledger

    path = tmp_path / "ledger.db"
    seed_ledger(path, 2000, FROZEN_NOW, 5 * 86400)
    connection = sqlite3.connect(path)
    connection.execute("DELETE FROM rollup")
    connection.execute("DELETE FROM rollup_session")
    connection.commit()
    # Rebuild the rollup the way the writer does, batch by batch.
    from switch.ledger.rollups import (
        CALLS_SUMS_SQL,
        ROLLUP_SUMS,
        UPSERT_ROLLUP,
        UPSERT_SESSION,
        rollup_deltas,
        session_deltas,
    )

    select = f"SELECT {', '.join(COLUMNS)} FROM calls"
    rows = [dict(zip(COLUMNS, row, strict=True)) for row in connection.execute(select)]
    for start in range(0, len(rows), 333):
        connection.executemany(UPSERT_ROLLUP, rollup_deltas(rows[start : start + 333]))
        connection.executemany(UPSERT_SESSION, session_deltas(rows[start : start + 333]))
    connection.commit()
    rng = random.Random(3)
    keys = ROLLUP_SUMS  # every sum, cache writes included
    cases = [(None, None), (FROZEN_NOW - 3600, None), (None, FROZEN_NOW - 86400)]
    for _ in range(20):
        low = FROZEN_NOW - rng.random() * 6 * 86400
        cases.append((low, low + rng.random() * 2 * 86400))
        cases.append((low, low + rng.random() * 1800))
    for since, until in cases:
        for by in (None, "model", "day", "session"):
            fast = {r["grp"]: [r[k] for k in keys] for r in queries.spend(connection, by, since, until)}
            where, params = queries.where_clause(since, until)
            group = queries.GROUPS[by] if by else "'all'"
            slow_sql = f"SELECT {group}, {CALLS_SUMS_SQL} FROM calls {where} GROUP BY 1"
            slow: dict[object, list[object]] = {}
            queries._merge(slow, connection.execute(slow_sql, params))
            expected = {
                group_key: [dict(zip(queries._SPEND_KEYS[1:], values, strict=True))[k] for k in keys]
                for group_key, values in slow.items()
            }
            assert {g: [v or 0 for v in vs] for g, vs in fast.items()} == {
                g: [v or 0 for v in vs] for g, vs in expected.items()
            }, (since, until, by)
