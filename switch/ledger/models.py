"""The ledger's table, as a SQLModel class: the documented schema the migrations must produce."""

from __future__ import annotations

from sqlmodel import Field, SQLModel


class Call(SQLModel, table=True):
    """One call attempt. Costs are integer micro-USD; None means unpriced, never free."""

    __tablename__ = "calls"

    id: int | None = Field(default=None, primary_key=True)
    started_at: float = Field(index=True, description="Unix time the call arrived")
    harness: str
    session_id: str | None = None
    agent_id: str | None = None
    role: str
    preset: str
    requested_model: str
    provider: str
    served_model: str
    inbound_api: str
    upstream_api: str
    streamed: bool
    outcome: str
    http_status: int
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    usage_reported: bool = True
    cost_micros: int | None = None
    native_cost_micros: int | None = None
    cache_savings_micros: int | None = None
    price_source: str | None = None
    native_price_source: str | None = None
    price_input: float | None = Field(default=None, description="USD per million uncached input tokens")
    price_cached_input: float | None = None
    price_cache_write: float | None = None
    price_output: float | None = None
    ttft_ms: float | None = None
    duration_ms: float = 0.0
    output_tps: float | None = None
    fallback_attempt: int = 0
    fallback_trigger: str | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    error: str | None = None
