"""A `CallRecord` → a priced ledger row (a dict over `schema.COLUMNS`), on the writer thread."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from switch.ledger.columns import COLUMNS
from switch.ledger.pricing import Price, PriceTable, Tokens
from switch.ledger.record import CallRecord

_RECORD_FIELDS = tuple(name for name in COLUMNS if name in CallRecord.__dataclass_fields__)
_read_record = operator.attrgetter(*_RECORD_FIELDS)
_MODELS_KEPT = 1024
"""Pairs of (served, requested) models whose prices `Pricer` keeps at hand."""


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
        self._models: dict[tuple[str, str, str, str], tuple[Price | None, Price | None, dict[str, Any]]] = {}

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
        # The writer holds the interpreter while it prices a batch: the record's fields are read in one
        # C call, and what depends only on the models (both prices, their per-million figures) once per model.
        row = dict.fromkeys(COLUMNS)
        row.update(zip(_RECORD_FIELDS, _read_record(record), strict=True))
        price, native, fixed = self._priced(
            record.provider, record.served_model, record.inbound_api, record.requested_model
        )
        row.update(fixed)
        tokens = Tokens(record.input_tokens, record.cache_read_tokens, record.cache_write_tokens, record.output_tokens)
        if price is not None:
            row["cost_micros"] = price.cost_micros(tokens)
            row["cache_savings_micros"] = price.cache_savings_micros(tokens)
        if native is not None:
            row["native_cost_micros"] = native.cost_micros(tokens)
        # Only a stream shows how fast tokens came: a whole body arrives at once, so its rate is unknowable.
        output_ms = record.output_ms
        row["output_tps"] = (
            record.output_tokens / (output_ms / 1000) if output_ms and record.output_tokens > 0 else None
        )
        row["streamed"] = int(record.streamed)
        row["usage_reported"] = int(record.usage_reported)
        return row

    def _priced(
        self, provider: str, served_model: str, inbound_api: str, requested_model: str
    ) -> tuple[Price | None, Price | None, dict[str, Any]]:
        """(price, native price, the row's fields that follow from them alone) for one pair of models, memoised."""
        key = (provider, served_model, inbound_api, requested_model)
        found = self._models.get(key)
        if found is None:
            price = self.table.lookup(provider, served_model) if provider else None
            native_provider = "anthropic" if inbound_api == "anthropic" else "openai"
            native = self.table.lookup(native_provider, requested_model) or self.table.lookup(
                native_provider, self.baselines[native_provider]
            )
            per_million = price.per_million() if price else {}
            fixed = {
                "price_source": price.source if price else None,
                "price_input": per_million.get("input"),
                "price_cached_input": per_million.get("cached_input"),
                "price_cache_write": per_million.get("cache_write"),
                "price_output": per_million.get("output"),
                "native_price_source": native.source if native else None,
            }
            if len(self._models) >= _MODELS_KEPT:  # model names come from clients: keep the memo bounded
                self._models.clear()
            found = self._models[key] = (price, native, fixed)
        return found


def unpriced_row(record: CallRecord) -> dict[str, Any]:
    """The ledger row for a record whose pricing failed: every cost unknown, nothing guessed."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    for name in _RECORD_FIELDS:
        row[name] = getattr(record, name)
    row["streamed"] = int(record.streamed)
    row["usage_reported"] = int(record.usage_reported)
    return row
