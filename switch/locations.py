"""Every path switch reads or writes, in one place, all under `SWITCH_HOME` (default `~/.switch`)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The state directory; tests point `SWITCH_HOME` at a temp dir."""
    configured = os.environ.get("SWITCH_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".switch"


def config_file() -> Path:
    """The user's `config.toml`."""
    return home() / "config.toml"


def ledger_file() -> Path:
    """The SQLite call ledger."""
    return home() / "ledger.db"


def presets_dir() -> Path:
    """User presets, one TOML file each."""
    return home() / "presets"


def logs_dir() -> Path:
    """Log files of background proxies."""
    return home() / "logs"


def run_dir() -> Path:
    """Pid and port files of a running proxy."""
    return home() / "run"


def fail_open_marker() -> Path:
    """Present while this home's proxy fails open (see switch.proxy.fail_open); the status line reads it."""
    return run_dir() / "fail-open.json"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) readable only by the user."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        path.chmod(0o700)
    except OSError:
        pass
    return path
