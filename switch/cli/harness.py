"""`switch claude|codex|langchain on|off`, `switch langchain env`, `switch run`, `switch up|down|status`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from typing import Any

import typer


def _port() -> int:
    from switch import daemon
    from switch.config import load_settings

    return daemon.proxy_port(load_settings().server.port)


def _fail(exc: Exception) -> None:
    typer.echo(f"switch: {getattr(exc, 'message', exc)}", err=True)
    raise typer.Exit(2) from exc


def _toggle(harness: str, action: str) -> None:
    from switch import wiring
    from switch.errors import SwitchError

    if action not in ("on", "off"):
        typer.echo("switch: say `on` or `off`", err=True)
        raise typer.Exit(2)
    try:
        if action == "on":
            port = _port()
            path = {"claude": wiring.claude_on, "codex": wiring.codex_on, "langchain": wiring.langchain_on}[harness](
                port
            )
            hint = {
                "claude": "Claude Code now talks to switch; start it as usual (`claude`).",
                "codex": "Start Codex with `codex --profile switch`.",
                "langchain": (
                    f"In deepagents-code start `dcode -M {wiring.DEEPAGENTS_MODEL}` (or pick"
                    f" `{wiring.DEEPAGENTS_MODEL}` with /model): switch routes its orchestrator and subagents apart."
                ),
            }[harness]
            typer.echo(f"{harness}: on ({path}). {hint}")
        else:
            restored = {"claude": wiring.claude_off, "codex": wiring.codex_off, "langchain": wiring.langchain_off}[
                harness
            ]()
            typer.echo(f"{harness}: off ({restored} restored)" if restored else f"{harness}: was not on")
    except (SwitchError, OSError) as exc:
        _fail(exc)


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""

    @app.command()
    def claude(action: str = typer.Argument(..., help="on or off")) -> None:
        """Point Claude Code's settings.json at switch, or restore it exactly."""
        _toggle("claude", action)

    @app.command()
    def codex(action: str = typer.Argument(..., help="on or off")) -> None:
        """Add (or remove) the `switch` provider and profile in Codex's config.toml."""
        _toggle("codex", action)

    @app.command()
    def langchain(action: str = typer.Argument(..., help="on, off, or env")) -> None:
        """Wire deepagents-code (on/off), or print the exports for plain LangChain scripts (env)."""
        if action == "env":
            from switch import wiring

            for name, value in wiring.langchain_env(_port()).items():
                typer.echo(f"export {name}={shlex.quote(value)}")
            for note in wiring.langchain_env_notes():
                typer.echo(note)
            return
        _toggle("langchain", action)

    @app.command()
    def up(port: int = typer.Option(None, help="Port (default: [server] port, 8742).")) -> None:
        """Run the proxy in the background."""
        from switch import daemon
        from switch.config import load_settings
        from switch.errors import SwitchError

        try:
            result = daemon.start(port or load_settings().server.port)
        except SwitchError as exc:
            _fail(exc)
            return
        word = "already running" if result.get("already") else "started"
        where = f"log: {result['log']}" if result.get("log") else "in the foreground (`switch serve`)"
        typer.echo(f"switch proxy {word} on 127.0.0.1:{result['port']} (pid {result['pid']}); {where}")

    @app.command()
    def down() -> None:
        """Stop this home's background proxy."""
        from switch import daemon
        from switch.config import load_settings

        result = daemon.stop(port=load_settings().server.port)
        typer.echo(
            f"switch proxy stopped (pid {result['pid']})" if result["stopped"] else f"switch proxy: {result['reason']}"
        )

    @app.command("status")
    def status_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the proxy runs, on which port, since when, with which preset."""
        from switch import daemon
        from switch.config import load_settings
        from switch.routing.presets import active_name

        result: dict[str, Any] = {
            **daemon.status(load_settings().server.port),
            "home": daemon.this_home(),
            "preset": active_name() or "(none: [defaults] model)",
        }
        if as_json:
            typer.echo(json.dumps(result, indent=2))
            return
        if result.get("running"):
            since = (
                "in the foreground (`switch serve`)"
                if result.get("foreground")
                else "since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(result["started_at"]))
            )
            typer.echo(
                f"running on 127.0.0.1:{result['port']} (pid {result['pid']}) {since}; preset {result['preset']}"
            )
            ledger = (result.get("health") or {}).get("ledger")
            if isinstance(ledger, dict):
                from switch.cli.doctor import ledger_summary

                ok, line, fix = ledger_summary(ledger)
                typer.echo(f"ledger: {line}" if ok else f"warning: ledger: {line}\n  fix: {fix}")
        elif result.get("stale"):
            typer.echo(f"not running (stale record: {result['reason']}; `switch up` cleans it up)")
        elif result.get("unresponsive"):
            typer.echo(
                f"not answering: this home's proxy (pid {result['pid']}) does not answer on 127.0.0.1:"
                f"{result['port']}; see {daemon.log_path()}, or restart it with `switch down && switch up`"
            )
        elif result.get("other"):
            typer.echo(
                f"not running for this home ({result['home']}); port {result['port']} is held by "
                + daemon.describe_other(result["other"])
                + "; start this home's own with `switch up --port N`"
            )
        else:
            typer.echo("not running (start it with `switch up`, or `switch serve` in the foreground)")

    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def run(ctx: typer.Context, harness: str = typer.Argument(..., help="claude, codex or dcode")) -> None:
        """Launch a harness through switch without touching any file (extra arguments go to the harness)."""
        from switch import daemon, wiring
        from switch.config import load_settings
        from switch.errors import SwitchError

        programs = {"claude": "claude", "codex": "codex", "dcode": "dcode"}
        if harness not in programs:
            typer.echo("switch: run what? claude, codex or dcode", err=True)
            raise typer.Exit(2)
        executable = shutil.which(programs[harness])
        if executable is None:
            installs = {
                "claude": "npm install -g @anthropic-ai/claude-code",
                "codex": "npm install -g @openai/codex",
                "dcode": "pip install deepagents-code",
            }
            typer.echo(f"switch: `{programs[harness]}` is not on PATH; install it with `{installs[harness]}`", err=True)
            raise typer.Exit(127)
        port = _port()
        health = daemon.healthy(port)
        started = False
        if health is None or not daemon.is_ours(health):
            configured = load_settings().server.port
            if health is not None or not daemon.port_free(configured):
                # The port belongs to someone else: another home's proxy (its config, its ledger) must
                # not carry this user's calls, so this run gets a proxy of its own on a free port.
                holder = daemon.describe_other(health) if health is not None else "another program"
                port = daemon.free_port()
                typer.echo(
                    f"switch: port {configured} is held by {holder}; starting this home's own proxy on "
                    f"127.0.0.1:{port} for this run",
                    err=True,
                )
            else:
                port = configured
            try:
                port = int(daemon.start(port)["port"])
                started = True
            except SwitchError as exc:
                _fail(exc)
        url = wiring.proxy_url(port)
        env = dict(os.environ)
        command = [executable]
        if harness == "claude":
            command += ["--settings", json.dumps({"env": wiring.claude_env(port)})]
        elif harness == "codex":
            command += [
                "-c", 'model_provider="switch"',
                "-c", 'model_providers.switch.name="switch"',
                "-c", f'model_providers.switch.base_url="{url}/v1"',
                "-c", 'model_providers.switch.wire_api="responses"',
                "-c", "model_providers.switch.requires_openai_auth=false",
            ]  # fmt: skip
        else:
            env.update(wiring.langchain_child_env(port, env))
        try:
            code = subprocess.call([*command, *ctx.args], env=env)
        finally:
            if started:
                daemon.stop()
        raise typer.Exit(code)
