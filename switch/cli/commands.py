"""The typer app behind `switch`. Each command imports what it needs inside its body so `--help` is fast."""

from __future__ import annotations

import errno
from typing import Any

import typer
from typer.core import TyperGroup

from switch.cli import budgets, configure, dash, demo, doctor, harness, keys, ledger, presets, serve, team

# Documented in `switch --help` and the README; scripts rely on them.
EXIT_OK = 0
EXIT_FAILED = 1  # a check failed, or there was nothing to act on (no proxy running, no such key)
EXIT_USAGE = 2  # a config, preset or key-file problem, or a bad argument or path: the message says what to fix

EPILOG = (
    "Exit codes: 0 done; 1 a check failed or there was nothing to act on (doctor found a problem, status or down "
    "with no proxy running, keys rm of a key that is not stored); 2 a problem with config.toml, a preset, the key "
    "file, an argument or a path (one `switch: ...` line names the file, the key and the fix); 127 `switch run`: "
    "the harness is not installed; otherwise `switch run` exits with the harness's own code."
)


class _ReportingGroup(TyperGroup):
    """Turns every error switch raises on purpose, and every failed file operation, into one `switch: …` line.

    Sub-command groups run inside the root group's `invoke`, so this one place covers every command.
    """

    def invoke(self, ctx: Any) -> Any:  # typer's own copy of click.Context
        from switch.errors import SwitchError

        try:
            return super().invoke(ctx)
        except SwitchError as exc:
            typer.echo(f"switch: {exc.message}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # typer quiets a closed pipe (`switch calls | head`) itself
            where = f": {exc.filename}" if exc.filename else ""
            typer.echo(f"switch: {exc.strerror or exc}{where}", err=True)
            raise typer.Exit(EXIT_FAILED) from None


app = typer.Typer(
    name="switch",
    cls=_ReportingGroup,
    help="Route AI coding harnesses to any model, and see what every call cost.",
    epilog=EPILOG,
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from switch import __version__

        typer.echo(f"switch {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_show_version, help="Print the version and exit."
    ),
) -> None:
    """Route AI coding harnesses to any model, and see what every call cost."""
    if ctx.invoked_subcommand is None:
        # Bare `switch` asks what it can do: that is an answer, not a usage error.
        typer.echo(ctx.get_help())
        raise typer.Exit(EXIT_OK)


serve.register(app)
presets.register(app)
ledger.register(app)
dash.register(app)
harness.register(app)
keys.register(app)
doctor.register(app)
demo.register(app)
budgets.register(app)
team.register(app)
configure.register(app)


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
