"""`switch keys set|list|rm PROVIDER`: keys in the OS keyring (or a 0600 file where none exists)."""

from __future__ import annotations

import getpass
import json
import sys

import typer


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""
    keys_app = typer.Typer(help="Store provider API keys (never printed, never in config files).")

    @keys_app.command("set")
    def set_key(provider: str) -> None:
        """Store a key, read from a hidden prompt (or standard input when piped)."""
        from switch import keys

        if sys.stdin.isatty():
            secret = getpass.getpass(f"API key for {provider} (input hidden): ")
        else:
            secret = sys.stdin.readline()
        secret = secret.strip()
        if not secret:
            typer.echo("switch: no key given; nothing stored", err=True)
            raise typer.Exit(2)
        where = keys.store(provider, secret)
        typer.echo(f"Stored the {provider} key in the {where}.")

    @keys_app.command("list")
    def list_keys(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Which providers have a key, and where it comes from (never the key)."""
        from switch import keys
        from switch.config import load_settings

        settings = load_settings()
        sources = keys.sources({name: p.api_key_env for name, p in settings.providers.items()})
        if as_json:
            typer.echo(json.dumps({"backend": keys.backend_name(), "providers": sources}, indent=2))
            return
        typer.echo(f"Keys stored with `switch keys set` go to the {keys.backend_name()}.")
        for name, source in sorted(sources.items()):
            env = settings.providers[name].api_key_env
            hint = f"set {env} or run `switch keys set {name}`" if env else f"run `switch keys set {name}`"
            typer.echo(f"  {name:<12} {source or 'no key (' + hint + ')'}")

    @keys_app.command("rm")
    def remove_key(provider: str) -> None:
        """Delete a stored key."""
        from switch import keys

        typer.echo(f"Removed the stored {provider} key." if keys.remove(provider) else f"No stored key for {provider}.")

    app.add_typer(keys_app, name="keys")
