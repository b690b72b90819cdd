"""The proxy's budget state: spend per budget this period, checked in O(1) per call (no query).

It starts from the ledger (`status.period_spend`) as of one row id, then the ledger's writer thread
adds the cost of each row committed after it (`observe`, a consumer of the recorder's stream of
committed rows), and the event loop adds each attempt's estimate while the attempt is in flight
(`hold`), released when its row is committed. Each counter has one writing thread (spend and
releases: the writer; holds and forgetting idle sessions: the event loop), so no lock is taken per
call; only a period rollover takes one.

Overshoot bound: a call is let through while (spent + in-flight estimates) is below a threshold, so
past it the spend can exceed the threshold by at most the last admitted call's estimate plus, for
every call in flight at that moment, what it actually cost beyond its estimate.
"""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from switch.budgets.periods import period_bounds
from switch.budgets.status import describe, period_spend
from switch.config_budgets import EFFORT_ORDER, SEVERITY, Budget

log = logging.getLogger("switch.budgets")

TYPICAL_OUTPUT_TOKENS = 4096
"""Output tokens an in-flight call is assumed to produce (fewer when its max_tokens is lower)."""
BYTES_PER_TOKEN = 4


@dataclass(slots=True)
class _Period:
    start: float
    end: float
    spent: int = 0
    sessions: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Tally:
    """One budget's counters."""

    budget: Budget
    kind: str
    subject: str
    steps: tuple[tuple[int, str, str | None, str | None], ...]
    """(threshold in micro-USD, action, effort, preset), highest threshold first."""
    period: _Period
    reserved: int = 0
    released: int = 0
    sweep_due: bool = False
    """The period rolled over: sessions with nothing in flight are to be forgotten (on the event loop)."""
    session_reserved: dict[str, int] = field(default_factory=dict)
    session_released: dict[str, int] = field(default_factory=dict)

    def key(self, harness: str, role: str, session: str | None, model: str) -> str | None:
        """The counter this call goes to (None: the call is outside the scope)."""
        kind = self.kind
        if kind == "total":
            return ""
        if kind == "session":
            return session
        value = harness if kind == "harness" else role if kind == "role" else model
        return "" if value == self.subject else None

    def used(self, key: str) -> int:
        if self.kind == "session":
            return (
                self.period.sessions.get(key, 0) + self.session_reserved.get(key, 0) - self.session_released.get(key, 0)
            )
        return self.period.spent + self.reserved - self.released


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the budgets do to one call: the strongest action (recorded) and the caps that apply."""

    budget: str
    action: str
    effort: str | None = None
    preset: str | None = None
    message: str | None = None


def _tally(budget: Budget, now: float) -> _Tally:
    kind, _sep, subject = budget.scope.partition(":")
    limit = budget.limit_micros
    steps = tuple(
        sorted(
            ((round(step.at * limit), step.do, step.effort, step.preset) for step in budget.actions),
            key=lambda step: (step[0], SEVERITY[step[1]]),
            reverse=True,
        )
    )
    return _Tally(budget, kind, subject, steps, _Period(*period_bounds(budget.period, now)))


def _usd(micros: int) -> str:
    return f"${micros / 1e6:.2f}"


class BudgetBook:
    """Budgets of one config: checks on the event loop, spend from the writer thread."""

    def __init__(
        self, budgets: list[Budget], config_path: str = "config.toml", clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        now = clock()
        # A plan: budget counts no dollars: `switch.budgets.plans` judges it on the plan's own window.
        self.tallies = [_tally(budget, now) for budget in budgets if not budget.is_plan]
        self.config_path = config_path
        self.prices: dict[str, tuple[float, float]] = {}
        """USD per million input and output tokens by `provider/model`, as the writer last priced them."""
        self.top_price: tuple[float, float] = (0.0, 0.0)
        self._holds: dict[int, tuple[int, tuple[tuple[_Tally, str], ...]]] = {}
        # Ids unique across runs: a record spilled by an earlier process never releases a hold of this one.
        self._ids = itertools.count(time.time_ns())
        self._roll_lock = threading.Lock()
        self.through_id = 0
        """The last ledger row the loaded spend includes: `observe` counts only rows after it."""

    # ---- start ---------------------------------------------------------------------------------

    def load(
        self, connection: sqlite3.Connection | None, now: float | None = None, prices_from: BudgetBook | None = None
    ) -> None:
        """Start from the ledger: this period's spend per budget, and recent prices for estimates.

        Given `prices_from` (the running book, at a config edit), its prices are taken over instead of
        scanning a week of calls for them: the spend comes from the rollups, so a rebuild stays cheap."""
        if prices_from is not None:
            self.prices = dict(prices_from.prices)
            self.top_price = prices_from.top_price
        if connection is None:
            return
        now = self.clock() if now is None else now
        # One read transaction: the sums and the last row id they include are of the same moment.
        connection.execute("BEGIN")
        try:
            self.through_id = int(connection.execute("SELECT COALESCE(MAX(id), 0) FROM calls").fetchone()[0])
            for tally in self.tallies:
                start, end = period_bounds(tally.budget.period, now)
                spent, sessions = period_spend(connection, tally.budget, start, end)
                tally.period = _Period(start, end, 0 if tally.kind == "session" else spent, sessions)
        finally:
            connection.rollback()
        if prices_from is not None:
            return
        rows = connection.execute(
            "SELECT provider, served_model, MAX(price_input), MAX(price_output) FROM calls "
            "WHERE started_at >= ? AND price_input IS NOT NULL GROUP BY provider, served_model",
            (now - 7 * 86400,),
        ).fetchall()
        for provider, model, price_input, price_output in rows:
            self._learn_price(f"{provider}/{model}", float(price_input or 0), float(price_output or 0))

    # ---- event loop ----------------------------------------------------------------------------

    def check(self, harness: str, role: str, session: str | None, model: str) -> Verdict | None:
        """The budgets' verdict on a call about to be routed (None: no budget acts on it).

        Every threshold reached acts (an effort cap stays on past a preset's threshold); the
        strongest action is the one recorded, and a block stops the call.
        """
        now = self.clock()
        strongest: tuple[int, _Tally, str, int] | None = None
        effort: str | None = None
        preset: str | None = None
        for tally in self.tallies:
            if now >= tally.period.end:
                self._roll(tally, now)
            if tally.sweep_due:
                self._sweep(tally)
            key = tally.key(harness, role, session, model)
            if key is None:
                continue
            used = tally.used(key)
            for threshold, action, step_effort, step_preset in tally.steps:
                if used < threshold:
                    continue
                if action == "effort" and step_effort is not None:
                    if effort is None or EFFORT_ORDER.index(step_effort) < EFFORT_ORDER.index(effort):
                        effort = step_effort
                elif action == "preset" and preset is None:
                    preset = step_preset
                if strongest is None or SEVERITY[action] > strongest[0]:
                    strongest = (SEVERITY[action], tally, action, used)
        if strongest is None:
            return None
        _severity, tally, action, used = strongest
        message = self._block_message(tally, used) if action == "block" else None
        return Verdict(tally.budget.label, action, effort, preset, message)

    def estimate(self, model: str, request_bytes: int, max_output_tokens: int | None) -> int:
        """Micro-USD a call is assumed to cost while in flight (prices are micro-USD per token)."""
        price_input, price_output = self.prices.get(model, self.top_price)
        output = min(max_output_tokens or TYPICAL_OUTPUT_TOKENS, TYPICAL_OUTPUT_TOKENS)
        return round(request_bytes / BYTES_PER_TOKEN * price_input + output * price_output)

    def hold(self, harness: str, role: str, session: str | None, model: str, amount: int) -> int:
        """Count `amount` against every budget the call falls under until its record is priced; the hold's id."""
        if amount <= 0:
            return 0
        targets = []
        for tally in self.tallies:
            key = tally.key(harness, role, session, model)
            if key is None:
                continue
            if tally.kind == "session":
                tally.session_reserved[key] = tally.session_reserved.get(key, 0) + amount
            else:
                tally.reserved += amount
            targets.append((tally, key))
        if not targets:
            return 0
        hold_id = next(self._ids)
        self._holds[hold_id] = (amount, tuple(targets))
        return hold_id

    def _roll(self, tally: _Tally, now: float) -> None:
        with self._roll_lock:
            if now < tally.period.end:
                return
            tally.period = _Period(*period_bounds(tally.budget.period, now))
            tally.sweep_due = tally.kind == "session"

    @staticmethod
    def _sweep(tally: _Tally) -> None:
        # On the event loop, the only thread that adds holds: sessions with nothing in flight are
        # forgotten (the writer never touches them again), the others keep their holds.
        tally.sweep_due = False
        for key in [key for key, value in tally.session_reserved.items() if tally.session_released.get(key) == value]:
            del tally.session_reserved[key]
            tally.session_released.pop(key, None)

    def _block_message(self, tally: _Tally, used: int) -> str:
        budget = tally.budget
        until = time.strftime("%Y-%m-%d %H:%M", time.localtime(tally.period.end))
        return (
            f"switch budget '{budget.label}' ({budget.scope}, per {budget.period}) is used up: "
            f"{_usd(used)} of {_usd(budget.limit_micros)} spent this {budget.period}. "
            f"It resets at {until}; to raise it, edit limit_usd (or the block threshold) of this "
            f"[[budgets]] entry in {self.config_path}, which the running proxy picks up within a second."
        )

    # ---- writer thread -------------------------------------------------------------------------

    def observe(self, rows: list[dict[str, Any]]) -> None:
        """Count committed rows (the recorder's consumer: the writer thread, right after each commit)."""
        for row in rows:
            self.observe_row(row)

    def observe_row(self, row: dict[str, Any]) -> None:
        """Release one committed call's hold and count its cost, unless the loaded spend has it already."""
        hold_id = row.get("budget_hold", 0)
        if hold_id:
            hold = self._holds.pop(hold_id, None)
            if hold is not None:
                amount, targets = hold
                for held, held_key in targets:
                    if held.kind == "session":
                        held.session_released[held_key] = held.session_released.get(held_key, 0) + amount
                    else:
                        held.released += amount
        model = f"{row['provider']}/{row['served_model']}"
        if row.get("price_input") is not None:
            self._learn_price(model, float(row["price_input"]), float(row.get("price_output") or 0))
        cost = row.get("cost_micros")
        if not cost or row.get("id", self.through_id + 1) <= self.through_id:
            return
        started = float(row["started_at"])
        for tally in self.tallies:
            key = tally.key(row["harness"], row["role"], row.get("session_id"), model)
            if key is None:
                continue
            period = tally.period
            if started >= period.end:
                self._roll(tally, started)
                period = tally.period
            if not period.start <= started < period.end:
                continue
            if tally.kind == "session":
                period.sessions[key] = period.sessions.get(key, 0) + cost
            else:
                period.spent += cost

    def learn_listed(self, model: str, price_input: float, price_output: float) -> None:
        """Take a configured or bundled price for `model` until the ledger prices one of its calls."""
        if model not in self.prices:
            self._learn_price(model, price_input, price_output)

    def listed_top_price(self, bundled: tuple[float, float], configured: Iterable[Mapping[str, float]]) -> None:
        """Count unknown models at the highest known price (`bundled`'s, `configured`'s), never at 0."""
        top_input, top_output = bundled
        for entry in configured:
            top_input = max(top_input, float(entry.get("input", 0) or 0))
            top_output = max(top_output, float(entry.get("output", 0) or 0))
        self.top_price = (max(self.top_price[0], top_input), max(self.top_price[1], top_output))

    def _learn_price(self, model: str, price_input: float, price_output: float) -> None:
        self.prices[model] = (price_input, price_output)
        top_input, top_output = self.top_price
        if price_input > top_input or price_output > top_output:
            self.top_price = (max(top_input, price_input), max(top_output, price_output))

    # ---- reports -------------------------------------------------------------------------------

    def report(self) -> list[dict[str, Any]]:
        """Every budget's state now, in-flight estimates included (for /healthz, metrics and status)."""
        entries = []
        for tally in self.tallies:
            period = tally.period
            if tally.kind == "session":
                keys = set(period.sessions) | set(tally.session_reserved)
                top = max(keys, key=tally.used, default=None)
                used = tally.used(top) if top is not None else 0
                entries.append(describe(tally.budget, used, period.start, period.end, top))
            else:
                entries.append(describe(tally.budget, tally.used(""), period.start, period.end))
        return entries


def cap_effort(reasoning: Any, limit: str) -> Any:
    """`reasoning` (an IR `Reasoning`) with its effort at most `limit`; unchanged when already below it."""
    if reasoning is None or not reasoning.enabled:
        return reasoning
    current = reasoning.effort
    if current is not None and EFFORT_ORDER.index(current) <= EFFORT_ORDER.index(limit):
        return reasoning
    # A token budget would override the effort upstream: the cap replaces it.
    return replace(reasoning, effort=limit, budget_tokens=None)
