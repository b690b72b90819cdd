"""Where a budget shows: `switch budgets [--json]`, `switch status`, `switch doctor` and the dashboard's overview."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from switch.ui.app import make_app
from typer.testing import CliRunner

from switch.cli.commands import app
from switch.config import load_settings
from tests.budgets.conftest import seed_spend
from tests.servers import free_port, serve_process

BUDGETS = """
[prices."baseten/moonshotai/Kimi-K3"]
input = 10000.0

[[budgets]]
name = "subagents"
scope = "role:subagent"
period = "month"
limit_usd = 10.0
actions = [{ at = 0.5, do = "warn" }, { at = 0.7, do = "effort", effort = "low" }, { at = 1.0, do = "block" }]

[[budgets]]
name = "codex"
scope = "harness:codex"
period = "week"
limit_usd = 1.0
"""


def _configure(home: Path, spent: float, extra: str = "") -> None:
    (home / "config.toml").write_text(extra + BUDGETS, encoding="utf-8")
    seed_spend(home, load_settings(), spent)


def test_switch_budgets_shows_this_periods_spend_from_the_ledger(isolated_home: Path) -> None:
    _configure(isolated_home, 7.5)
    result = CliRunner().invoke(app, ["budgets", "--json"])
    assert result.exit_code == 0, result.output
    subagents, codex = json.loads(result.output)
    assert (subagents["name"], subagents["spent_micros"], subagents["action"]) == ("subagents", 7_500_000, "effort")
    assert subagents["used"] == 0.75 and subagents["next_at"] == 1.0
    assert (codex["name"], codex["spent_micros"], codex["action"]) == ("codex", 0, None)
    text = CliRunner().invoke(app, ["budgets"]).output
    assert re.search(r"subagents\s+\[#{15}\.{5}\]\s+75%\s+\$7\.50 of \$10\.00 per month; action: effort", text), text
    assert "codex" in text and "action: none" in text


def test_switch_budgets_without_any_says_how_to_add_one(isolated_home: Path) -> None:
    result = CliRunner().invoke(app, ["budgets"])
    assert result.exit_code == 0 and "[[budgets]]" in result.output


def test_doctor_notes_a_warning_and_fails_on_a_block(isolated_home: Path) -> None:
    _configure(isolated_home, 6.0)
    checks = json.loads(CliRunner().invoke(app, ["doctor", "--json"]).output)["checks"]
    (finding,) = [check for check in checks if check["check"] == "budget:subagents"]
    assert finding["ok"] and "$6.00 of $10.00 this month (60%); action: warn" in finding["detail"]
    seed_spend(isolated_home, load_settings(), 5.0)
    result = CliRunner().invoke(app, ["doctor", "--json"])
    (finding,) = [check for check in json.loads(result.output)["checks"] if check["check"] == "budget:subagents"]
    assert not finding["ok"] and "action: block" in finding["detail"] and "limit_usd" in finding["fix"]
    assert result.exit_code == 1


def test_switch_status_warns_about_a_budget_of_the_running_proxy(isolated_home: Path) -> None:
    port = free_port()
    _configure(isolated_home, 5.5, extra=f"[server]\nport = {port}\n")
    with serve_process(port, {}):
        result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert "warning: budget 'subagents': $5.50 of $10.00 this month (55%); action: warn" in result.output


async def test_the_overview_shows_a_bar_per_budget(isolated_home: Path) -> None:
    _configure(isolated_home, 9.0)
    now = time.time()
    dashboard = make_app(isolated_home / "ledger.db", clock=lambda: now, poll=3600)
    async with dashboard.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.05)
        await dashboard.workers.wait_for_complete()
        await pilot.pause(0.05)
        shown = str(dashboard.query_one("#budgets").render())
    assert "Budget subagents" in shown and "$9.0000 of $10.00 per month (90%) · effort" in shown
    assert "█" * 18 + "░" * 2 in shown
    assert "Budget codex" in shown and "(0%)" in shown
