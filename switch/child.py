"""How switch starts a Python of its own (the proxy, the harness hooks): never importing from the working directory.

`-P` keeps the working directory (and a script's directory) off the child's import path, so a `switch.py`
or `switch/` in whatever repository the user stands in is never run in place of switch, with the user's
keys in reach. `-I` would do that too, but it also drops PYTHONPATH and the user site-packages, which is
where `pip install --user` and PYTHONPATH-based installs put switch itself: the child would then not find
the very package its parent runs from. The parent's own import path is what the user chose; the working
directory is not.
"""

import os
import sys

PROXY_MODULE = "switch.proxy.server_main"
"""The proxy's module: `switch serve` calls it in its own process, or execs `python -P -m PROXY_MODULE` after typer."""
PROXY_LOG_LEVELS = {"critical": 50, "error": 40, "warning": 30, "info": 20, "debug": 10, "trace": 5}
"""The proxy's `--log-level` choices and the `logging` levels they stand for (`trace`: below debug)."""
HIGHEST_PORT = 65535

_VALUED = ("--host", "--port", "--log-level")


def serve_options(argv: list[str]) -> tuple[str | None, int | None, str, bool] | None:
    """(host, port, log level, fail open) from `switch serve`'s options, or None for anything else.

    Accepted: `--host H`, `--port N` (0-65535, digits only), `--log-level L` (a known level, any case), each
    also as `--name=value`, and `--fail-open`, each at most once; a value never starts with `-`. `switch
    serve` reads its own options with this before typer loads (anything it refuses goes to typer's command,
    which answers help and mistakes); the proxy process reads the argv it is started with.
    """
    values: dict[str, str] = {}
    fail_open = False
    rest = list(argv)
    while rest:
        token = rest.pop(0)
        if token == "--fail-open":
            if fail_open:
                return None
            fail_open = True
            continue
        name, equals, value = token.partition("=")
        if name not in _VALUED or name in values:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        if value.startswith("-"):
            return None
        values[name] = value
    port = values.get("--port")
    if port is not None and not (port.isascii() and port.isdigit() and int(port) <= HIGHEST_PORT):
        return None
    log_level = values.get("--log-level", "warning").lower()
    if log_level not in PROXY_LOG_LEVELS:
        return None
    return values.get("--host"), int(port) if port is not None else None, log_level, fail_open


def started_from_checkout() -> bool:
    """Whether the import path's first entry (which `-P` drops) is the folder switch was imported from: `python -m
    switch` run in a source checkout."""
    import switch  # (already loaded: this module is part of it)

    return bool(sys.path) and os.path.abspath(sys.path[0] or os.curdir) == switch.ROOT


def working_directory_off_path() -> None:
    """Give this process the import path `-P` would have: its first entry (the working directory under `python -m`,
    the script's folder for the console script) taken off, unless switch itself came from there (a checkout)."""
    if not sys.flags.safe_path and sys.path and not started_from_checkout():
        del sys.path[0]


def python_argv(*arguments: str) -> list[str]:
    """This Python running `arguments`, with the working directory kept off its import path."""
    return [sys.executable, "-P", *arguments]


def serve_argv(port: int, *options: str) -> list[str]:
    """`switch serve --port PORT` as a child process of this Python."""
    return python_argv("-m", "switch", "serve", "--port", str(port), *options)
