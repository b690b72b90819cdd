"""`switch budgets`: each budget's spend this period, its limit, and the action in force."""

from __future__ import annotations

import json
import time

import typer

BAR_WIDTH = 20


def _bar(used: float) -> str:
    filled = min(BAR_WIDTH, round(used * BAR_WIDTH))
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command("budgets")
    def budgets_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Each budget's spend this period (the running proxy's view, else the ledger's) and its action."""
        from switch import daemon
        from switch.checks.budgets import budget_report
        from switch.config import load_settings

        settings = load_settings()
        health = daemon.healthy(daemon.proxy_port(settings.server.port)) if settings.budgets else None
        report = budget_report(settings, health if isinstance(health, dict) and daemon.is_ours(health) else None)
        if as_json:
            typer.echo(json.dumps(report, indent=2))
            return
        if not report:
            typer.echo("no budgets: add a [[budgets]] table to config.toml (see the README's Budgets section)")
            return
        for entry in report:
            resets = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["period_end"]))
            where = f" (top session {entry['session']})" if entry["session"] else ""
            action = entry["action"] or "none"
            typer.echo(
                f"{entry['name']:<24} {_bar(entry['used'])} {entry['used']:>5.0%}  "
                f"${entry['spent_micros'] / 1e6:.2f} of ${entry['limit_micros'] / 1e6:.2f} per {entry['period']}"
                f"{where}; action: {action}; resets {resets}"
            )
