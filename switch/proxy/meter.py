"""What the relay learns about one call attempt (timings, usage, route), turned into a `CallRecord`.

Every path a call can take fills the same `Meter` and ends it with `finish`, exactly once; the
record is handed to the sink without waiting for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from switch.ledger.record import CallRecord, Outcome, RecordSink
from switch.protocols.ir import Usage
from switch.proxy.exchange import Exchange
from switch.routing.resolve import Target

ERROR_TEXT_LIMIT = 300


@dataclass(slots=True)
class Meter:
    """Timings, usage and attribution of one call attempt, recorded once by `finish`."""

    exchange: Exchange
    inbound_api: str
    sink: RecordSink | None = None
    requested_model: str = ""
    streamed: bool = False
    target: Target | None = None
    usage: Usage = field(default_factory=Usage)
    usage_reported: bool = False
    stop_reason: str | None = None
    first_token_at: float | None = None
    # When a chunk after the first-token chunk arrived (streams only): with it the output rate is measurable.
    last_token_at: float | None = None
    error: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    request_kind: str | None = None
    parent_agent_id: str | None = None
    attempt: int = 0
    trigger: str | None = None
    harness: str = "other"
    role: str = "orchestrator"
    preset: str = "default"
    budget: str | None = None
    budget_action: str | None = None
    budget_hold: int = 0
    recorded: bool = False

    def estimate_usage(self, output_chars: int = 0) -> None:
        """Usage when the upstream never reported it: the prompt was paid for all the same."""
        self.usage = Usage(input_tokens=max(1, len(self.exchange.body) // 4), output_tokens=max(0, output_chars) // 4)

    def finish(self, outcome: Outcome, error: str | None = None, status: int | None = None) -> None:
        """Build this attempt's record and hand it to the sink."""
        self.recorded = True
        if self.sink is None:
            return
        exchange = self.exchange
        now = time.perf_counter()
        target = self.target
        usage = self.usage
        ttft = (self.first_token_at - exchange.started) * 1000 if self.first_token_at else None
        output_ms = (
            (self.last_token_at - self.first_token_at) * 1000
            if self.streamed and self.first_token_at and self.last_token_at
            else None
        )
        error_text = error or self.error
        record = CallRecord(
            started_at=time.time() - (now - exchange.started),
            harness=self.harness,
            role=self.role,
            preset=self.preset,
            requested_model=self.requested_model,
            provider=target.provider if target else "",
            served_model=(target.model or self.requested_model) if target else "",
            inbound_api=self.inbound_api,
            upstream_api=target.api if target else "",
            streamed=self.streamed,
            outcome=outcome,
            http_status=status if status is not None else exchange.status,
            session_id=self.session_id,
            agent_id=self.agent_id,
            fallback_attempt=self.attempt,
            fallback_trigger=self.trigger,
            stop_reason=self.stop_reason,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            usage_reported=self.usage_reported,
            ttft_ms=ttft,
            output_ms=output_ms,
            duration_ms=(now - exchange.started) * 1000,
            request_bytes=len(exchange.body),
            response_bytes=exchange.response_bytes,
            error=error_text[:ERROR_TEXT_LIMIT] if error_text else None,
            budget=self.budget,
            budget_action=self.budget_action,
            request_kind=self.request_kind,
            parent_agent_id=self.parent_agent_id,
            budget_hold=self.budget_hold,
            transport=exchange.scope.get("switch.transport", "http"),
        )
        self.sink.submit(record)
