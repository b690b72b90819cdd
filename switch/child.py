"""How switch starts a Python of its own (the proxy, the harness hooks): never importing from the working directory.

`-P` keeps the working directory (and a script's directory) off the child's import path, so a `switch.py`
or `switch/` in whatever repository the user stands in is never run in place of switch, with the user's
keys in reach. `-I` would do that too, but it also drops PYTHONPATH and the user site-packages, which is
where `pip install --user` and PYTHONPATH-based installs put switch itself: the child would then not find
the very package its parent runs from. The parent's own import path is what the user chose; the working
directory is not.
"""

from __future__ import annotations

import sys

PROXY_MODULE = "switch.proxy.server_main"
"""The module `switch serve` execs into: the proxy's own process runs `python -P -m PROXY_MODULE`."""
PROXY_LOG_LEVELS = {"critical": 50, "error": 40, "warning": 30, "info": 20, "debug": 10, "trace": 5}
"""The proxy's `--log-level` choices and the `logging` levels they stand for (`trace`: below debug)."""


def python_argv(*arguments: str) -> list[str]:
    """This Python running `arguments`, with the working directory kept off its import path."""
    return [sys.executable, "-P", *arguments]


def serve_argv(port: int, *options: str) -> list[str]:
    """`switch serve --port PORT` as a child process of this Python."""
    return python_argv("-m", "switch", "serve", "--port", str(port), *options)
