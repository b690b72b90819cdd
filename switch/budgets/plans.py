"""`plan:` budgets: the usual actions (warn, effort, preset, block), at shares of a native plan's window.

The share comes from the plan's last answer (the proxy's in-memory quota snapshot), not from dollars:
`at = 0.9` acts once the plan said 90 % of its window is used. A budget acts on the calls its plan
would serve: those whose route starts on the native target of that provider.
"""

from __future__ import annotations

from collections.abc import Callable

from switch.budgets.book import Verdict
from switch.config_budgets import EFFORT_ORDER, SEVERITY, Budget

Utilization = Callable[[str, str], "float | None"]
"""(provider, window) → the share of that window the plan last reported used, or None (not seen)."""


def plan_verdict(budgets: tuple[Budget, ...], provider: str, utilization: Utilization) -> Verdict | None:
    """What the `plan:` budgets of `provider` do to a call its native plan would serve (None: nothing)."""
    strongest: tuple[int, Budget, str, float] | None = None
    effort: str | None = None
    preset: str | None = None
    for budget in budgets:
        if budget.scope != f"plan:{provider}":
            continue
        used = utilization(provider, budget.plan_window)
        if used is None:
            continue
        for step in budget.actions:
            if used < step.at:
                continue
            if step.do == "effort" and step.effort is not None:
                if effort is None or EFFORT_ORDER.index(step.effort) < EFFORT_ORDER.index(effort):
                    effort = step.effort
            elif step.do == "preset" and preset is None:
                preset = step.preset
            if strongest is None or SEVERITY[step.do] > strongest[0]:
                strongest = (SEVERITY[step.do], budget, step.do, used)
    if strongest is None:
        return None
    _severity, budget, action, used = strongest
    message = None
    if action == "block":
        message = (
            f"switch budget '{budget.label}' ({budget.scope}) stops calls to the native plan: it reported "
            f"{used:.0%} of its {budget.plan_window} window used. Wait for the window to reset, or raise this "
            "[[budgets]] entry's block threshold in config.toml (the running proxy picks it up within a second)."
        )
    return Verdict(budget.label, action, effort, preset, message)


def stronger(first: Verdict | None, second: Verdict | None) -> Verdict | None:
    """Both verdicts as one: the stronger action recorded, the lower effort cap, the first preset."""
    if first is None or second is None:
        return first or second
    lead, other = (first, second) if SEVERITY[first.action] >= SEVERITY[second.action] else (second, first)
    efforts = [e for e in (first.effort, second.effort) if e is not None]
    effort = min(efforts, key=EFFORT_ORDER.index) if efforts else None
    return Verdict(lead.budget, lead.action, effort, lead.preset or other.preset, lead.message or other.message)
