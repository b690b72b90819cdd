"""Prometheus metrics at `GET /metrics`, in a private registry per app.

Counters and histograms are updated on the ledger's writer thread from each priced row (never per
chunk, never on the request path); queue depth, spill size and budget use are read when scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CALL_LABELS = ("harness", "role", "served_model")
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
DURATION_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TOKEN_KINDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
)


class _Live(Collector):
    """Gauges computed at scrape time."""

    def __init__(
        self, ledger: Callable[[], dict[str, Any]] | None, budgets: Callable[[], list[dict[str, Any]]]
    ) -> None:
        self.ledger = ledger
        self.budgets = budgets

    def collect(self) -> Iterator[Metric]:
        if self.ledger is not None:
            health = self.ledger()
            queued = GaugeMetricFamily("switch_ledger_queue_depth", "Calls waiting for the ledger writer")
            queued.add_metric([], float(health.get("queued", 0)))
            spill = GaugeMetricFamily("switch_ledger_spill_bytes", "Bytes of rows waiting in the spill file")
            spill.add_metric([], float(health.get("spill_bytes", 0)))
            yield queued
            yield spill
        used = GaugeMetricFamily(
            "switch_budget_used_ratio", "Spend plus in-flight estimates over the limit, this period", labels=["budget"]
        )
        spent = GaugeMetricFamily(
            "switch_budget_spent_micros", "Micro-USD counted against the budget this period", labels=["budget"]
        )
        limit = GaugeMetricFamily("switch_budget_limit_micros", "The budget's limit in micro-USD", labels=["budget"])
        for entry in self.budgets():
            used.add_metric([entry["name"]], float(entry["used"]))
            spent.add_metric([entry["name"]], float(entry["spent_micros"]))
            limit.add_metric([entry["name"]], float(entry["limit_micros"]))
        yield used
        yield spent
        yield limit


class Metrics:
    """The proxy's metrics; `observe` is a ledger observer (writer thread)."""

    def __init__(
        self,
        ledger: Callable[[], dict[str, Any]] | None = None,
        budgets: Callable[[], list[dict[str, Any]]] = list,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        registry = self.registry
        self.calls = Counter("switch_calls", "Call attempts", [*CALL_LABELS, "outcome"], registry=registry)
        self.errors = Counter(
            "switch_errors", "Call attempts that did not complete", [*CALL_LABELS, "outcome"], registry=registry
        )
        self.tokens = Counter("switch_tokens", "Tokens by kind", [*CALL_LABELS, "kind"], registry=registry)
        self.cost = Counter("switch_cost_micros", "Cost in micro-USD (priced calls)", CALL_LABELS, registry=registry)
        self.native_cost = Counter(
            "switch_native_cost_micros",
            "What the same tokens would have cost on the model asked for, in micro-USD",
            CALL_LABELS,
            registry=registry,
        )
        self.unpriced = Counter(
            "switch_unpriced_calls", "Call attempts with no known price", CALL_LABELS, registry=registry
        )
        self.ttft = Histogram(
            "switch_ttft_seconds", "Time to first token", CALL_LABELS, buckets=TTFT_BUCKETS, registry=registry
        )
        self.duration = Histogram(
            "switch_duration_seconds", "Call duration", CALL_LABELS, buckets=DURATION_BUCKETS, registry=registry
        )
        self.fallbacks = Counter(
            "switch_fallbacks", "Attempts on a later target, by trigger", ["trigger"], registry=registry
        )
        self.budget_actions = Counter(
            "switch_budget_actions", "Calls a budget acted on", ["budget", "action"], registry=registry
        )
        registry.register(_Live(ledger, budgets))

    def observe(self, _record: Any, row: dict[str, Any]) -> None:
        """Count one priced call."""
        provider = row["provider"]
        model = f"{provider}/{row['served_model']}" if provider else "none"
        labels = (row["harness"], row["role"], model)
        outcome = row["outcome"]
        self.calls.labels(*labels, outcome).inc()
        if outcome != "completed":
            self.errors.labels(*labels, outcome).inc()
        for kind, column in TOKEN_KINDS:
            count = row[column]
            if count:
                self.tokens.labels(*labels, kind).inc(count)
        cost = row["cost_micros"]
        if cost is None:
            if provider:
                self.unpriced.labels(*labels).inc()
        elif cost:
            self.cost.labels(*labels).inc(cost)
        native = row["native_cost_micros"]
        if native:
            self.native_cost.labels(*labels).inc(native)
        if row["ttft_ms"] is not None:
            self.ttft.labels(*labels).observe(row["ttft_ms"] / 1000)
        self.duration.labels(*labels).observe(row["duration_ms"] / 1000)
        if row["fallback_attempt"]:
            self.fallbacks.labels(row["fallback_trigger"] or "unknown").inc()
        if row["budget_action"]:
            self.budget_actions.labels(row["budget"] or "", row["budget_action"]).inc()

    def exposition(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)
