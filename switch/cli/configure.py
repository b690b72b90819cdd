"""`switch config path|show|edit|example`: where config.toml is, what is in effect, an editor, an example."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

from switch.config_schema import to_dict

EXAMPLE = "config_example.toml"
HIDDEN = "<set, not shown>"


def example_text() -> str:
    """The commented example config shipped with switch."""
    from importlib import resources

    return resources.files("switch").joinpath(EXAMPLE).read_text(encoding="utf-8")


def effective(settings: Any) -> dict[str, Any]:
    """The settings in effect as plain data, defaults included; the access token never appears."""
    data: dict[str, Any] = to_dict(settings, exclude_none=True)
    if settings.server.access_token is not None:
        data["server"]["access_token"] = HIDDEN
    return data


def _editor() -> list[str]:
    """The user's editor command ($VISUAL, else $EDITOR), split as a shell would."""
    import shlex

    for variable in ("VISUAL", "EDITOR"):
        command = os.environ.get(variable, "").strip()
        if command:
            try:
                words = shlex.split(command)
            except ValueError:
                words = []
            if words:
                return words
            typer.echo(f"switch: ${variable} is not a command line ({command!r}); set it to e.g. nano", err=True)
            raise typer.Exit(2)
    typer.echo(
        "switch: no editor: set $EDITOR (e.g. `export EDITOR=nano`) or edit the file named by `switch config path`",
        err=True,
    )
    raise typer.Exit(2)


def _create_from_example(path: Path) -> None:
    """Start a missing config.toml as the commented example (it sets nothing), readable only by the user."""
    from switch import locations
    from switch.files import atomic_write

    locations.ensure_private_dir(path.parent)
    atomic_write(path, example_text().encode("utf-8"))


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""
    config_app = typer.Typer(
        help="Where config.toml is, the settings in effect, an editor on it, a commented example.",
        invoke_without_command=True,
    )

    @config_app.callback()
    def config_root(ctx: typer.Context) -> None:
        """Where config.toml is, the settings in effect, an editor on it, a commented example."""
        if ctx.invoked_subcommand is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(0)

    @config_app.command("path")
    def path_command() -> None:
        """Print the path of config.toml (on stderr: whether it exists yet)."""
        from switch import locations

        path = locations.config_file()
        typer.echo(str(path))
        if not path.exists():
            typer.echo("(no such file yet: switch runs on its defaults; `switch config edit` creates it)", err=True)

    @config_app.command("show")
    def show_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """The settings in effect: config.toml over the defaults, built-in providers included."""
        import tomlkit

        from switch import locations
        from switch.config import load_settings

        path = locations.config_file()
        data = effective(load_settings(path))
        if as_json:
            typer.echo(json.dumps(data, indent=2, sort_keys=True))
            return
        source = f"{path} over switch's defaults" if path.exists() else f"switch's defaults ({path} does not exist)"
        typer.echo(f"# The settings in effect: {source}.\n# Unset optional keys are left out.\n")
        typer.echo(tomlkit.dumps(data).rstrip("\n"))

    @config_app.command("edit")
    def edit_command() -> None:
        """Open config.toml in $VISUAL or $EDITOR (a missing one starts as the example), then check it."""
        import subprocess

        from switch import locations
        from switch.config import load_settings
        from switch.errors import ConfigError

        path = locations.config_file()
        editor = _editor()
        if not path.exists():
            _create_from_example(path)
            typer.echo(f"Created {path} from the commented example (it sets nothing until you uncomment a line).")
        try:
            status = subprocess.call([*editor, str(path)])
        except OSError as exc:
            typer.echo(
                f"switch: cannot start the editor {editor[0]!r}: {exc.strerror}; check $VISUAL / $EDITOR", err=True
            )
            raise typer.Exit(2) from None
        if status != 0:
            typer.echo(f"switch: the editor exited with status {status}; {path} is as the editor left it", err=True)
            raise typer.Exit(1)
        try:
            load_settings(path)
        except ConfigError as exc:
            typer.echo(f"switch: {exc.message}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"{path} is valid; a running proxy follows it within a second.")

    @config_app.command("example")
    def example_command() -> None:
        """Print a commented example config.toml (every setting with its default, all commented out)."""
        typer.echo(example_text().rstrip("\n"))

    app.add_typer(config_app, name="config")
