"""The calls table's columns as plain constants, generated from `schema.Call` (do not edit).

Regenerate with `python -m switch.ledger.schema`; a test fails when this file and the class differ.
The proxy's writer reads these instead of the class, so serving never imports SQLModel.
"""

COLUMNS: tuple[str, ...] = (
    "started_at",
    "harness",
    "session_id",
    "agent_id",
    "role",
    "preset",
    "requested_model",
    "provider",
    "served_model",
    "inbound_api",
    "upstream_api",
    "streamed",
    "outcome",
    "http_status",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "usage_reported",
    "cost_micros",
    "native_cost_micros",
    "cache_savings_micros",
    "price_source",
    "native_price_source",
    "price_input",
    "price_cached_input",
    "price_cache_write",
    "price_output",
    "ttft_ms",
    "duration_ms",
    "output_tps",
    "fallback_attempt",
    "fallback_trigger",
    "request_bytes",
    "response_bytes",
    "error",
    "budget",
    "budget_action",
    "request_kind",
    "parent_agent_id",
    "transport",
)
"""Every column the writer fills, in the class's order (the database assigns the id)."""
COLUMN_KINDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "started_at": (
        (
            int,
            float,
        ),
        True,
    ),
    "harness": ((str,), True),
    "session_id": ((str,), False),
    "agent_id": ((str,), False),
    "role": ((str,), True),
    "preset": ((str,), True),
    "requested_model": ((str,), True),
    "provider": ((str,), True),
    "served_model": ((str,), True),
    "inbound_api": ((str,), True),
    "upstream_api": ((str,), True),
    "streamed": ((int,), True),
    "outcome": ((str,), True),
    "http_status": ((int,), True),
    "stop_reason": ((str,), False),
    "input_tokens": ((int,), True),
    "output_tokens": ((int,), True),
    "cache_read_tokens": ((int,), True),
    "cache_write_tokens": ((int,), True),
    "reasoning_tokens": ((int,), True),
    "usage_reported": ((int,), True),
    "cost_micros": ((int,), False),
    "native_cost_micros": ((int,), False),
    "cache_savings_micros": ((int,), False),
    "price_source": ((str,), False),
    "native_price_source": ((str,), False),
    "price_input": (
        (
            int,
            float,
        ),
        False,
    ),
    "price_cached_input": (
        (
            int,
            float,
        ),
        False,
    ),
    "price_cache_write": (
        (
            int,
            float,
        ),
        False,
    ),
    "price_output": (
        (
            int,
            float,
        ),
        False,
    ),
    "ttft_ms": (
        (
            int,
            float,
        ),
        False,
    ),
    "duration_ms": (
        (
            int,
            float,
        ),
        True,
    ),
    "output_tps": (
        (
            int,
            float,
        ),
        False,
    ),
    "fallback_attempt": ((int,), True),
    "fallback_trigger": ((str,), False),
    "request_bytes": ((int,), True),
    "response_bytes": ((int,), True),
    "error": ((str,), False),
    "budget": ((str,), False),
    "budget_action": ((str,), False),
    "request_kind": ((str,), False),
    "parent_agent_id": ((str,), False),
    "transport": ((str,), True),
}
"""What each column accepts and whether it is required: checks rows read back from outside."""
INSERT = f"INSERT INTO calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
