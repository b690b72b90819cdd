"""Doctor's findings about budgets: one per budget past a threshold (a block fails the check)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from switch.checks.base import Check, check

if TYPE_CHECKING:
    from switch.config import Settings


def budget_report(settings: Settings, health: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The running proxy's view (in-flight estimates included), else this period's spend from the ledger."""
    live = (health or {}).get("budgets")
    if isinstance(live, list):
        return live
    from switch.budgets.status import budget_report as from_ledger
    from switch.ledger.queries import connect

    connection = connect()
    try:
        return from_ledger(settings.budgets, connection)
    finally:
        if connection is not None:
            connection.close()


def budget_checks(settings: Settings, health: dict[str, Any] | None) -> list[Check]:
    """A finding per budget whose spend reached one of its thresholds."""
    if not settings.budgets:
        return []
    from switch import locations
    from switch.budgets.status import notices

    findings = []
    for entry in budget_report(settings, health):
        if entry["action"] is None:
            continue
        resets = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["period_end"]))
        line = f"{notices([entry])[0]}; resets {resets}"
        fix = (
            f"raise limit_usd of the [[budgets]] entry '{entry['name']}' in {locations.config_file()} "
            f"(the running proxy picks it up), or wait until {resets}"
        )
        # Warnings, effort caps and presets are notices; a block refuses calls, which needs the user.
        findings.append(check(f"budget:{entry['name']}", entry["action"] != "block", line, fix))
    return findings
