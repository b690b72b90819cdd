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

from switch.cli.serve import checked_port


def _port() -> int:
    from switch import daemon
    from switch.config import load_settings

    return daemon.proxy_port(load_settings().server.port)


ACTIONS = {"claude": ("on", "off"), "codex": ("on", "off"), "langchain": ("on", "off", "env")}


def _check_action(harness: str, action: str) -> None:
    from switch.errors import SwitchError

    if action not in ACTIONS[harness]:
        *first, last = ACTIONS[harness]
        raise SwitchError(f"`switch {harness}` takes {', '.join(first)} or {last}, not '{action}'")


def _toggle(harness: str, action: str, summary: bool = True) -> None:
    from switch import wiring
    from switch.errors import SwitchError

    _check_action(harness, action)
    try:
        if action == "on":
            port = _port()
            if harness == "claude":
                path, statusline = wiring.claude_on(port, summary)
                typer.echo(f"claude: on ({path}). Claude Code now talks to switch; start it as usual (`claude`).")
                typer.echo(_statusline_note(statusline))
                gateway = wiring.chained_gateway()
                if gateway is not None:
                    typer.echo(
                        f"Native calls: to your previous ANTHROPIC_BASE_URL, {gateway} ([providers.anthropic] "
                        "base_url in switch's config.toml while wired; `switch claude off` restores both files)."
                    )
            elif harness == "codex":
                path, kept = wiring.codex_on(port, summary)
                typer.echo(f"codex: on ({path}). Start Codex with `codex --profile switch`.")
                typer.echo(_notify_note(kept, summary))
            else:
                path = wiring.langchain_on(port)
                typer.echo(
                    f"langchain: on ({path}). In deepagents-code start `dcode -M {wiring.DEEPAGENTS_MODEL}` (or pick"
                    f" `{wiring.DEEPAGENTS_MODEL}` with /model): switch routes its orchestrator and subagents apart."
                )
        else:
            restored = {"claude": wiring.claude_off, "codex": wiring.codex_off, "langchain": wiring.langchain_off}[
                harness
            ]()
            typer.echo(f"{harness}: off ({restored} restored)" if restored else f"{harness}: was not on")
    except OSError as exc:
        # The harness's own settings file: name it, as wiring errors do (WiringError is a SwitchError).
        raise SwitchError(f"cannot change {exc.filename or 'the settings file'}: {exc.strerror}") from None


def _statusline_note(outcome: str) -> str:
    from switch import wiring

    if outcome == "installed":
        return (
            "Status line: switch's (served models, real spend, native estimate, cache, fallbacks) is installed; "
            "`switch claude on --no-statusline` removes it, `switch claude off` restores everything."
        )
    if outcome == "kept":
        return (
            "Status line: you have your own, so switch left it alone. To show switch's line too, have your command "
            f"print it: pipe the same JSON to `{shlex.join(wiring.hook_argv('statusline'))}`."
        )
    return "Status line: not installed (`switch claude on` installs it)."


def _notify_note(kept: bool, summary: bool) -> str:
    from switch import wiring

    if kept:
        theirs = wiring.codex_user_notify() or []
        combined = json.dumps(wiring.codex_notify_argv(theirs))
        return (
            "Per-turn summary: you have your own `notify` program, so switch left it alone. To get both, set "
            f"notify = {combined} (switch runs yours after its own)."
        )
    if not summary:
        return "Per-turn summary: not installed (`switch codex on` installs it)."
    return (
        "Per-turn summary: after each turn switch appends the session's models, spend and savings to "
        "$SWITCH_HOME/logs/turns.log and shows a desktop notification where one is available "
        "(`switch codex on --no-notify` removes it)."
    )


def _claude_launch_settings(port: int, statusline: bool) -> dict[str, Any]:
    """`--settings` for one launch: the proxy, and switch's status line unless the user has their own."""
    from switch import wiring

    settings: dict[str, Any] = {"env": wiring.claude_env(port)}
    if statusline:
        try:
            user = json.loads(wiring.claude_settings_path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            user = {}
        if not (isinstance(user, dict) and user.get("statusLine")):
            settings["statusLine"] = wiring.claude_statusline()
    return settings


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""

    @app.command()
    def claude(
        action: str = typer.Argument(..., help="on or off."),
        no_statusline: bool = typer.Option(False, "--no-statusline", help="Do not install switch's status line."),
    ) -> None:
        """Point Claude Code's settings.json at switch (with switch's status line), or restore it exactly."""
        _toggle("claude", action, not no_statusline)

    @app.command()
    def codex(
        action: str = typer.Argument(..., help="on or off."),
        no_notify: bool = typer.Option(False, "--no-notify", help="Do not add switch's per-turn summary."),
    ) -> None:
        """Add (or remove) the `switch` provider, profile and per-turn summary in Codex's config.toml."""
        _toggle("codex", action, not no_notify)

    @app.command()
    def langchain(action: str = typer.Argument(..., help="on, off or env.")) -> None:
        """Wire deepagents-code (on/off), or print the exports for plain LangChain scripts (env)."""
        _check_action("langchain", action)
        if action == "env":
            from switch import wiring

            for name, value in wiring.langchain_env(_port()).items():
                typer.echo(f"export {name}={shlex.quote(value)}")
            for note in wiring.langchain_env_notes():
                typer.echo(note)
            return
        _toggle("langchain", action)

    @app.command()
    def up(
        port: int = typer.Option(None, help="Port (default: [server] port, 8742).", callback=checked_port(1)),
    ) -> None:
        """Run the proxy in the background."""
        from switch import daemon
        from switch.cli.serve import startup_checks

        settings = startup_checks()[0].settings
        result = daemon.start(port or settings.server.port)
        word = "already running" if result.get("already") else "started"
        where = f"log: {result['log']}" if result.get("log") else "in the foreground (`switch serve`)"
        typer.echo(f"switch proxy {word} on 127.0.0.1:{result['port']} (pid {result['pid']}); {where}")

    @app.command()
    def down() -> None:
        """Stop this home's background proxy (exit code 1 when none was running)."""
        from switch import daemon
        from switch.config import load_settings

        result = daemon.stop(port=load_settings().server.port)
        if not result["stopped"]:
            typer.echo(f"switch proxy: {result['reason']}")
            raise typer.Exit(1)
        typer.echo(f"switch proxy stopped (pid {result['pid']})")

    def _team_lag() -> dict[str, Any] | None:
        from switch.config import load_settings

        if load_settings().team is None:
            return None
        from switch.checks.team import team_lag_line

        ok, line, fix = team_lag_line()
        return {"ok": ok, "line": line, "fix": fix}

    @app.command("status")
    def status_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the proxy runs, on which port, since when, with which preset (exit code 1 when it does not)."""
        from switch import daemon
        from switch.config import load_settings
        from switch.routing.presets import active_name

        result: dict[str, Any] = {
            **daemon.status(load_settings().server.port),
            "home": daemon.this_home(),
            "preset": active_name() or "(none: [defaults] model)",
        }
        routing = (result.get("health") or {}).get("preset")
        if result.get("running") and isinstance(routing, dict) and routing.get("error"):
            # The proxy refused the preset the file names and kept the last good one: say which one routes.
            result["preset"] = routing.get("name")
            result["preset_error"] = routing["error"]
        team = _team_lag()
        if team is not None:
            result["team"] = team
        from switch.checks import ledger_file_check

        damaged = ledger_file_check()
        if damaged is not None:
            result["ledger_file"] = damaged
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        elif result.get("running"):
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
                from switch.checks import ledger_summary

                ok, line, fix = ledger_summary(ledger)
                typer.echo(f"ledger: {line}" if ok else f"warning: ledger: {line}\n  fix: {fix}")
                if not ok:  # a failing summary already names the file's own damage
                    damaged = None
            budgets = (result.get("health") or {}).get("budgets")
            if isinstance(budgets, list):
                from switch.budgets.status import notices

                for notice in notices(budgets):
                    typer.echo(f"warning: {notice}")
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
        if result.get("preset_error") and not as_json:
            typer.echo(
                f"warning: the proxy kept preset {result['preset']}: {result['preset_error']}\n"
                "  fix: correct the file named above (the proxy takes it within a second), or `switch use NAME`"
            )
        if damaged and not as_json:
            typer.echo(f"warning: ledger: {damaged['detail']}\n  fix: {damaged['fix']}")
        if team is not None and not as_json:
            typer.echo(team["line"] if team["ok"] else f"warning: {team['line']}\n  fix: {team['fix']}")
        if not result.get("running"):
            raise typer.Exit(1)

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
        port = _port()
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
            command += ["--settings", json.dumps(_claude_launch_settings(port, not no_summary))]
        elif harness == "codex":
            # The user's own `-m` / `-c` come after these in ctx.args, so they win.
            command += wiring.codex_launch_overrides(port)
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
