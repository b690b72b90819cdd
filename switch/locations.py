"""Every path switch reads or writes, in one place, all under `SWITCH_HOME` (default `~/.switch`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from switch.errors import SwitchError


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


class SharedDirectoryError(SwitchError):
    """A directory switch would keep private state in is shared with others (or is not the user's)."""


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) readable only by the user; refuse a shared directory, chmod none.

    Only a directory of the user's own that nobody else can write to is tightened to 0700: a shared one
    (sticky or writable by others, like /tmp) or another user's is refused, and a symbolic link's
    target is checked but left as it is. `SWITCH_HOME=/tmp` run as root once made /tmp 0700.
    """
    try:
        path.mkdir(parents=True, mode=0o700)
    except FileExistsError:
        pass
    else:
        _chmod_private(path)  # ours: mkdir's mode passed through the umask
        return path
    try:
        status = path.stat()
    except OSError:
        return path  # the caller's own open or write says what is wrong
    if not stat.S_ISDIR(status.st_mode):
        return path
    shared = status.st_mode & (stat.S_ISVTX | stat.S_IWOTH)
    if shared or status.st_uid != os.getuid():
        whose = "is shared with other users" if shared else "belongs to another user"
        raise SharedDirectoryError(
            f"{path} {whose} (mode {stat.S_IMODE(status.st_mode):o}): switch keeps keys and its ledger only in a "
            "private directory and does not change this one; point SWITCH_HOME at a directory of your own "
            "(e.g. SWITCH_HOME=~/.switch)"
        )
    if not path.is_symlink() and stat.S_IMODE(status.st_mode) != 0o700:
        _chmod_private(path)
    return path


def _chmod_private(path: Path) -> None:
    try:
        path.chmod(0o700)
    except OSError:
        pass
