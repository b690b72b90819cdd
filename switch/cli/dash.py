"""`switch dash`: the terminal dashboard."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def dash() -> None:
        """Open the live dashboard (spend, savings, speed, every call)."""
        from ui.app import make_app

        make_app().run()
