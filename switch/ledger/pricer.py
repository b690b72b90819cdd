"""A `CallRecord` → a priced ledger row (a dict over `schema.COLUMNS`), on the writer thread."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switch.ledger.columns import COLUMNS
from switch.ledger.pricing import PriceTable, Tokens
from switch.ledger.record import CallRecord

_RECORD_FIELDS = tuple(name for name in COLUMNS if name in CallRecord.__dataclass_fields__)


class Pricer:
    """Costs at today's prices, and the native counterfactual (the model asked for, else the baseline)."""

    def __init__(
        self,
        overrides: Mapping[str, Mapping[str, float]] | None = None,
        *,
        baseline_anthropic: str,
        baseline_openai: str,
        table: PriceTable | None = None,
        litellm_names: Mapping[str, str] | None = None,
    ) -> None:
        self.overrides = {key: dict(value) for key, value in (overrides or {}).items()}
        self.litellm_names = dict(litellm_names or {})
        self.baselines = {"anthropic": baseline_anthropic, "openai": baseline_openai}
        self._table = table

    @property
    def table(self) -> PriceTable:
        """The price table, loaded on first use."""
        if self._table is None:
            self._table = PriceTable(self.overrides, self.litellm_names)
        return self._table

    def warm(self) -> None:
        """Load the price table now (the writer does it at start, before any call waits on it)."""
        _ = self.table

    def row(self, record: CallRecord) -> dict[str, Any]:
        """The ledger row for one record, with costs at today's prices stored alongside."""
        row = {name: getattr(record, name) for name in _RECORD_FIELDS}
        tokens = Tokens(record.input_tokens, record.cache_read_tokens, record.cache_write_tokens, record.output_tokens)
        price = self.table.lookup(record.provider, record.served_model) if record.provider else None
        row["cost_micros"] = price.cost_micros(tokens) if price else None
        row["cache_savings_micros"] = price.cache_savings_micros(tokens) if price else None
        row["price_source"] = price.source if price else None
        per_million = price.per_million() if price else {}
        row["price_input"] = per_million.get("input")
        row["price_cached_input"] = per_million.get("cached_input")
        row["price_cache_write"] = per_million.get("cache_write")
        row["price_output"] = per_million.get("output")
        native_provider = "anthropic" if record.inbound_api == "anthropic" else "openai"
        native = self.table.lookup(native_provider, record.requested_model) or self.table.lookup(
            native_provider, self.baselines[native_provider]
        )
        row["native_cost_micros"] = native.cost_micros(tokens) if native else None
        row["native_price_source"] = native.source if native else None
        # Only a stream shows how fast tokens came: a whole body arrives at once, so its rate is unknowable.
        output_ms = record.output_ms
        row["output_tps"] = (
            record.output_tokens / (output_ms / 1000) if output_ms and record.output_tokens > 0 else None
        )
        row["streamed"] = int(record.streamed)
        row["usage_reported"] = int(record.usage_reported)
        return {column: row.get(column) for column in COLUMNS}


def unpriced_row(record: CallRecord) -> dict[str, Any]:
    """The ledger row for a record whose pricing failed: every cost unknown, nothing guessed."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    for name in _RECORD_FIELDS:
        row[name] = getattr(record, name)
    row["streamed"] = int(record.streamed)
    row["usage_reported"] = int(record.usage_reported)
    return row
