"""`switch claude|codex|langchain on|off` and `switch langchain env`: wiring each harness's own files."""

from __future__ import annotations

import json
import shlex
from typing import Any

import typer


def proxy_port() -> int:
    from switch import daemon
    from switch.config import load_settings

    return daemon.proxy_port(load_settings().server.port)


def websockets_on() -> bool:
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
            port = proxy_port()
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
                path, profile, migrated = wiring.codex_on(port, summary, codex_window_keys(), websockets_on())
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


def codex_window_keys() -> dict[str, int]:
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


def claude_launch_settings(port: int, statusline: bool) -> dict[str, Any]:
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

            for name, value in wiring.langchain_env(proxy_port()).items():
                typer.echo(f"export {name}={shlex.quote(value)}")
            for note in wiring.langchain_env_notes():
                typer.echo(note)
            return
        _toggle("langchain", action)
