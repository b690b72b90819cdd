"""`switch service install | uninstall | status`, and `switch off` (every harness unwired, the service removed)."""

from __future__ import annotations

import json
from typing import Any

import typer

MANAGER_HELP = "systemd (Linux) or launchd (macOS); default: this system's."


def _check_manager(manager: str | None) -> None:
    from switch.errors import SwitchError
    from switch.service.installer import MANAGERS

    if manager is not None and manager not in MANAGERS:
        raise SwitchError(f"--manager takes {' or '.join(MANAGERS)}, not '{manager}'")


def _print_install(report: dict[str, Any]) -> None:
    typer.echo(f"service: wrote {', '.join(report['files'])}")
    if report.get("config_error"):
        typer.echo(
            f"warning: {report['config_error']}. The service starts all the same and fails open (every call to its "
            "native provider) until the file is fixed."
        )
    if report.get("stopped_background"):
        typer.echo(f"stopped this home's background proxy (pid {report['stopped_background']}): the service takes over")
    port = report["port"]
    if report.get("failures"):
        for failure in report["failures"]:
            typer.echo(f"warning: {failure}")
        typer.echo("The files are in place; fix the problem above and run `switch service install` again.")
        raise typer.Exit(1)
    if report.get("started"):
        held = "holds 127.0.0.1:" if report["manager"] == "systemd" else "keeps the proxy on 127.0.0.1:"
        typer.echo(
            f"service: started; {report['manager']} {held}{port} from every login on and restarts the proxy if "
            "it fails. A config it cannot use does not stop it: calls go to the native provider meanwhile."
        )
        return
    if "commands" in report:
        what = "systemd user manager" if report["manager"] == "systemd" else "launchd"
        typer.echo(f"service: not started: no {what} answers here. Start it where one runs with:")
        for command in report["commands"]:
            typer.echo(f"  {command}")
        if report["manager"] == "systemd":
            typer.echo("(to keep it up without a login session too: loginctl enable-linger $USER)")
        return
    typer.echo(f"warning: the service started but nothing answers on 127.0.0.1:{port} yet; see `switch service status`")
    raise typer.Exit(1)


def _print_uninstall(report: dict[str, Any]) -> bool:
    if not report["installed"]:
        typer.echo("service: not installed for this home")
        return False
    for failure in report.get("failures", []):
        typer.echo(f"warning: {failure}")
    for path in report["removed"]:
        typer.echo(f"service: removed {path}")
    for path in report["kept"]:
        typer.echo(f"service: kept {path}: it changed since `switch service install` wrote it; remove it yourself")
    return True


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""
    service_app = typer.Typer(
        help="A login service that keeps this home's proxy up (systemd user units with socket activation on Linux, "
        "a launchd agent on macOS).",
        no_args_is_help=True,
    )

    @service_app.command("install")
    def install_command(
        manager: str = typer.Option(None, help=MANAGER_HELP),
        print_only: bool = typer.Option(False, "--print", help="Print the files it would write, and write nothing."),
    ) -> None:
        """Write the service for this SWITCH_HOME and this Python, and start it where the service manager runs."""
        from switch.service import installer

        _check_manager(manager)
        if print_only:
            _spec, files = installer.spec_preview(manager)
            for name, text in files.items():
                typer.echo(f"# {name}\n{text}")
            return
        _print_install(installer.install(manager))

    @service_app.command("uninstall")
    def uninstall_command() -> None:
        """Stop the service and remove exactly the files `install` wrote (exit code 1 when none was installed)."""
        from switch.service import installer

        if not _print_uninstall(installer.uninstall()):
            raise typer.Exit(1)

    @service_app.command("status")
    def status_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the service is installed, intact, running and answering (exit code 1 when it is not installed)."""
        from switch.service import installer

        result = installer.status()
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        elif not result["installed"]:
            typer.echo("service: not installed for this home (`switch service install` installs it)")
        else:
            typer.echo(f"service: {result['manager']} ({result['name']}), port {result['port']}")
            for path, state in result["files"].items():
                fix = "" if state == "intact" else " (run `switch service install` again)"
                typer.echo(f"  {path}: {state}{fix}")
            if not result["manager_runs"]:
                typer.echo("  the service manager does not run here; start it where one runs with:")
                for command in result["start"]:
                    typer.echo(f"    {command}")
            elif result.get("state"):
                typer.echo(f"  state: {result['state']}")
            answering = "answers" if result["answering"] else "does not answer"
            typer.echo(f"  proxy {answering} on 127.0.0.1:{result['port']}")
        if not result["installed"]:
            raise typer.Exit(1)

    app.add_typer(service_app, name="service")

    @app.command("off")
    def off_command() -> None:
        """Undo everything switch set up: every wired harness restored byte for byte, the login service removed."""
        from switch import wiring
        from switch.service import installer

        for harness, undo in (
            ("claude", wiring.claude_off),
            ("codex", wiring.codex_off),
            ("langchain", wiring.langchain_off),
        ):
            restored = undo()
            typer.echo(f"{harness}: off ({restored} restored)" if restored else f"{harness}: was not on")
        _print_uninstall(installer.uninstall())
        typer.echo(
            "switch is out of the way: the harnesses talk to their own providers again. Your home (config, ledger, "
            "keys) is kept; see README, Upgrade and uninstall."
        )
