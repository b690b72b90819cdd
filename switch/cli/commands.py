"""The `switch` command. Each command imports what it needs inside its body so `--help` is fast."""

from __future__ import annotations

import typer

from switch.cli import dash, doctor, harness, keys, ledger, presets, serve

app = typer.Typer(
    name="switch",
    help="Route AI coding harnesses to any model, and see what every call cost.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root() -> None:
    """Route AI coding harnesses to any model, and see what every call cost."""


serve.register(app)
presets.register(app)
ledger.register(app)
dash.register(app)
harness.register(app)
keys.register(app)
doctor.register(app)


def main() -> None:
    """Entry point of the console script."""
    app()
