"""The `switch` command. Harness hooks (`statusline`, `codex-notify`) and a plain `switch serve` are dispatched
before typer and the command modules are imported: harnesses run the hooks after every message and wait for
them, and whoever starts the proxy waits for it to serve."""

import os
import sys

# No `from __future__ import annotations` here or in switch.child: it is an import like any other, and under
# `python -m switch` both load while the working directory is still first on the import path
# (tests/cli/test_working_directory.py holds them to modules Python has loaded by then).
TYPE_CHECKING = False  # `typing` costs milliseconds at start-up; the hooks below must not pay for it
if TYPE_CHECKING:
    from typing import Any

FAST_COMMANDS = ("statusline", "codex-notify")


def main() -> None:
    """Entry point of the console script."""
    from switch.child import working_directory_off_path

    # `python -m switch` puts the working directory first on the import path: a project's json.py would be
    # imported by any command (and the proxy a plain `serve` runs here) in place of the standard library's.
    working_directory_off_path()
    if sys.argv[1:2] and sys.argv[1] in FAST_COMMANDS:
        from switch.statusline import main as hook_main

        raise SystemExit(hook_main(sys.argv[1:]))
    # (The shell's completion requests run `switch` with the words in the environment, not in argv.)
    if sys.argv[1:2] == ["serve"]:
        from switch.cli.proxy_process import plain_serve_arguments

        arguments = plain_serve_arguments(sys.argv[2:])
        if arguments is not None:
            # Served from this process: no second interpreter to start (typer's path execs a lean one instead).
            from switch.proxy.server_main import main as serve

            raise SystemExit(serve(arguments))
    from switch.cli.commands import COMPLETE_VARIABLE, app

    if COMPLETE_VARIABLE in os.environ:
        # The shell asks for completions (the script `switch completion SHELL` prints): typer answers once
        # its completion classes are registered, which `add_completion=False` leaves to us.
        from typer._completion_classes import completion_init

        completion_init()
    app(prog_name="switch")


def __getattr__(name: str) -> "Any":
    # `from switch.cli import app` keeps working without making every `switch` start import typer.
    if name == "app":
        from switch.cli.commands import app

        return app
    raise AttributeError(f"module 'switch.cli' has no attribute {name!r}")
