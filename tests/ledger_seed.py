"""A deterministic seeded ledger for dashboard tests and benchmarks."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

from switch.config import Settings, litellm_names
from switch.ledger.columns import COLUMNS, INSERT
from switch.ledger.db import open_for_writing
from switch.ledger.pricer import Pricer
from switch.ledger.record import CallRecord
from switch.ledger.rollups import UPSERT_ROLLUP, UPSERT_SESSION, rollup_deltas, session_deltas

FROZEN_NOW = 1_795_000_000.0  # a fixed "now" for tests: 2026-11-19
MODELS = (
    ("baseten", "moonshotai/Kimi-K3", 3.0, 0.3, 15.0),
    ("anthropic", "claude-opus-5-5", 4.0, 0.2, 20.0),
    ("baseten", "zai-org/GLM-5.2", 1.4, 0.14, 4.4),
)
ROLES = ("orchestrator", "subagent", "background")
HARNESSES = ("claude-code", "codex", "langchain")


def pricer_for(settings: Settings, kind: type[Pricer] = Pricer) -> Pricer:
    """The pricer `switch serve` builds from these settings (or a subclass of it, built the same way)."""
    return kind(
        settings.prices,
        baseline_anthropic=settings.pricing.baseline_anthropic,
        baseline_openai=settings.pricing.baseline_openai,
        litellm_names=litellm_names(settings),
    )


def kimi_call(started_at: float, **fields: Any) -> CallRecord:
    """A completed, streamed Kimi K3 call of Claude Code's subagent under the hybrid preset; `fields` add or change."""
    values: dict[str, Any] = {
        "started_at": started_at,
        "harness": "claude-code",
        "role": "subagent",
        "preset": "hybrid",
        "requested_model": "claude-opus-5-5",
        "provider": "baseten",
        "served_model": "moonshotai/Kimi-K3",
        "inbound_api": "anthropic",
        "upstream_api": "openai-chat",
        "streamed": True,
        "outcome": "completed",
        "http_status": 200,
        **fields,
    }
    return CallRecord(**values)


def seeded_rows(
    count: int, now: float = FROZEN_NOW, span_seconds: float = 3 * 86400, first: int = 0, total: int | None = None
) -> list[tuple[object, ...]]:
    """Rows `first` … `first + count` of a ledger of `total` rows spread evenly over `span_seconds` before `now`."""
    total = total or count
    rng = random.Random(first)
    rows = []
    for index in range(first, first + count):
        started = now - span_seconds + span_seconds * (index + 1) / total
        provider, model, price_in, price_cached, price_out = MODELS[index % len(MODELS)]
        uncached, cached, output = 1000 + index % 500, 4000 + (index * 7) % 3000, 100 + index % 200
        cost = round(uncached * price_in + cached * price_cached + output * price_out)
        native = round(uncached * 4.0 + cached * 0.2 + output * 20.0)
        outcome = "completed" if index % 50 else "upstream_error"
        ttft = 150.0 + rng.random() * 800
        duration = ttft + 500 + rng.random() * 3000
        values = {
            "started_at": started,
            "harness": HARNESSES[index % 3],
            "session_id": f"session-{index // 40}",
            "agent_id": None,
            "role": ROLES[(index // 3) % 3],
            "preset": "hybrid",
            "requested_model": "claude-opus-5-5",
            "provider": provider,
            "served_model": model,
            "inbound_api": "anthropic",
            "upstream_api": "openai-chat",
            "streamed": 1,
            "outcome": outcome,
            "http_status": 200 if outcome == "completed" else 500,
            "stop_reason": "end_turn",
            "input_tokens": uncached,
            "output_tokens": output,
            "cache_read_tokens": cached,
            "cache_write_tokens": 0,
            "reasoning_tokens": output // 4,
            "usage_reported": 1,
            "cost_micros": cost if model != "zai-org/GLM-5.2" or index % 7 else None,
            "native_cost_micros": native,
            "cache_savings_micros": round(cached * (price_in - price_cached)),
            "price_source": f"litellm:{provider}/{model}",
            "native_price_source": "litellm:claude-opus-5-5",
            "price_input": price_in,
            "price_cached_input": price_cached,
            "price_cache_write": price_in,
            "price_output": price_out,
            "ttft_ms": ttft,
            "duration_ms": duration,
            "output_tps": output / ((duration - ttft) / 1000),
            "fallback_attempt": 1 if index % 97 == 0 else 0,
            "fallback_trigger": "5xx" if index % 97 == 0 else None,
            "request_bytes": 50_000,
            "response_bytes": 4_000,
            "error": "upstream baseten returned 500: down" if outcome != "completed" else None,
            "budget": None,
            "budget_action": None,
            "request_kind": None,
            "parent_agent_id": None,
            "transport": "websocket" if index % 5 == 0 else "http",
        }
        rows.append(tuple(values[column] for column in COLUMNS))
    return rows


def seed_ledger(path: Path, count: int, now: float = FROZEN_NOW, span_seconds: float = 3 * 86400) -> None:
    """Create `path` with `count` seeded rows, written in slices so a million rows never sit in memory."""
    connection: sqlite3.Connection = open_for_writing(path)
    batch = 50_000
    for first in range(0, count, batch):
        write_rows(connection, seeded_rows(min(batch, count - first), now, span_seconds, first, count))
    connection.close()


def write_rows(connection: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    """Insert `rows` (values in COLUMNS order) and add them to both rollups, in one transaction, as the writer does."""
    named = [dict(zip(COLUMNS, row, strict=True)) for row in rows]
    # A ledger of an earlier version (a migration test) gets only the columns it has; later migrations add the rest.
    existing = {row[1] for row in connection.execute("PRAGMA table_info(calls)")}
    columns = [column for column in COLUMNS if column in existing]
    insert = INSERT
    if len(columns) != len(COLUMNS):
        insert = f"INSERT INTO calls ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
        rows = [tuple(row[column] for column in columns) for row in named]
    with connection:
        connection.executemany(insert, rows)
        connection.executemany(UPSERT_ROLLUP, rollup_deltas(named))
        connection.executemany(UPSERT_SESSION, session_deltas(named))
