"""Becoming the proxy process: `switch serve`'s options as the proxy's argv, and serving from this process.

`switch serve` with only its own well-formed options is recognised here before typer is imported
(`switch/cli/__init__.py`) and serves from the command's own process: typer and the command modules cost
about as much start-up as the proxy itself, and a second interpreter as much again, while a supervisor
restarting the proxy, or a harness launcher waiting for it, waits for all of it. Anything else (`--help`,
a mistyped option, a port out of range, a repeated option) goes through typer's `serve` command, which
answers it and then execs `python -P -m switch.proxy.server_main`, so typer's memory is not kept for the
proxy's life.

Either way the proxy imports nothing from the working directory: the exec'd Python runs with `-P`, and
the command's own process took the same entry off its import path first thing (`switch.cli.main`).
"""

import os
import sys

TYPE_CHECKING = False  # `typing` costs milliseconds; this module runs before anything else is imported
if TYPE_CHECKING:
    from typing import NoReturn


def proxy_arguments(host: str | None, port: int | None, log_level: str, fail_open: bool) -> list[str]:
    """The parsed options of `switch serve` as the argv of the proxy process."""
    arguments = ["--log-level", log_level]
    if host is not None:
        arguments += ["--host", host]
    if port is not None:
        arguments += ["--port", str(port)]
    return arguments + (["--fail-open"] if fail_open else [])


def plain_serve_arguments(argv: list[str]) -> list[str] | None:
    """The proxy's argv for `switch serve ARGV`, or None when typer must read ARGV (help, errors, anything unusual).

    `child.serve_options` reads ARGV as typer would, so both ways start the same proxy.
    """
    from switch.child import serve_options

    options = serve_options(argv)
    return None if options is None else proxy_arguments(*options)


def proxy_environment() -> dict[str, str]:
    """This process's environment for the proxy, with switch's own folder on its path when only `-P` hid it.

    `python -m switch serve` in a checkout imports switch from the working directory, which `-P` keeps off
    the proxy's path; the proxy must run that same switch (not an installed one, or none), and nothing else
    from there: the folder goes on PYTHONPATH only when it is the one this process found switch in.
    """
    import switch
    from switch.child import started_from_checkout

    environment = dict(os.environ)
    if not sys.flags.safe_path and started_from_checkout():
        inherited = environment.get("PYTHONPATH")
        environment["PYTHONPATH"] = switch.ROOT + (os.pathsep + inherited if inherited else "")
    return environment


def become_proxy(arguments: list[str]) -> "NoReturn":
    """Replace this process (same PID) with the proxy's own lean one, started with `arguments`.

    The same PID serves, which is what systemd, launchd and `switch up` watch; and a socket handed over by
    socket activation (fd 3, LISTEN_PID naming this PID) is still untouched, so the proxy takes it exactly
    as it would have here.
    """
    from switch.child import PROXY_MODULE, python_argv

    argv = python_argv("-m", PROXY_MODULE, *arguments)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, proxy_environment())
