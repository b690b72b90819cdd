"""Real keyring backends for tests, built on the Secret Service backend class so switch counts them as secure.

`FileKeychain` keeps its secrets in the JSON file named by `SWITCH_TEST_KEYCHAIN`, so a `switch`
subprocess selects it with `PYTHON_KEYRING_BACKEND=tests.cli.keyring_backends.FileKeychain`.
`BlockingKeychain` keeps them in memory and, once armed, blocks every read until released: a
keychain waiting for the user to answer an unlock prompt.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from keyring.backends import SecretService
from keyring.errors import PasswordDeleteError


class FileKeychain(SecretService.Keyring):  # type: ignore[misc]
    """A secure-class keyring whose store is a JSON file (no D-Bus needed)."""

    priority = 5.0

    def _path(self) -> Path:
        return Path(os.environ["SWITCH_TEST_KEYCHAIN"])

    def _read(self) -> dict[str, str]:
        try:
            return dict(json.loads(self._path().read_text(encoding="utf-8")))
        except FileNotFoundError:
            return {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._read().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        entries = self._read()
        entries[f"{service}/{username}"] = password
        self._path().write_text(json.dumps(entries), encoding="utf-8")

    def delete_password(self, service: str, username: str) -> None:
        entries = self._read()
        if entries.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("not found")
        self._path().write_text(json.dumps(entries), encoding="utf-8")


class BlockingKeychain(SecretService.Keyring):  # type: ignore[misc]
    """A secure-class in-memory keyring whose reads block, once armed, until `release` is set."""

    priority = 5.0

    def __init__(self, entries: dict[str, str]) -> None:
        super().__init__()
        self.entries = dict(entries)
        self.armed = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def get_password(self, service: str, username: str) -> str | None:
        if self.armed.is_set():
            self.entered.set()
            self.release.wait(60)
        return self.entries.get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[f"{service}/{username}"] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.entries.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("not found")
