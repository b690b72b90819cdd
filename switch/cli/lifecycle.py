"""`switch up|down`: the background proxy, or the login service when it owns this home's proxy."""

from __future__ import annotations

import subprocess
import time

import typer

from switch.cli.serve import checked_port


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
