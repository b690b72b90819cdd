"""Budgets on the request path: the verdict before routing, a hold per attempt, the block answer."""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from switch.budgets.book import BudgetBook, Verdict, cap_effort
from switch.budgets.plans import Utilization, plan_verdict, stronger
from switch.config import Settings
from switch.config_budgets import Budget
from switch.errors import PresetError, RoutingError
from switch.protocols.ir import Request
from switch.routing.classify import CallInfo
from switch.routing.presets import Preset, load_preset
from switch.routing.resolve import Target, resolve_target
from switch.values import evolve

if TYPE_CHECKING:
    from switch.ledger.pricer import Pricer

log = logging.getLogger("switch.budgets")

BLOCK_STATUS = 403
"""A block is final: SDKs and harnesses do not retry 403 (and its answer says `x-should-retry: false`)."""


@dataclass(slots=True)
class BudgetGate:
    """The budgets of the running config, and the presets their `preset` actions route through."""

    book: BudgetBook
    presets: dict[str, Preset]
    settings: Settings
    by_model: bool = False
    pricer: Pricer | None = None
    """The writer's pricer: its configured and bundled prices back the in-flight estimates (see `hold`)."""
    plans: tuple[Budget, ...] = ()
    """The `plan:` budgets, judged on the native plan's window rather than dollars."""
    _providers: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    _listed: set[str] = field(default_factory=set)

    @classmethod
    def build(
        cls,
        settings: Settings,
        config_path: Path | str,
        ledger: Path | None,
        running: BudgetGate | None = None,
        pricer: Pricer | None = None,
    ) -> BudgetGate | None:
        """The gate for `settings` (None without budgets), starting from this period's spend in `ledger`.

        `running` is the gate it replaces (at a config edit): its learned prices carry over. `pricer`'s
        prices (configured, then bundled) estimate calls to targets the ledger has no recent row of."""
        if not settings.budgets:
            return None
        book = BudgetBook(settings.budgets, str(config_path))
        if pricer is not None:
            # Loaded here, off the request path (at start-up, or on the thread that rebuilds the budgets).
            book.listed_top_price(pricer.table.highest_price(), settings.prices.values())
        if ledger is not None:
            from switch.ledger.db import open_read_only

            try:
                connection = open_read_only(ledger)
                if connection is not None:
                    try:
                        book.load(connection, prices_from=running.book if running is not None else None)
                    finally:
                        connection.close()
            except sqlite3.Error as exc:
                log.error("budgets start from zero: could not read this period's spend from %s (%s)", ledger, exc)
        presets: dict[str, Preset] = {}
        for budget in settings.budgets:
            for action in budget.actions:
                if action.preset and action.preset not in presets:
                    try:
                        presets[action.preset] = load_preset(
                            action.preset, set(settings.providers), settings.defaults.model
                        )
                    except PresetError as exc:
                        log.error("budget '%s' cannot route through its preset: %s", budget.label, exc.message)
        by_model = any(budget.scope.startswith("model:") for budget in settings.budgets)
        plans = tuple(budget for budget in settings.budgets if budget.is_plan)
        return cls(book, presets, settings, by_model, pricer, plans)

    def model_key(self, reference: str, inbound_api: str, requested: str) -> str:
        """`provider/model` as the ledger will record it for a call routed to `reference`."""
        provider = self._providers.get((reference, inbound_api))
        if provider is None:
            try:
                target = resolve_target(self.settings, reference, inbound_api)  # type: ignore[arg-type]
            except RoutingError:
                return ""
            provider = self._providers[(reference, inbound_api)] = (target.provider, target.model)
        return f"{provider[0]}/{provider[1] or requested}"

    def verdict(
        self,
        info: CallInfo,
        chain: tuple[str, ...],
        inbound_api: str,
        requested: str,
        utilization: Utilization | None = None,
    ) -> Verdict | None:
        """What the budgets do to this call, judged on the first target of its route (and its plan's window)."""
        # Without a model: budget, no call needs its target's name before routing.
        model = self.model_key(chain[0], inbound_api, requested) if chain and self.by_model else ""
        verdict = self.book.check(info.harness, info.role, info.session_id, model)
        if self.plans and utilization is not None and chain and chain[0] == "native":
            provider = "anthropic" if inbound_api == "anthropic" else "openai"
            verdict = stronger(verdict, plan_verdict(self.plans, provider, utilization))
        return verdict

    def rerouted(self, verdict: Verdict) -> Preset | None:
        """The preset the verdict routes through, if it names one that loaded."""
        return self.presets.get(verdict.preset) if verdict.preset else None

    def hold(self, info: CallInfo, target: Target, request: Request, request_bytes: int) -> int:
        """Hold this attempt's estimated cost against its budgets until its record is priced."""
        model = f"{target.provider}/{target.model or request.model}"
        if model not in self._listed and self.pricer is not None:
            # Once per target: a fresh ledger has taught the book no price, and an estimate of 0 would
            # let a whole burst through a budget before its first row is priced.
            self._listed.add(model)
            price = self.pricer.table.lookup(target.provider, target.model or request.model)
            if price is not None:
                listed = price.per_million()
                self.book.learn_listed(model, listed["input"], listed["output"])
        amount = self.book.estimate(model, request_bytes, request.max_output_tokens)
        return self.book.hold(info.harness, info.role, info.session_id, model, amount)


def capped(request: Request, effort: str | None) -> Request:
    """`request` with its reasoning effort capped at `effort` (unchanged when None or already lower)."""
    if effort is None:
        return request
    reasoning = cap_effort(request.reasoning, effort)
    return request if reasoning is request.reasoning else evolve(request, reasoning=reasoning)
