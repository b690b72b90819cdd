"""`switch run`: launch a harness through switch for one session without touching any file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import typer

from switch.cli.harness import claude_launch_settings, codex_window_keys, proxy_port, websockets_on


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def run(
        ctx: typer.Context,
        harness: str = typer.Argument(..., help="claude, codex or dcode."),
        no_summary: bool = typer.Option(
            False, "--no-summary", help="No switch status line (Claude Code) or per-turn summary (Codex)."
        ),
    ) -> None:
        """Launch a harness through switch without touching any file (extra arguments go to the harness)."""
        from switch import daemon, wiring
        from switch.cli.serve import startup_checks
        from switch.errors import SwitchError

        programs = {"claude": "claude", "codex": "codex", "dcode": "dcode"}
        if harness not in programs:
            raise SwitchError(f"`switch run` takes claude, codex or dcode, not '{harness}'")
        # A config problem is reported before anything is looked up or started.
        configured = startup_checks()[0].settings.server.port
        executable = shutil.which(programs[harness])
        if executable is None:
            installs = {
                "claude": "npm install -g @anthropic-ai/claude-code",
                "codex": "npm install -g @openai/codex",
                "dcode": "pip install deepagents-code",
            }
            typer.echo(f"switch: `{programs[harness]}` is not on PATH; install it with `{installs[harness]}`", err=True)
            raise typer.Exit(127)
        port = proxy_port()
        health = daemon.healthy(port)
        started = False
        if health is None or not daemon.is_ours(health):
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
            port = int(daemon.start(port)["port"])
            started = True
        env = dict(os.environ)
        command = [executable]
        if harness == "claude":
            command += ["--settings", json.dumps(claude_launch_settings(port, not no_summary))]
        elif harness == "codex":
            # The user's own `-m` / `-c` come after these in ctx.args, so they win.
            command += wiring.codex_launch_overrides(port, codex_window_keys(), websockets_on())
            if not no_summary:  # for this launch only; the user's own notify program still runs after it
                command += ["-c", "notify=" + json.dumps(wiring.codex_notify_argv(wiring.codex_user_notify()))]
        else:
            env.update(wiring.langchain_child_env(port, env))
        try:
            code = subprocess.call([*command, *ctx.args], env=env)
        finally:
            if started:
                daemon.stop()
        raise typer.Exit(code)
