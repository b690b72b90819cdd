"""Prometheus metrics at `GET /metrics`.

Counts are kept in plain dicts, updated on the ledger's writer thread from each committed row (never per chunk,
never on the request path); prometheus_client is imported at the first scrape, so a proxy nobody scrapes
does not carry it. Queue depth, spill size and budget use are read when scraped.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

CALL_LABELS = ("harness", "role", "served_model")
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
DURATION_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TOKEN_KINDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_tokens"),
    ("cache_write", "cache_write_tokens"),
)
# name: (help, label names)
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "switch_calls": ("Call attempts", (*CALL_LABELS, "outcome")),
    "switch_errors": ("Call attempts that did not complete", (*CALL_LABELS, "outcome")),
    "switch_tokens": ("Tokens by kind", (*CALL_LABELS, "kind")),
    "switch_cost_micros": ("Cost in micro-USD (priced calls)", CALL_LABELS),
    "switch_native_cost_micros": (
        "What the same tokens would have cost on the model asked for, in micro-USD",
        CALL_LABELS,
    ),
    "switch_unpriced_calls": ("Call attempts with no known price", CALL_LABELS),
    "switch_fallbacks": ("Attempts on a later target, by trigger", ("trigger",)),
    "switch_budget_actions": ("Calls a budget acted on", ("budget", "action")),
}
MAX_MODEL_LABELS = 200
"""Distinct served_model labels kept; past it every new model counts under `PROVIDER/other`."""
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "switch_ttft_seconds": ("Time to first token", TTFT_BUCKETS),
    "switch_duration_seconds": ("Call duration", DURATION_BUCKETS),
}


class Metrics:
    """The proxy's metrics; `observe` is a ledger observer (writer thread), `exposition` serves a scrape."""

    def __init__(
        self,
        ledger: Callable[[], dict[str, Any]] | None = None,
        budgets: Callable[[], list[dict[str, Any]]] = list,
        configured: Callable[[str], bool] = lambda _model: False,
    ) -> None:
        self.ledger = ledger
        self.budgets = budgets
        self.configured = configured
        """Whether `provider/model` is named by the config or the active preset."""
        # Models with a label of their own: on native routes the model name is the client's choice, so only
        # configured or priced ones get one (3,000 invented names once made a 20 MB scrape).
        self._model_labels: set[str] = set()
        self._lock = threading.Lock()
        self._counts: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in COUNTERS}
        # Per label set: one count per bucket (not cumulative), then the number of observations and their sum.
        self._histograms: dict[str, dict[tuple[str, ...], list[float]]] = {name: {} for name in HISTOGRAMS}
        self._registry: Any = None

    def _add(self, name: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
        table = self._counts[name]
        table[labels] = table.get(labels, 0.0) + amount

    def _observe(self, name: str, labels: tuple[str, ...], value: float) -> None:
        bounds = HISTOGRAMS[name][1]
        entry = self._histograms[name].get(labels)
        if entry is None:
            entry = self._histograms[name][labels] = [0.0] * (len(bounds) + 2)
        slot = bisect_left(bounds, value)  # the first bound >= value: Prometheus buckets are `le`
        if slot < len(bounds):
            entry[slot] += 1
        entry[-2] += 1
        entry[-1] += value

    def observe(self, rows: list[dict[str, Any]]) -> None:
        """Count committed rows (the recorder's consumer, right after each commit)."""
        with self._lock:
            for row in rows:
                self._count(row)

    def _count(self, row: dict[str, Any]) -> None:
        provider = row["provider"]
        model = self._model_label(provider, row["served_model"], row["cost_micros"] is not None) if provider else "none"
        labels = (row["harness"], row["role"], model)
        outcome = row["outcome"]
        self._add("switch_calls", (*labels, outcome))
        if outcome != "completed":
            self._add("switch_errors", (*labels, outcome))
        for kind, column in TOKEN_KINDS:
            count = row[column]
            if count:
                self._add("switch_tokens", (*labels, kind), count)
        cost = row["cost_micros"]
        if cost is None:
            if provider:
                self._add("switch_unpriced_calls", labels)
        elif cost:
            self._add("switch_cost_micros", labels, cost)
        native = row["native_cost_micros"]
        if native:
            self._add("switch_native_cost_micros", labels, native)
        if row["ttft_ms"] is not None:
            self._observe("switch_ttft_seconds", labels, row["ttft_ms"] / 1000)
        self._observe("switch_duration_seconds", labels, row["duration_ms"] / 1000)
        if row["fallback_attempt"]:
            self._add("switch_fallbacks", (row["fallback_trigger"] or "unknown",))
        if row["budget_action"]:
            self._add("switch_budget_actions", (row["budget"] or "", row["budget_action"]))

    def _model_label(self, provider: str, served_model: str, priced: bool) -> str:
        """`provider/model` for a configured or priced model while the label set has room, else `provider/other`."""
        model = f"{provider}/{served_model}"
        if model in self._model_labels:
            return model
        if (priced or self.configured(model)) and len(self._model_labels) < MAX_MODEL_LABELS:
            self._model_labels.add(model)
            return model
        return f"{provider}/other"

    def collect(self) -> Iterator[Any]:
        """Every metric as prometheus_client families (called by its registry at a scrape)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        with self._lock:
            counts = {name: dict(table) for name, table in self._counts.items()}
            histograms = {
                name: {labels: list(entry) for labels, entry in table.items()}
                for name, table in self._histograms.items()
            }
        for name, (description, label_names) in COUNTERS.items():
            counter = CounterMetricFamily(name, description, labels=list(label_names))
            for labels, value in counts[name].items():
                counter.add_metric(list(labels), value)
            yield counter
        for name, (description, bounds) in HISTOGRAMS.items():
            histogram = HistogramMetricFamily(name, description, labels=list(CALL_LABELS))
            for labels, entry in histograms[name].items():
                cumulative, buckets = 0.0, []
                for bound, count in zip(bounds, entry, strict=False):
                    cumulative += count
                    buckets.append((repr(float(bound)), cumulative))
                buckets.append(("+Inf", entry[-2]))
                histogram.add_metric(list(labels), buckets, entry[-1])
            yield histogram
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
        for budget in self.budgets():
            used.add_metric([budget["name"]], float(budget["used"]))
            spent.add_metric([budget["name"]], float(budget["spent_micros"]))
            limit.add_metric([budget["name"]], float(budget["limit_micros"]))
        yield used
        yield spent
        yield limit

    def exposition(self) -> bytes:
        """The text exposition of every metric."""
        from prometheus_client import CollectorRegistry, generate_latest

        if self._registry is None:
            self._registry = CollectorRegistry(auto_describe=False)
            self._registry.register(self)
        return bytes(generate_latest(self._registry))
