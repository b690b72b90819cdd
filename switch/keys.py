"""API keys: the provider's environment variable first, then the OS keyring, then (only where no
keyring backend exists, e.g. headless Linux and CI) a file store `$SWITCH_HOME/keys.json` with mode
0600, which every command that uses it announces.

Keys are returned to the caller and never logged, stored elsewhere, or put in error messages. The
keyring is imported lazily: it is slow to import and absent on many headless machines.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from switch import locations
from switch.files import atomic_write

SERVICE = "switch"
log = logging.getLogger(__name__)


def _keyring() -> Any | None:
    """The keyring module when a real (non-failing) backend is available."""
    try:
        import keyring
        from keyring.backends import fail, null
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001 - a broken keyring configuration means "no keyring"
        return None
    if isinstance(backend, fail.Keyring | null.Keyring):
        return None
    return keyring


def file_store_path() -> Any:
    """The fallback key file."""
    return locations.home() / "keys.json"


def _file_keys() -> dict[str, str]:
    path = file_store_path()
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")))


def backend_name() -> str:
    """Where `set` stores keys on this machine."""
    return "OS keyring" if _keyring() is not None else f"file {file_store_path()} (mode 0600, no OS keyring found)"


def store(provider: str, secret: str) -> str:
    """Save a key; returns where it went."""
    keyring = _keyring()
    if keyring is not None:
        keyring.set_password(SERVICE, provider, secret)
        return "OS keyring"
    keys = _file_keys()
    keys[provider] = secret
    locations.ensure_private_dir(locations.home())
    atomic_write(file_store_path(), json.dumps(keys).encode(), default_mode=0o600)
    os.chmod(file_store_path(), 0o600)
    return f"file {file_store_path()} (mode 0600, no OS keyring found)"


def remove(provider: str) -> bool:
    """Delete a stored key; True when one was removed."""
    removed = False
    keyring = _keyring()
    if keyring is not None:
        try:
            keyring.delete_password(SERVICE, provider)
            removed = True
        except Exception:  # noqa: BLE001 - "not found" differs by backend
            pass
    keys = _file_keys()
    if provider in keys:
        del keys[provider]
        atomic_write(file_store_path(), json.dumps(keys).encode(), default_mode=0o600)
        removed = True
    return removed


def from_keyring(provider: str) -> str | None:
    """The key stored for `provider` (OS keyring, else the file store), or None."""
    keyring = _keyring()
    if keyring is not None:
        try:
            value = keyring.get_password(SERVICE, provider)
        except Exception as exc:  # noqa: BLE001 - any keyring failure means "no key there"
            log.debug("keyring unavailable: %s", type(exc).__name__)
            value = None
        if value:
            return str(value)
    return _file_keys().get(provider)


def lookup(provider: str, env_var: str | None) -> tuple[str | None, str | None]:
    """The key for `provider` and where it came from (`env:NAME`, `keyring`, `file`), or (None, None)."""
    if env_var:
        value = os.environ.get(env_var)
        if value:
            return value, f"env:{env_var}"
    keyring = _keyring()
    if keyring is not None:
        try:
            stored = keyring.get_password(SERVICE, provider)
        except Exception:  # noqa: BLE001
            stored = None
        if stored:
            return str(stored), "keyring"
    stored = _file_keys().get(provider)
    if stored:
        return stored, "file"
    return None, None


def sources(providers: dict[str, str | None]) -> dict[str, str | None]:
    """Where each provider's key comes from (`env:NAME`, `keyring`, `file`), or None; never the key itself."""
    return {name: lookup(name, env_var)[1] for name, env_var in providers.items()}
