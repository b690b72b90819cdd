"""API keys: the provider's environment variable first, else the key stored with `switch keys set`.

Stored keys go to a secure OS keyring where one exists: the macOS Keychain, the Windows Credential
Locker, a Secret Service keyring (GNOME Keyring, KWallet through libsecret) or KDE Wallet. Whatever
else the `keyring` library may pick is not trusted with a key: the files of `keyrings.alt` hold keys
in plain or weakly wrapped text, and unknown backends promise nothing. Where no secure keyring exists,
keys go to switch's own `$SWITCH_HOME/keys.json`, mode 0600 in a 0700 directory, and every message
says so.

Keys are returned to the caller and never logged, stored elsewhere, or put in error messages. The
keyring is imported lazily: it is slow to import and absent on many headless machines.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from switch import locations
from switch.errors import SwitchError
from switch.files import atomic_write

SERVICE = "switch"
log = logging.getLogger(__name__)

# (module, class) of the keyring backends that keep secrets encrypted by the operating system, and
# their names as users know them. A backend built on one of these classes counts as that keyring.
SECURE_BACKENDS: dict[tuple[str, str], str] = {
    ("keyring.backends.macOS", "Keyring"): "macOS Keychain",
    ("keyring.backends.Windows", "WinVaultKeyring"): "Windows Credential Locker",
    ("keyring.backends.SecretService", "Keyring"): "Secret Service keyring (GNOME Keyring or KWallet)",
    ("keyring.backends.libsecret", "Keyring"): "Secret Service keyring (libsecret)",
    ("keyring.backends.kwallet", "DBusKeyring"): "KDE Wallet",
}
_FILE_FIX = "fix it, or delete it and store your keys again with `switch keys set PROVIDER`"
# What an HTTP header value may carry: printable ASCII. A CR or LF would end the header line and let
# the rest of the key inject headers of its own; other bytes are refused by providers anyway.
_UNSENDABLE = re.compile(r"[^\x20-\x7e]")


class KeysFileError(SwitchError):
    """switch's own key file exists but cannot be used."""


@dataclass(frozen=True, slots=True)
class SecureKeyring:
    """A secure OS keyring backend and the name users know it by."""

    backend: Any
    name: str


def _secure_name(backend: Any) -> str | None:
    for cls in type(backend).__mro__:
        name = SECURE_BACKENDS.get((cls.__module__, cls.__name__))
        if name is not None:
            return name
    return None


def _no_keyring_reachable() -> bool:
    """True where no secure keyring can answer, known without importing `keyring`."""
    if os.environ.get("PYTHON_KEYRING_BACKEND") or sys.platform in ("darwin", "win32"):
        return False
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    if os.path.exists(os.path.join(config_home, "python_keyring", "keyringrc.cfg")):
        return False  # the user chose a backend in keyring's own config
    # Elsewhere the secure keyrings (Secret Service, KWallet) are reached over the D-Bus session bus. Without
    # one, importing keyring would load every backend (D-Bus, cryptography: ~9 MB in the proxy) to find none.
    return not os.environ.get("DBUS_SESSION_BUS_ADDRESS") and not os.path.exists(f"/run/user/{os.getuid()}/bus")


def secure_keyring() -> SecureKeyring | None:
    """The secure OS keyring on this machine, or None when there is none."""
    if _no_keyring_reachable():
        return None
    try:
        import keyring
        from keyring.backends.chainer import ChainerBackend
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
        # The chainer writes to its first backend and reads from all of them; use the best secure one
        # directly so a key never lands in (or is read from) an insecure backend further down.
        candidates = list(backend.backends) if isinstance(backend, ChainerBackend) else [backend]
    except Exception:  # noqa: BLE001 - a broken keyring configuration means "no keyring"
        return None
    for candidate in candidates:
        name = _secure_name(candidate)
        if name is not None:
            return SecureKeyring(candidate, name)
    return None


def file_store_path() -> Path:
    """switch's own key file, used where no secure OS keyring exists."""
    return locations.home() / "keys.json"


def _file_words() -> str:
    return f"{file_store_path()} (readable only by you, mode 0600)"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "true, false or null"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else "a string"


def read_file() -> dict[str, str]:
    """The keys in switch's key file ({} when there is none); KeysFileError names the file and the fix."""
    path = file_store_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise KeysFileError(f"cannot read the key file {path}: {exc.strerror}; {_FILE_FIX}") from None
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        # The codec's own message quotes the offending byte, which may be part of a key.
        raise KeysFileError(f"the key file {path} is not UTF-8 text; {_FILE_FIX}") from None
    except json.JSONDecodeError as exc:
        raise KeysFileError(
            f"the key file {path} is not valid JSON ({exc.msg} at line {exc.lineno}); {_FILE_FIX}"
        ) from None
    if not isinstance(data, dict):
        raise KeysFileError(
            f"the key file {path} must hold one JSON object of provider names to keys, "
            f"not {_json_kind(data)}; {_FILE_FIX}"
        )
    for provider, value in data.items():
        if not isinstance(value, str):
            raise KeysFileError(
                f"the key file {path} has {_json_kind(value)} for provider {provider!r} "
                f"where a key (a string) belongs; {_FILE_FIX}"
            )
    return dict(data)


def _write_file(entries: dict[str, str]) -> None:
    path = file_store_path()
    locations.ensure_private_dir(path.parent)
    if path.is_symlink():
        # A key file is switch's own, 0600: a link's target is somebody else's file, whose mode (and place)
        # switch must not change; replacing the link would leave the keys where the user did not put them.
        raise KeysFileError(
            f"{path} is a symbolic link (to {os.readlink(path)}): switch stores keys only in a file of its own; "
            "remove the link (`rm` it; its target stays) and run the command again"
        )
    if path.exists():
        # atomic_write keeps the current mode; make sure that mode is 0600 before anything is written.
        os.chmod(path, 0o600)
    atomic_write(path, json.dumps(entries).encode(), default_mode=0o600)


def unsendable(value: str) -> str | None:
    """What in `value` cannot go into an HTTP header (e.g. "a line break"), or None when all of it can."""
    found = _UNSENDABLE.search(value)
    if found is None:
        return None
    char = found.group()
    if char in "\r\n":
        return "a line break"
    if char < " " or char == "\x7f":
        return "a control character"
    return "a non-ASCII character"


def destination() -> str:
    """Where `switch keys set` stores keys on this machine, in words."""
    secure = secure_keyring()
    return f"the {secure.name}" if secure is not None else _file_words()


def store(provider: str, secret: str) -> str:
    """Save a key (stripped of surrounding whitespace); returns the sentence that says where it went."""
    secret = secret.strip()
    problem = unsendable(secret)
    if problem is not None:
        raise SwitchError(f"the key given for {provider} contains {problem}; nothing stored")
    secure = secure_keyring()
    if secure is not None:
        secure.backend.set_password(SERVICE, provider, secret)
        return f"Stored the {provider} key in the {secure.name}."
    entries = read_file()
    entries[provider] = secret
    _write_file(entries)
    return f"No secure OS keyring on this machine: stored the {provider} key in {_file_words()}."


def remove(provider: str) -> bool:
    """Delete a stored key from the secure keyring and the key file; True when one was removed."""
    removed = False
    secure = secure_keyring()
    if secure is not None:
        try:
            if secure.backend.get_password(SERVICE, provider) is not None:
                secure.backend.delete_password(SERVICE, provider)
                removed = True
        except Exception as exc:  # noqa: BLE001 - "not found" and "locked" differ by backend
            log.debug("keyring delete failed: %s", type(exc).__name__)
    path = file_store_path()
    if path.exists():
        entries = read_file()
        if provider in entries:
            del entries[provider]
            _write_file(entries)
            removed = True
    return removed


@dataclass(frozen=True, slots=True)
class Found:
    """One provider's key (or why there is none usable), and where it came from."""

    key: str | None
    source: str | None  # `env:NAME`, `keyring` or `file`
    problem: str | None = None
    damaged_file: bool = False  # the problem is the key file itself, not this provider's key
    kept: bool = False  # the source failed to answer; `key` is the one read before


def _source_words(source: str, keyring_name: str | None) -> str:
    if source.startswith("env:"):
        return f"environment variable {source[4:]}"
    if source == "keyring":
        return f"the {keyring_name or 'OS keyring'}"
    return f"the key file {file_store_path()}"


def _checked(provider: str, key: str, source: str, keyring_name: str | None) -> Found:
    problem = unsendable(key)
    if problem is None:
        return Found(key, source)
    fix = (
        f"set {source[4:]} again without it"
        if source.startswith("env:")
        else f"store it again with `switch keys set {provider}`"
    )
    return Found(
        None, source, f"the {provider} key from {_source_words(source, keyring_name)} contains {problem}; {fix}"
    )


def find(
    provider: str,
    env_var: str | None,
    secure: SecureKeyring | None,
    file_keys: dict[str, str] | KeysFileError,
    previous: str | None = None,
) -> Found:
    """Look one provider's key up in the environment, the secure keyring, then the key file."""
    if env_var:
        value = os.environ.get(env_var, "").strip()
        if value:
            return _checked(provider, value, f"env:{env_var}", None)
    if secure is not None:
        try:
            stored = secure.backend.get_password(SERVICE, provider)
        except Exception as exc:  # noqa: BLE001 - a locked or failing keyring must not end the lookup
            log.warning("could not read the %s key from the %s: %s", provider, secure.name, type(exc).__name__)
            if previous is not None:
                return Found(previous, "keyring", kept=True)
            stored = None
        if stored and str(stored).strip():
            return _checked(provider, str(stored).strip(), "keyring", secure.name)
    if isinstance(file_keys, KeysFileError):
        if previous is not None:
            return Found(previous, "file", kept=True)
        return Found(None, "file", file_keys.message, damaged_file=True)
    stored = file_keys.get(provider, "").strip()
    if stored:
        return _checked(provider, stored, "file", None)
    return Found(None, None)


def _file_or_error() -> dict[str, str] | KeysFileError:
    try:
        return read_file()
    except KeysFileError as exc:
        return exc


def find_all(providers: Mapping[str, str | None], previous: Mapping[str, str] | None = None) -> dict[str, Found]:
    """Every provider's key, reading the keyring and the key file once; `previous` covers sources that fail."""
    secure = secure_keyring()
    file_keys = _file_or_error()
    earlier = previous or {}
    return {name: find(name, env_var, secure, file_keys, earlier.get(name)) for name, env_var in providers.items()}


def lookup(provider: str, env_var: str | None) -> tuple[str | None, str | None]:
    """The usable key for `provider` and where it came from (`env:NAME`, `keyring`, `file`), or (None, None).

    Raises KeysFileError when the lookup reaches a damaged key file, and SwitchError for a key that
    cannot be sent (both name the source and the fix, never the key).
    """
    found = find(provider, env_var, secure_keyring(), _file_or_error())
    if found.problem is not None:
        raise KeysFileError(found.problem) if found.damaged_file else SwitchError(found.problem)
    return found.key, found.source


def sources(providers: Mapping[str, str | None]) -> dict[str, str | None]:
    """Where each provider's usable key comes from (`env:NAME`, `keyring`, `file`), or None; never the key."""
    return {name: found.source if found.key else None for name, found in find_all(providers).items()}
