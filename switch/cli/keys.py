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
    keys_app = typer.Typer(
        help="Store provider API keys (never printed, never in config files).", invoke_without_command=True
    )

    @keys_app.callback()
    def keys_root(ctx: typer.Context) -> None:
        """Store provider API keys (never printed, never in config files)."""
        if ctx.invoked_subcommand is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(0)

    @keys_app.command("set")
    def set_key(provider: str = typer.Argument(..., help="A provider of config.toml, e.g. baseten.")) -> None:
        """Store a key, read from a hidden prompt (or standard input when piped)."""
        from switch import keys
        from switch.config import load_settings

        settings = load_settings()
        known = settings.providers
        # `team`: the team ledger's password (switch.team), looked up only with a [team] table.
        if provider not in known and not (provider == "team" and settings.team is not None):
            # A key no provider looks up would never show in `keys list` nor reach a call.
            _fail(
                f"unknown provider '{provider}' (known: {', '.join(sorted(known))}); "
                f"to add one, put a [providers.{provider}] table with its base_url in config.toml"
            )
        if sys.stdin.isatty():
            secret = getpass.getpass(f"API key for {provider} (input hidden): ")
        else:
            # The whole input, not its first line: a second line would otherwise be dropped without a word.
            lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
            if len(lines) > 1:
                _fail(
                    f"standard input holds {len(lines)} lines; a key is one line: pipe the key alone "
                    f"(`printf '%s' \"$KEY\" | switch keys set {provider}`); nothing stored"
                )
            secret = lines[0] if lines else ""
        if not secret.strip():
            _fail("no key given; nothing stored")
        typer.echo(keys.store(provider, secret))

    @keys_app.command("list")
    def list_keys(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Which providers have a key, and where it comes from (never the key)."""
        from switch import keys
        from switch.config import load_settings

        settings = load_settings()
        keys.read_file()  # a damaged key file stops the listing with its own `switch: …` line
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
    def remove_key(provider: str = typer.Argument(..., help="The provider whose stored key goes.")) -> None:
        """Delete a stored key (exit code 1 when none was stored)."""
        from switch import keys

        removed = keys.remove(provider)
        if not removed:
            typer.echo(f"switch: no stored key for {provider}; nothing removed", err=True)
            raise typer.Exit(1)
        typer.echo(f"Removed the stored {provider} key.")

    app.add_typer(keys_app, name="keys")
