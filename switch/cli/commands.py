"""The typer app behind `switch`. Each command imports what it needs inside its body so `--help` is fast."""

from __future__ import annotations

import typer

from switch.cli import dash, demo, doctor, harness, keys, ledger, presets, serve

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
demo.register(app)


@app.command()
def statusline(
    session: str = typer.Option(None, help="Show this session instead of reading Claude Code's JSON on stdin."),
) -> None:
    """One line about a harness session: models per role, real spend, native estimate, cache, last call."""
    import sys

    from switch.statusline import claude_statusline, line_for

    if session is not None:
        typer.echo(line_for(session))
        return
    raise typer.Exit(claude_statusline(sys.stdin, sys.stdout))


@app.command("codex-notify", hidden=True, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def codex_notify_command(ctx: typer.Context) -> None:
    """Codex's per-turn `notify` program (the turn's JSON last; your own notify program before it)."""
    from switch.statusline import codex_notify

    raise typer.Exit(codex_notify(ctx.args))
