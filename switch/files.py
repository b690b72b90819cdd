"""Safe file writes for the user's own configuration files.

Every write goes to a temporary file in the same directory, is flushed to disk, takes the original
file's permissions, and replaces the original in one `os.replace`: a crash at any point leaves
either the old file or the new one, never half of either.

A path that is a symbolic link (a settings file kept in a dotfiles repo) is written through: the
link's target is replaced in its own directory, and the link stays a link.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def atomic_write(path: Path, data: bytes, default_mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically, keeping its permissions (or `default_mode` for a new file).

    Through a symbolic link, its target is the file replaced (the link's target directory must exist)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = default_mode
    import tempfile  # here: the proxy writes a file this way only now and then, and tempfile brings shutil and bz2

    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def digest(data: bytes) -> str:
    """A short fingerprint of file contents."""
    return hashlib.sha256(data).hexdigest()
