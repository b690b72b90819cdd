"""`switch doctor [--probe] [--json]`: what is wrong, and the command that fixes it (checks: switch.checks)."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def doctor(
        probe: bool = typer.Option(
            False,
            "--probe",
            help="Also send a 1-token request to every keyed route target; check that native and keyless ones answer.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Check config, presets, keys, the proxy and each harness's wiring."""
        from switch.checks.doctor import diagnose

        results = diagnose(probe)
        problems = [r for r in results if not r["ok"]]
        if as_json:
            typer.echo(json.dumps({"ok": not problems, "checks": results}, indent=2))
        else:
            for result in results:
                mark = "ok " if result["ok"] else "!! "
                line = f"{mark}{result['check']:<24} {result['detail']}"
                typer.echo(line + (f"\n   fix: {result['fix']}" if result["fix"] else ""))
        raise typer.Exit(1 if problems else 0)
