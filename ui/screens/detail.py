"""Every recorded field of one call, in a modal."""

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
        lines = [fmt.labelled(name, describe(name, value)) for name, value in self.row.items()]
        total_input = sum(self.row.get(k) or 0 for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
        if total_input:
            hit = (self.row.get("cache_read_tokens") or 0) / total_input
            saved = fmt.money(self.row.get("cache_savings_micros"))
            lines.insert(0, fmt.labelled("cache hit rate", f"{fmt.pct(hit)} (saved {saved})"))
        with VerticalScroll(id="detail"):
            yield Static(fmt.plain(f"Call #{self.row.get('id')}"), id="detail-title")
            yield Static(Text("\n").join(lines), id="detail-body")

    def action_dismiss(self) -> None:  # type: ignore[override]
        """Close the detail view."""
        self.dismiss(None)
