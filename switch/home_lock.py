"""One proxy per home: an OS lock on `SWITCH_HOME/proxy.lock`, held by `switch serve` for its lifetime.

Two proxies of one home would share its ledger writer's spill file and lose rows; a port check alone
misses a second proxy on another port (`serve --port`). `flock` is released by the kernel when the
process ends however it ends (kill -9 included), so a stale lock file never blocks a start. The
file holds the holder's pid, for the message a second proxy prints.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from switch import locations
from switch.errors import SwitchError

_held: int | None = None  # the locked descriptor, kept open (and so locked) until the process ends


def lock_path() -> Path:
    """The lock file of this home's proxy."""
    return locations.home() / "proxy.lock"


def holder_pid(path: Path) -> int | None:
    """The pid written in the lock file, when it holds one."""
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def hold_home(wait: float = 0.0) -> None:
    """Take this home's proxy lock for the rest of the process (waiting up to `wait` s for it to be let go).

    Raises SwitchError naming the pid that holds it and the fix."""
    global _held
    if _held is not None:
        return
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): the port check in `serve` is all there is
        return
    path = lock_path()
    locations.ensure_private_dir(path.parent)
    try:
        # O_NOFOLLOW: a link planted at the lock's name is refused, not followed to some other file.
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise SwitchError(f"{path}: cannot open the proxy lock ({exc.strerror}); remove it and try again") from None
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(descriptor)
                pid = holder_pid(path)
                raise SwitchError(
                    f"another switch proxy (pid {pid if pid is not None else 'unknown'}) already serves this home "
                    f"({locations.home()}, lock {path}); use it, or stop it first (`switch down`, or Ctrl-C where "
                    "it runs): two proxies of one home would share its ledger"
                ) from None
            time.sleep(0.1)
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    _held = descriptor
