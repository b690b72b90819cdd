"""`switch serve`: check its options, then become the proxy's own lean process (`cli/proxy_process.py`)."""

from __future__ import annotations

import os
from typing import Any

import typer

from switch.child import HIGHEST_PORT
from switch.cli.proxy_process import become_proxy, proxy_arguments

# `up` and `run` refuse to start on what the proxy refuses; they import the checks from here.
from switch.proxy.server_main import startup_checks as startup_checks


def checked_port(lowest: int) -> Any:
    """A typer callback refusing a `--port` outside `lowest`..65535 (click's own check would wrap it modulo 65536)."""

    def check(value: int | None) -> int | None:
        if value is not None and not lowest <= value <= HIGHEST_PORT:
            free = " (0 picks a free one)" if lowest == 0 else ""
            raise typer.BadParameter(f"{value} is not a port; give a whole number from 1 to {HIGHEST_PORT}{free}")
        return value

    return check


def checked_log_level(value: str) -> str:
    """A typer callback: the log level in lower case, or a one-line refusal naming the choices."""
    from switch.child import PROXY_LOG_LEVELS

    if value.lower() not in PROXY_LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not a log level; choose one of {', '.join(PROXY_LOG_LEVELS)}")
    return value.lower()


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def serve(
        host: str = typer.Option(None, help="Address to bind (default 127.0.0.1)."),
        port: int = typer.Option(
            None, help="Port to listen on (default 8742; 0 picks a free one).", callback=checked_port(0)
        ),
        log_level: str = typer.Option(
            "warning",
            help="The least severe of the proxy's messages to print on stderr: critical, error, warning, info, "
            "debug or trace.",
            callback=checked_log_level,
        ),
        fail_open: bool = typer.Option(
            False,
            "--fail-open",
            help="Serve even when config.toml, the key file or the active preset cannot be used: every call goes to "
            "its native provider until it is fixed ([server] fail_open = false: a 503 naming the problem).",
        ),
    ) -> None:
        """Run the proxy in the foreground."""
        arguments = proxy_arguments(host, port, log_level, fail_open)
        if os.name != "posix":
            # Windows has no exec that keeps the process (os.execv there starts another, under a new PID):
            # serve from this one, typer and all.
            from switch.proxy.server_main import main

            raise typer.Exit(main(arguments))
        become_proxy(arguments)
