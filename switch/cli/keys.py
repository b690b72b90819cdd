"""`switch keys set|list|rm PROVIDER`: keys in a secure OS keyring, else switch's own 0600 file; says which."""

from __future__ import annotations

import getpass
import json
import sys

import typer


def _fail(message: str) -> None:
    typer.echo(f"switch: {message}", err=True)
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""
    keys_app = typer.Typer(help="Store provider API keys (never printed, never in config files).")

    @keys_app.command("set")
    def set_key(provider: str) -> None:
        """Store a key, read from a hidden prompt (or standard input when piped)."""
        from switch import keys
        from switch.errors import SwitchError

        if sys.stdin.isatty():
            secret = getpass.getpass(f"API key for {provider} (input hidden): ")
        else:
            secret = sys.stdin.readline()
        if not secret.strip():
            _fail("no key given; nothing stored")
        try:
            typer.echo(keys.store(provider, secret))
        except SwitchError as exc:
            _fail(exc.message)

    @keys_app.command("list")
    def list_keys(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Which providers have a key, and where it comes from (never the key)."""
        from switch import keys
        from switch.config import load_settings
        from switch.errors import SwitchError

        settings = load_settings()
        try:
            keys.read_file()
        except SwitchError as exc:
            _fail(exc.message)
        found = keys.find_all({name: p.api_key_env for name, p in settings.providers.items()})
        destination = keys.destination()
        if as_json:
            payload = {
                "backend": destination,
                "providers": {name: entry.source if entry.key else None for name, entry in found.items()},
                "problems": {name: entry.problem for name, entry in found.items() if entry.problem},
            }
            typer.echo(json.dumps(payload, indent=2))
            return
        if keys.secure_keyring() is None:
            typer.echo(f"No secure OS keyring on this machine: `switch keys set` stores keys in {destination}.")
        else:
            typer.echo(f"Keys stored with `switch keys set` go to {destination}.")
        for name, entry in sorted(found.items()):
            env = settings.providers[name].api_key_env
            hint = f"set {env} or run `switch keys set {name}`" if env else f"run `switch keys set {name}`"
            if entry.problem:
                typer.echo(f"  {name:<12} unusable: {entry.problem}")
            else:
                typer.echo(f"  {name:<12} {entry.source if entry.key else 'no key (' + hint + ')'}")

    @keys_app.command("rm")
    def remove_key(provider: str) -> None:
        """Delete a stored key."""
        from switch import keys
        from switch.errors import SwitchError

        try:
            removed = keys.remove(provider)
        except SwitchError as exc:
            _fail(exc.message)
            return
        typer.echo(f"Removed the stored {provider} key." if removed else f"No stored key for {provider}.")

    app.add_typer(keys_app, name="keys")
