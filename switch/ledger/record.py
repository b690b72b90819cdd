"""The immutable record of one call attempt, built by the relay and handed to the recorder."""

from __future__ import annotations

from typing import Literal, Protocol

from switch.values import value

Outcome = Literal[
    "completed",
    "client_cancelled",
    "upstream_error",
    "transport_error",
    "incomplete_stream",
    "rejected",
    "proxy_error",
    "context_overflow",
]


@value
class CallRecord:
    """Everything the ledger keeps about one call attempt (never a prompt, never a key)."""

    started_at: float
    harness: str
    role: str
    preset: str
    requested_model: str
    provider: str
    served_model: str
    inbound_api: str
    upstream_api: str
    streamed: bool
    outcome: Outcome
    http_status: int
    session_id: str | None = None
    agent_id: str | None = None
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    usage_reported: bool = False
    ttft_ms: float | None = None
    duration_ms: float = 0.0
    # From the first to the last output chunk of a stream of two or more chunks, else None (rate unknown).
    output_ms: float | None = None
    fallback_attempt: int = 0
    fallback_trigger: str | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    error: str | None = None
    budget: str | None = None
    budget_action: str | None = None
    # What the harness said the call was for ("compaction", "fork", "review", ...; None: an ordinary turn).
    request_kind: str | None = None
    # The agent (or thread) that spawned this call's agent, as the harness names it.
    parent_agent_id: str | None = None
    # The in-flight estimate this attempt held against its budgets (0: none), released once it is priced.
    budget_hold: int = 0
    # How the call reached switch: "http", or "websocket" (a Responses turn over one WebSocket per session).
    transport: str = "http"


WRITER_COLUMNS = frozenset(
    {
        "cost_micros",
        "native_cost_micros",
        "cache_savings_micros",
        "price_source",
        "native_price_source",
        "price_input",
        "price_cached_input",
        "price_cache_write",
        "price_output",
        "output_tps",
    }
)
"""Ledger columns the writer computes from a record off the request path (prices, costs, speed): a
`CallRecord` carries exactly the others (a test holds it to the table's definition)."""


RECORD_ONLY_FIELDS = frozenset({"output_ms", "budget_hold"})
"""Record fields the writer consumes (`output_ms` → `output_tps`; `budget_hold` releases a budget hold) and does
not store."""


class RecordSink(Protocol):
    """Where the relay hands finished records; `submit` must never block."""

    def submit(self, record: CallRecord) -> None:
        """Queue one record."""
