"""`switch serve`: check its options, then become the proxy's own lean process (`proxy/server_main.py`)."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

# `up` and `run` refuse to start on what the proxy refuses; they import the checks from here.
from switch.proxy.server_main import startup_checks as startup_checks

PROXY_MODULE = "switch.proxy.server_main"


def checked_port(lowest: int) -> Any:
    """A typer callback refusing a `--port` outside `lowest`..65535 (click's own check would wrap it modulo 65536)."""

    def check(value: int | None) -> int | None:
        if value is not None and not lowest <= value <= 65535:
            free = " (0 picks a free one)" if lowest == 0 else ""
            raise typer.BadParameter(f"{value} is not a port; give a whole number from 1 to 65535{free}")
        return value

    return check


def proxy_arguments(host: str | None, port: int | None, log_level: str, fail_open: bool) -> list[str]:
    """The parsed options of `switch serve` as the argv of the proxy process."""
    arguments = ["--log-level", log_level]
    if host is not None:
        arguments += ["--host", host]
    if port is not None:
        arguments += ["--port", str(port)]
    return arguments + (["--fail-open"] if fail_open else [])


def _proxy_environment() -> dict[str, str]:
    """This process's environment for the proxy, with switch's own folder on its path when only `-P` hid it.

    `python -m switch serve` in a checkout imports switch from the working directory, which `-P` keeps off
    the proxy's path; the proxy must run that same switch (not an installed one, or none), and nothing else
    from there: the folder goes on PYTHONPATH only when it is the one this process found switch in.
    """
    import switch

    environment = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(switch.__file__)))
    first = os.path.abspath(sys.path[0] or os.curdir) if sys.path else None
    if not sys.flags.safe_path and first == root:
        inherited = environment.get("PYTHONPATH")
        environment["PYTHONPATH"] = root + (os.pathsep + inherited if inherited else "")
    return environment


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def serve(
        host: str = typer.Option(None, help="Address to bind (default 127.0.0.1)."),
        port: int = typer.Option(
            None, help="Port to listen on (default 8742; 0 picks a free one).", callback=checked_port(0)
        ),
        log_level: str = typer.Option("warning", help="uvicorn log level."),
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
        from switch.child import python_argv

        # Before anything else: the same PID serves (what systemd, launchd and `switch up` watch), and a
        # socket handed over by socket activation (fd 3, LISTEN_PID naming this PID) is still untouched, so
        # the proxy process takes it exactly as it would have here.
        argv = python_argv("-m", PROXY_MODULE, *arguments)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(argv[0], argv, _proxy_environment())
