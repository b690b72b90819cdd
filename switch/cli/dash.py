"""`switch dash`: the terminal dashboard."""

from __future__ import annotations

import importlib
import sys

import typer


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def dash() -> None:
        """Open the live dashboard (spend, savings, speed, every call)."""
        from switch.config import load_settings
        from switch.errors import SwitchError

        load_settings()  # its presets and health tabs read the config: a broken one is reported here, once
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise SwitchError("the dashboard needs a terminal; without one, `switch spend` and `switch calls` report")
        # By name: the dashboard lives in the repository's ui/ folder, installed as switch.ui (see setup.py).
        importlib.import_module("switch.ui.app").make_app().run()
