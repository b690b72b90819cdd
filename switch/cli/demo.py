"""`switch demo`: try switch with no key, against a simulated upstream, under a throwaway home."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def demo(
        keep: bool = typer.Option(
            False, "--keep", help="Keep the demo's SWITCH_HOME (ledger, config) and print where."
        ),
    ) -> None:
        """Run a real proxy against a SIMULATED Kimi-style upstream, send a scripted workload, show its bill."""
        import sys

        from switch.demo.run import run

        raise typer.Exit(run(keep, sys.stdout, interactive=sys.stdout.isatty() and sys.stdin.isatty()))
