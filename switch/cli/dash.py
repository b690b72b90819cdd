"""`switch dash`: the terminal dashboard."""

from __future__ import annotations

import importlib

import typer


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def dash() -> None:
        """Open the live dashboard (spend, savings, speed, every call)."""
        # By name: the dashboard lives in the repository's ui/ folder, installed as switch.ui (see setup.py).
        importlib.import_module("switch.ui.app").make_app().run()
