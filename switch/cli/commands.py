"""The typer app behind `switch`. Each command imports what it needs inside its body so `--help` is fast."""

from __future__ import annotations

import errno
from typing import Any, NoReturn

import typer

try:  # typer carries its own copy of click; its usage errors are these classes, not the `click` package's
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # a typer from before it carried click
    from click.exceptions import NoArgsIsHelpError, UsageError  # type: ignore[assignment,no-redef,unused-ignore]
from typer.core import TyperGroup

from switch.cli import (
    budgets,
    configure,
    dash,
    demo,
    doctor,
    harness,
    keys,
    launch,
    ledger,
    lifecycle,
    presets,
    serve,
    service,
    status,
    team,
)

# The environment variable the completion script sets when the shell asks for completions.
COMPLETE_VARIABLE = "_SWITCH_COMPLETE"
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

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        # The root's own options (`switch --bogus`) are parsed here, before `invoke`.
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError as exc:
            _usage_line(exc)

    def invoke(self, ctx: Any) -> Any:  # typer's own copy of click.Context
        from switch.errors import SwitchError

        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise  # click shows the help, which is what was asked for
        except UsageError as exc:
            _usage_line(exc)
        except SwitchError as exc:
            typer.echo(f"switch: {exc.message}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        except Exception as exc:
            _reported_ledger_failure(exc)
            if not isinstance(exc, OSError):
                raise
            if exc.errno == errno.EPIPE:
                raise  # typer quiets a closed pipe (`switch calls | head`) itself
            where = f": {exc.filename}" if exc.filename else ""
            typer.echo(f"switch: {exc.strerror or exc}{where}", err=True)
            raise typer.Exit(EXIT_FAILED) from None


def _reported_ledger_failure(exc: BaseException) -> None:
    """A ledger read that failed past opening (a damaged page deep in the file): one line with the cause and fix."""
    import sqlite3

    if isinstance(exc, sqlite3.DatabaseError):
        from switch import locations
        from switch.ledger.db import unreadable_message

        typer.echo(f"switch: {unreadable_message(locations.ledger_file(), exc)}", err=True)
        raise typer.Exit(EXIT_USAGE) from None


def _usage_line(exc: UsageError) -> NoReturn:
    """A mistyped command or option as one `switch: …` line, like every other error (click's takes four)."""
    where = exc.ctx.command_path if exc.ctx is not None else "switch"
    typer.echo(f"switch: {exc.format_message().rstrip('.')}; see `{where} --help`", err=True)
    raise typer.Exit(EXIT_USAGE) from None


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
lifecycle.register(app)
status.register(app)
launch.register(app)
keys.register(app)
doctor.register(app)
demo.register(app)
budgets.register(app)
team.register(app)
service.register(app)
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


@app.command()
def completion(shell: str = typer.Argument(..., help="bash, zsh, fish or powershell.")) -> None:
    """Print the shell completion script: `eval "$(switch completion bash)"` in ~/.bashrc (see the README)."""
    from typer._completion_shared import get_completion_script

    from switch.errors import SwitchError

    shells = ("bash", "zsh", "fish", "powershell")
    if shell not in shells:
        raise SwitchError(f"`switch completion` takes {', '.join(shells[:-1])} or {shells[-1]}, not '{shell}'")
    typer.echo(get_completion_script(prog_name="switch", complete_var=COMPLETE_VARIABLE, shell=shell))
