"""`switch status`: whether this home's proxy runs, where, with which preset, and what needs fixing."""

from __future__ import annotations

import json
import time
from typing import Any

import typer


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    def _team_lag() -> dict[str, Any] | None:
        from switch.config import load_settings

        team = load_settings().team
        if team is None:
            return None
        from switch.checks.team import team_lag_line

        ok, line, fix = team_lag_line(team)
        return {"ok": ok, "line": line, "fix": fix}

    @app.command("status")
    def status_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the proxy runs, on which port, since when, with which preset (exit code 1 when it does not)."""
        from switch import daemon
        from switch.config import load_settings
        from switch.errors import SwitchError
        from switch.routing.presets import active_name

        try:
            configured, config_error = load_settings().server.port, None
        except SwitchError as exc:
            # A proxy may serve all the same (failing open, or on its last good config): still look for it.
            from switch.daemon import fallback_port

            configured, config_error = fallback_port(), exc.message
        result: dict[str, Any] = {
            **daemon.status(configured),
            "home": daemon.this_home(),
            "preset": active_name() or "(none: [defaults] model)",
        }
        if config_error is not None:
            result["config_error"] = config_error
        routing = (result.get("health") or {}).get("preset")
        if result.get("running") and isinstance(routing, dict) and routing.get("error"):
            # The proxy refused the preset the file names and kept the last good one: say which one routes.
            result["preset"] = routing.get("name")
            result["preset_error"] = routing["error"]
        team = _team_lag() if config_error is None else None
        if team is not None:
            result["team"] = team
        from switch.checks.doctor import ledger_file_check

        damaged = ledger_file_check()
        if damaged is not None:
            result["ledger_file"] = damaged
        from switch.cli.plans import echo_plans, read_plans

        result["plans"] = read_plans()
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        elif result.get("running"):
            service = (result.get("health") or {}).get("service")
            since = (
                f"under the login service ({service}; `switch service status`)"
                if service
                else "in the foreground (`switch serve`)"
                if result.get("foreground")
                else "since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(result["started_at"]))
            )
            typer.echo(
                f"running on 127.0.0.1:{result['port']} (pid {result['pid']}) {since}; preset {result['preset']}"
            )
            degraded = (result.get("health") or {}).get("fail_open")
            if isinstance(degraded, dict):
                typer.echo(
                    f"warning: {degraded.get('notice')}: {degraded.get('reason')}\n"
                    "  fix: correct the file named above; the proxy picks it up within a second (`switch doctor`)"
                )
            ledger = (result.get("health") or {}).get("ledger")
            if isinstance(ledger, dict):
                from switch.checks.doctor import ledger_summary

                ok, line, fix = ledger_summary(ledger)
                typer.echo(f"ledger: {line}" if ok else f"warning: ledger: {line}\n  fix: {fix}")
                if not ok:  # a failing summary already names the file's own damage
                    damaged = None
            budgets = (result.get("health") or {}).get("budgets")
            if isinstance(budgets, list):
                from switch.budgets.status import notices

                for notice in notices(budgets):
                    typer.echo(f"warning: {notice}")
        elif result.get("stale"):
            typer.echo(f"not running (stale record: {result['reason']}; `switch up` cleans it up)")
        elif result.get("unresponsive"):
            typer.echo(
                f"not answering: this home's proxy (pid {result['pid']}) does not answer on 127.0.0.1:"
                f"{result['port']}; see {daemon.log_path()}, or restart it with `switch down && switch up`"
            )
        elif result.get("other"):
            typer.echo(
                f"not running for this home ({result['home']}); port {result['port']} is held by "
                + daemon.describe_other(result["other"])
                + "; start this home's own with `switch up --port N`"
            )
        else:
            typer.echo("not running (start it with `switch up`, or `switch serve` in the foreground)")
        if result.get("preset_error") and not as_json:
            typer.echo(
                f"warning: the proxy kept preset {result['preset']}: {result['preset_error']}\n"
                "  fix: correct the file named above (the proxy takes it within a second), or `switch use NAME`"
            )
        if damaged and not as_json:
            typer.echo(f"warning: ledger: {damaged['detail']}\n  fix: {damaged['fix']}")
        if team is not None and not as_json:
            typer.echo(team["line"] if team["ok"] else f"warning: {team['line']}\n  fix: {team['fix']}")
        if not as_json:
            echo_plans(result["plans"])
        if config_error is not None:
            # After what runs (a proxy failing open, say): the config problem is still this command's error.
            typer.echo(f"switch: {config_error}", err=True)
            raise typer.Exit(2)
        if not result.get("running"):
            raise typer.Exit(1)
