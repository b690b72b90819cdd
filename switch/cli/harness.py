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


def _websockets() -> bool:
    """Whether the proxy serves the Responses API over WebSocket (`[server] websockets`)."""
    from switch.config import load_settings

    return load_settings().server.websockets


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
                served = _served_window("claude-code")
                path, statusline = wiring.claude_on(port, summary, _claude_model_env(served))
                typer.echo(f"claude: on ({path}). Claude Code now talks to switch; start it as usual (`claude`).")
                typer.echo(_statusline_note(statusline))
                typer.echo(_window_note(served))
                gateway = wiring.chained_gateway()
                if gateway is not None:
                    typer.echo(
                        f"Native calls: to your previous ANTHROPIC_BASE_URL, {gateway} ([providers.anthropic] "
                        "base_url in switch's config.toml while wired; `switch claude off` restores both files)."
                    )
            elif harness == "codex":
                path, profile, migrated = wiring.codex_on(port, summary, _codex_window_keys(), _websockets())
                typer.echo(f"codex: on ({path}: the `switch` provider; {profile}: the `switch` profile).")
                if migrated:
                    typer.echo(
                        f"Moved {' and '.join(migrated)} out of {path}: Codex 0.171 refuses `--profile switch` "
                        f"while config.toml holds it (`switch codex off` restores the file as it was)."
                    )
                typer.echo("Start Codex with `codex --profile switch`.")
                typer.echo(_notify_note(summary))
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
        if action == "on":
            _warn_if_nothing_answers(harness, port)
    except OSError as exc:
        # The harness's own settings file: name it, as wiring errors do (WiringError is a SwitchError).
        raise SwitchError(f"cannot change {exc.filename or 'the settings file'}: {exc.strerror}") from None


def _warn_if_nothing_answers(harness: str, port: int) -> None:
    """Say so when neither a proxy nor the login service answers on the port `harness` was just wired to."""
    from switch import daemon
    from switch.checks.wiring import START_FIX, nothing_answers
    from switch.service.installer import read_record

    # A socket-activated service starts the proxy on this very probe: give it time to come up.
    if daemon.healthy(port, timeout=5.0 if read_record() is not None else 0.5) is None:
        typer.echo(f"warning: {nothing_answers(harness, port)}. Fix: {START_FIX}.")


def _served_window(section: str) -> Any:
    """The active preset's orchestrator target for a harness section and its model's limits (None: native)."""
    from switch.wiring import windows

    return windows.active_window(section)


def _claude_model_env(served: Any) -> dict[str, str]:
    """The settings switch owns for Claude Code from the model serving its main thread (see wiring.windows)."""
    from switch.wiring import windows

    return windows.claude_window_env(served)


def _codex_window_keys() -> dict[str, int]:
    """The Codex profile keys switch owns from the model serving Codex's main thread (see wiring.windows)."""
    from switch.wiring import windows

    return windows.codex_window_keys(windows.active_window("codex"))


def _window_note(served: Any) -> str:
    if served is None:
        return "Context window: the orchestrator is native, so Claude Code sizes its context itself."
    if served.context_window is None:
        return (
            f"Context window: unknown for {served.reference} (Claude Code assumes ~1M tokens); set "
            f'[models."{served.reference}"] context_window in config.toml and run `switch claude on` again.'
        )
    env = _claude_model_env(served)
    settings = ", ".join(f"{key}={value}" for key, value in env.items())
    return (
        f"Context window: {served.context_window} tokens ({served.reference}): set {settings}, so Claude Code "
        "compacts before the model's window is full. After `switch use`, run `switch claude on` again."
    )


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


def _notify_note(summary: bool) -> str:
    from switch import wiring

    if not summary:
        return "Per-turn summary: not installed (`switch codex on` installs it)."
    theirs = (
        " Your own `notify` program in config.toml is untouched and runs after switch's under this profile."
        if wiring.codex_user_notify()
        else ""
    )
    return (
        "Per-turn summary (the `switch` profile only): after each turn switch appends the session's models, spend "
        "and savings to $SWITCH_HOME/logs/turns.log and shows a desktop notification where one is available "
        f"(`switch codex on --no-notify` removes it).{theirs}"
    )


def _claude_launch_settings(port: int, statusline: bool) -> dict[str, Any]:
    """`--settings` for one launch: the proxy, and switch's status line unless the user has their own."""
    from switch import wiring

    settings: dict[str, Any] = {"env": {**wiring.claude_env(port), **_claude_model_env(_served_window("claude-code"))}}
    if statusline:
        try:
            user = json.loads(wiring.claude_settings_path().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            user = {}
        if not (isinstance(user, dict) and user.get("statusLine")):
            settings["statusLine"] = wiring.claude_statusline()
    return settings


def _left_to_service(port: int, command: str) -> bool:
    """For `up` and `down`: True when the login service owns this home's proxy (said so, nothing else done);
    `up` starts the installed service where its manager runs rather than a second proxy."""
    from switch import daemon
    from switch.service import installer

    health = daemon.healthy(port)
    if health is not None and daemon.is_ours(health) and health.get("service"):
        owner = f"the login service ({health['service']}, pid {health.get('pid')})"
        if command == "up":
            typer.echo(f"switch proxy already running on 127.0.0.1:{port} under {owner}")
        else:
            typer.echo(
                f"switch proxy on 127.0.0.1:{port} is run by {owner}: it would start again at the next call. "
                "To stop it for good: `switch service uninstall` (or `switch off`, which also unwires the harnesses)"
            )
        return True
    record = installer.read_record()
    if command != "up" or record is None or health is not None:
        return False
    module = installer.MANAGERS[record["manager"]]
    if not module.manager_runs():
        typer.echo(
            f"warning: the login service is installed but no {record['manager']} manager runs here; "
            "starting a background proxy instead"
        )
        return False
    for command_line in module.start_commands(record["name"]):
        subprocess.run(command_line, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + installer.START_WAIT_S
    while time.monotonic() < deadline and daemon.healthy(port) is None:
        time.sleep(0.2)
    if daemon.healthy(port) is None:
        typer.echo(f"switch: the login service did not answer on 127.0.0.1:{port}; see `switch service status`")
        raise typer.Exit(1)
    typer.echo(f"switch proxy started on 127.0.0.1:{port} by the login service ({record['manager']})")
    return True


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
        """Add (or remove) the `switch` provider (config.toml) and profile with its per-turn summary
        (switch.config.toml) for `codex --profile switch`."""
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
        if _left_to_service(port or settings.server.port, "up"):
            return
        result = daemon.start(port or settings.server.port)
        word = "already running" if result.get("already") else "started"
        where = f"log: {result['log']}" if result.get("log") else "in the foreground (`switch serve`)"
        typer.echo(f"switch proxy {word} on 127.0.0.1:{result['port']} (pid {result['pid']}); {where}")

    @app.command()
    def down() -> None:
        """Stop this home's background proxy (exit code 1 when none was running)."""
        from switch import daemon
        from switch.config import load_settings

        configured = load_settings().server.port
        if _left_to_service(configured, "down"):
            raise typer.Exit(1)
        result = daemon.stop(port=configured)
        if not result["stopped"]:
            typer.echo(f"switch proxy: {result['reason']}")
            raise typer.Exit(1)
        typer.echo(f"switch proxy stopped (pid {result['pid']})")

    def _team_lag() -> dict[str, Any] | None:
        from switch.config import load_settings

        team = load_settings().team
        if team is None:
            return None
        from switch.checks.team import team_lag_line

        ok, line, fix = team_lag_line(team)
        return {"ok": ok, "line": line, "fix": fix}

    @app.command("status")
    def status_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the proxy runs, on which port, since when, with which preset (exit code 1 when it does not)."""
        from switch import daemon
        from switch.config import load_settings
        from switch.errors import SwitchError
        from switch.routing.presets import active_name

        try:
            configured, config_error = load_settings().server.port, None
        except SwitchError as exc:
            # A proxy may serve all the same (failing open, or on its last good config): still look for it.
            from switch.checks import fallback_port

            configured, config_error = fallback_port(), exc.message
        result: dict[str, Any] = {
            **daemon.status(configured),
            "home": daemon.this_home(),
            "preset": active_name() or "(none: [defaults] model)",
        }
        if config_error is not None:
            result["config_error"] = config_error
        routing = (result.get("health") or {}).get("preset")
        if result.get("running") and isinstance(routing, dict) and routing.get("error"):
            # The proxy refused the preset the file names and kept the last good one: say which one routes.
            result["preset"] = routing.get("name")
            result["preset_error"] = routing["error"]
        team = _team_lag() if config_error is None else None
        if team is not None:
            result["team"] = team
        from switch.checks import ledger_file_check

        damaged = ledger_file_check()
        if damaged is not None:
            result["ledger_file"] = damaged
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        elif result.get("running"):
            service = (result.get("health") or {}).get("service")
            since = (
                f"under the login service ({service}; `switch service status`)"
                if service
                else "in the foreground (`switch serve`)"
                if result.get("foreground")
                else "since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(result["started_at"]))
            )
            typer.echo(
                f"running on 127.0.0.1:{result['port']} (pid {result['pid']}) {since}; preset {result['preset']}"
            )
            degraded = (result.get("health") or {}).get("fail_open")
            if isinstance(degraded, dict):
                typer.echo(
                    f"warning: {degraded.get('notice')}: {degraded.get('reason')}\n"
                    "  fix: correct the file named above; the proxy picks it up within a second (`switch doctor`)"
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
        if config_error is not None:
            # After what runs (a proxy failing open, say): the config problem is still this command's error.
            typer.echo(f"switch: {config_error}", err=True)
            raise typer.Exit(2)
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
            command += wiring.codex_launch_overrides(port, _codex_window_keys(), _websockets())
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
