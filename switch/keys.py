"""API keys: the provider's environment variable first, then the OS keyring.

Keys are returned to the caller and never logged, stored elsewhere, or put in error messages.
The keyring is imported lazily: it is slow to import and absent on many headless machines.
"""

from __future__ import annotations

import logging
import os

SERVICE = "switch"
log = logging.getLogger(__name__)


def from_keyring(provider: str) -> str | None:
    """The key stored for `provider` in the OS keyring, or None (also when no backend works)."""
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:
        return None
    try:
        return keyring.get_password(SERVICE, provider)
    except (KeyringError, RuntimeError, OSError) as exc:
        log.debug("keyring unavailable: %s", type(exc).__name__)
        return None


def lookup(provider: str, env_var: str | None) -> tuple[str | None, str | None]:
    """The key for `provider` and where it came from (`env:NAME` or `keyring`), or (None, None)."""
    if env_var:
        value = os.environ.get(env_var)
        if value:
            return value, f"env:{env_var}"
    value = from_keyring(provider)
    if value:
        return value, "keyring"
    return None, None


def sources(providers: dict[str, str | None]) -> dict[str, str | None]:
    """Where each provider's key comes from (`env:NAME`, `keyring`), or None; never the key itself."""
    return {name: lookup(name, env_var)[1] for name, env_var in providers.items()}
