"""What `on` remembers so `off` can undo it exactly: one JSON record per harness under `$SWITCH_HOME/wiring/`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from switch import locations
from switch.child import python_argv
from switch.errors import SwitchError
from switch.files import atomic_write

ABSENT = "__switch_absent__"


class WiringError(SwitchError):
    """A harness config file cannot be changed safely."""


def record_path(harness: str) -> Path:
    """Where the record of `harness`'s wiring lives."""
    return locations.ensure_private_dir(locations.home() / "wiring") / f"{harness}.json"


def load_record(harness: str) -> dict[str, Any] | None:
    """The record `on` left for `harness`, or None when it is not wired."""
    path = record_path(harness)
    if not path.exists():
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))


def save_record(harness: str, record: dict[str, Any]) -> None:
    """Store `harness`'s record (atomically: a crash leaves the old or the new one)."""
    atomic_write(record_path(harness), json.dumps(record, indent=2).encode())


def proxy_url(port: int) -> str:
    """The proxy's base URL."""
    return f"http://127.0.0.1:{port}"


def hook_argv(command: str) -> list[str]:
    """How a harness runs a switch hook (`statusline`, `codex-notify`) after every message: this Python
    without `site` (which costs as much start-up time as the hook itself) and without the working directory
    on its path, told where switch lives; the hooks need nothing but the standard library and switch."""
    import switch

    # The real folder, links resolved from the package's own file (not `switch.ROOT`, which keeps them): the
    # command stays the same string that earlier versions wrote into the harness's config.
    root = str(Path(switch.__file__).resolve().parent.parent)
    # After `pip uninstall` the hook must end quietly (no traceback where the harness shows its output).
    code = (
        f"import sys; sys.path.insert(0, {root!r})\n"
        "try: import switch.cli\nexcept ImportError: raise SystemExit(0)\n"
        "from switch.cli import main; main()"
    )
    return python_argv("-S", "-c", code, command)
