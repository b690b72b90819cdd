"""The `[[budgets]]` tables of config.toml, validated (part of the config layer: `switch.config` reads them).

[[budgets]]
name = "subagents"             # optional; default "<scope>/<period>"
scope = "role:subagent"        # total | harness:NAME | role:NAME | model:PROVIDER/MODEL | session
period = "day"                 # day | week | month (calendar, local time)
limit_usd = 5.0
actions = [{ at = 0.8, do = "warn" }, { at = 0.9, do = "effort", effort = "low" },
           { at = 1.0, do = "preset", preset = "open" }, { at = 1.2, do = "block" }]

[[budgets]]
scope = "plan:anthropic"       # plan:anthropic | plan:openai: the native plan's own window, not dollars
window = "5h"                  # 5h (default) | 7d | any window the plan's answers name
actions = [{ at = 0.9, do = "preset", preset = "kimi-k3" }]   # `at`: the share of the window used
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from switch.config_schema import rules
from switch.errors import ConfigError

Period = Literal["day", "week", "month"]
Do = Literal["warn", "effort", "preset", "block"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
EFFORT_ORDER: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
SCOPE_KINDS = ("total", "harness", "role", "model", "session", "plan")
PLANS = ("anthropic", "openai")
HARNESSES = ("claude-code", "codex", "langchain", "other")
ROLES = ("orchestrator", "subagent", "background")
# How strongly each action acts: where several budgets act on one call, the strongest is recorded.
SEVERITY = {"warn": 1, "effort": 2, "preset": 3, "block": 4}


def _scope(value: str) -> None:
    kind, sep, subject = value.partition(":")
    if kind not in SCOPE_KINDS:
        raise ValueError("scope must be total, harness:NAME, role:NAME, model:PROVIDER/MODEL, session or plan:PROVIDER")
    if kind in ("total", "session"):
        if sep:
            raise ValueError(f"scope '{kind}' takes no ':NAME'")
    elif not subject:
        raise ValueError(f"scope '{kind}:' needs a name after the colon")
    if kind == "harness" and subject not in HARNESSES:
        raise ValueError(f"unknown harness (known: {', '.join(HARNESSES)})")
    if kind == "role" and subject not in ROLES:
        raise ValueError(f"unknown role (known: {', '.join(ROLES)})")
    if kind == "plan" and subject not in PLANS:
        raise ValueError(f"unknown plan (known: {', '.join(PLANS)})")
    if kind == "model":
        provider, slash, model = subject.partition("/")
        if not slash or not provider or not model:
            raise ValueError("scope 'model:' takes PROVIDER/MODEL, e.g. model:baseten/moonshotai/Kimi-K3")


def _finite_limit(value: float) -> None:
    if not math.isfinite(value) or value > 1e9:
        raise ValueError("must be a finite number of USD (at most 1e9)")


@dataclass(frozen=True, slots=True)
class BudgetAction:
    """One threshold of a budget and what happens past it."""

    at: float = field(metadata=rules(gt=0, le=100, finite=True))
    """Fraction of `limit_usd` at which the action starts (1.0 = the whole limit)."""
    do: Do
    effort: Effort | None = None
    """With `do = "effort"`: the highest reasoning effort calls of the scope may use."""
    preset: str | None = None
    """With `do = "preset"`: the preset whose route the scope's calls take."""

    def _check(self) -> None:
        if self.do == "effort" and self.effort is None:
            raise ValueError("do = 'effort' needs effort = one of " + ", ".join(EFFORT_ORDER))
        if self.do == "preset" and not self.preset:
            raise ValueError("do = 'preset' needs preset = the name of a preset")
        if self.effort is not None and self.do != "effort":
            raise ValueError("'effort' goes only with do = 'effort'")
        if self.preset is not None and self.do != "preset":
            raise ValueError("'preset' goes only with do = 'preset'")


@dataclass(frozen=True, slots=True)
class Budget:
    """A cap in USD per calendar period on one scope, with its actions."""

    name: str | None = None
    scope: str = field(default="total", metadata=rules(check=_scope))
    period: Period = "day"
    limit_usd: float | None = field(default=None, metadata=rules(gt=0, check=_finite_limit))
    """Required for every scope but `plan:`, whose thresholds are shares of the plan's window."""
    window: str | None = field(default=None, metadata=rules(min_length=1, max_length=16))
    """With `scope = "plan:..."`: the window the thresholds apply to (`5h` when not given)."""
    actions: list[BudgetAction] = field(
        default_factory=lambda: [BudgetAction(at=1.0, do="block")], metadata=rules(min_length=1)
    )
    """Thresholds and their actions (without any: block at the limit)."""

    def _check(self) -> None:
        if self.is_plan:
            if self.limit_usd is not None:
                raise ValueError("a plan: budget takes no limit_usd: its `at` thresholds are shares of the plan window")
        else:
            if self.limit_usd is None:
                raise ValueError("limit_usd is required (a positive number of USD)")
            if self.window is not None:
                raise ValueError("'window' goes only with scope = 'plan:anthropic' or 'plan:openai'")

    @property
    def is_plan(self) -> bool:
        """Whether this budget watches a native plan's window rather than dollars."""
        return self.scope.startswith("plan:")

    @property
    def plan_window(self) -> str:
        """The plan window a `plan:` budget's thresholds apply to."""
        return self.window or "5h"

    @property
    def label(self) -> str:
        """The name shown everywhere (ledger, CLI, metrics, errors)."""
        return self.name or (f"{self.scope}/{self.plan_window}" if self.is_plan else f"{self.scope}/{self.period}")

    @property
    def limit_micros(self) -> int:
        """The limit in micro-USD, the ledger's unit."""
        return round((self.limit_usd or 0) * 1_000_000)


def check_budgets(budgets: list[Budget], providers: set[str], path: Path) -> None:
    """Refuse budgets naming an unknown provider, or sharing a name (ConfigError naming the key).

    The presets their actions name are checked by `switch.budgets.presets`, which knows the preset files.
    """
    seen: set[str] = set()
    for number, budget in enumerate(budgets):
        where = f"budgets.{number}"
        if budget.label in seen:
            raise ConfigError(
                f"{path}: key '{where}.name': another budget is already called '{budget.label}'; "
                "give each budget its own name"
            )
        seen.add(budget.label)
        kind, _sep, subject = budget.scope.partition(":")
        if kind == "model":
            provider = subject.partition("/")[0]
            if provider not in providers:
                raise ConfigError(
                    f"{path}: key '{where}.scope': unknown provider '{provider}' "
                    f"(known: {', '.join(sorted(providers))}); use one of those or add [providers.{provider}]"
                )
