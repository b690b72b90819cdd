"""Every recorded field of one call, in a modal, labelled in words with money in dollars."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import format as fmt

_MONEY = {"cost_micros", "native_cost_micros", "cache_savings_micros"}
_MS = {"ttft_ms", "duration_ms"}
# Shown first, in the order of the Calls table; every other field follows in the ledger's order.
FIRST = (
    "started_at",
    "harness",
    "role",
    "request_kind",
    "parent_agent_id",
    "served_model",
    "cost_micros",
    "native_cost_micros",
)
# Ledger column → what people call it; any other column reads as its name with spaces.
LABELS = {
    "id": "call",
    "started_at": "started",
    "session_id": "session",
    "agent_id": "agent",
    "request_kind": "request kind",
    "parent_agent_id": "parent agent",
    "requested_model": "requested model",
    "served_model": "served model",
    "inbound_api": "API called",
    "upstream_api": "upstream API",
    "http_status": "HTTP status",
    "usage_reported": "usage reported",
    "cost_micros": "cost",
    "native_cost_micros": "native cost",
    "cache_savings_micros": "cache savings",
    "price_source": "price from",
    "native_price_source": "native price from",
    "price_input": "price input ($/M tokens)",
    "price_cached_input": "price cached input ($/M tokens)",
    "price_cache_write": "price cache write ($/M tokens)",
    "price_output": "price output ($/M tokens)",
    "ttft_ms": "time to first token",
    "duration_ms": "duration",
    "output_tps": "output speed",
    "fallback_attempt": "fallback attempt",
    "fallback_trigger": "fallback trigger",
    "request_bytes": "request bytes",
    "response_bytes": "response bytes",
}


def label(field_name: str) -> str:
    """A ledger column's name in words."""
    return LABELS.get(field_name, field_name.replace("_", " "))


def describe(field_name: str, value: Any) -> str:
    """One field as text for people."""
    if field_name in _MONEY:
        return fmt.money(value)
    if field_name in _MS:
        return fmt.ms(value)
    if field_name == "started_at" and isinstance(value, int | float):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    if field_name == "output_tps":
        return fmt.rate(value)
    if field_name in ("streamed", "usage_reported") and value in (0, 1):
        return "yes" if value else "no"
    if value is None:
        return "-"
    return str(value)


class CallDetail(ModalScreen[None]):
    """The detail view of one call."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        # Values are whatever the ledger holds (error texts quote URLs like `[/v1/chat]`): never markup.
        first = [name for name in FIRST if name in self.row]
        rest = [name for name in self.row if name not in FIRST]
        lines = [fmt.labelled(label(name), describe(name, self.row[name])) for name in first]
        cost, native = self.row.get("cost_micros"), self.row.get("native_cost_micros")
        if cost is not None and native is not None:
            lines.append(fmt.labelled("saved against native", fmt.money(native - cost)))
        total_input = sum(self.row.get(k) or 0 for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
        if total_input:
            hit = (self.row.get("cache_read_tokens") or 0) / total_input
            saved = fmt.money(self.row.get("cache_savings_micros"))
            lines.append(fmt.labelled("cache hit rate", f"{fmt.pct(hit)} (saved {saved})"))
        lines.extend(fmt.labelled(label(name), describe(name, self.row[name])) for name in rest)
        with VerticalScroll(id="detail"):
            yield Static(fmt.plain(f"Call #{self.row.get('id')}"), id="detail-title")
            yield Static(Text("\n").join(lines), id="detail-body")

    def action_dismiss(self) -> None:  # type: ignore[override]
        """Close the detail view."""
        self.dismiss(None)
