"""The `[team]` table of config.toml, and the connection string built from it with the password from outside.

[team]
ledger_url = "postgresql://switch@db.internal:5432/switch"   # no password here
member = "ana"          # default: the OS user name
project = "payments"    # optional

The password comes from `SWITCH_TEAM_PASSWORD` or `switch keys set team`, never from the file.
"""

from __future__ import annotations

import getpass
import os
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

PASSWORD_ENV = "SWITCH_TEAM_PASSWORD"
KEY_NAME = "team"
_SCHEMES = ("postgresql", "postgres")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): still a usable name
        return "unknown"


class Team(BaseModel):
    """Where this machine's calls are shipped, and under which name."""

    model_config = ConfigDict(extra="forbid")

    ledger_url: str
    """`postgresql://USER@HOST:PORT/DATABASE`, without a password."""
    member: str = Field(default_factory=_os_user, min_length=1)
    """Who these calls belong to in the team's reports (default: the OS user name)."""
    project: str = ""
    """Optional project name recorded with every row."""

    @field_validator("ledger_url")
    @classmethod
    def _no_password(cls, value: str) -> str:
        # The message never repeats the URL: it would put the password on the screen.
        try:
            parts = urlsplit(value)
            has_password = parts.password is not None
        except ValueError:
            raise ValueError("not a postgresql://USER@HOST:PORT/DATABASE URL") from None
        if parts.scheme not in _SCHEMES or not parts.hostname:
            raise ValueError("not a postgresql://USER@HOST:PORT/DATABASE URL")
        if has_password or "password=" in (parts.query or "").lower():
            raise ValueError(
                f"holds a password: remove it from config.toml and put it in the {PASSWORD_ENV} environment "
                f"variable or store it with `switch keys set {KEY_NAME}`"
            )
        return value


def password() -> str | None:
    """The team server's password from `SWITCH_TEAM_PASSWORD`, else the key store, else None (trust/peer auth)."""
    from switch import keys

    key, _source = keys.lookup(KEY_NAME, PASSWORD_ENV)
    return key


def conninfo(team: Team, connect_timeout: int = 5) -> str:
    """The libpq connection string: the URL, the password from outside, a short connect timeout, our name."""
    from psycopg.conninfo import make_conninfo

    extra: dict[str, str | int] = {"connect_timeout": connect_timeout, "application_name": "switch"}
    secret = password()
    if secret is not None:
        extra["password"] = secret
    return make_conninfo(team.ledger_url, **extra)


def where(team: Team) -> str:
    """The server in words for messages: host, port and database, never a password."""
    parts = urlsplit(team.ledger_url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.hostname}{port}{parts.path or ''}"


def redact(text: str, team: Team | None = None) -> str:
    """`text` with the team password removed, for errors that quote a driver's message."""
    secret = os.environ.get(PASSWORD_ENV, "").strip()
    if not secret and team is not None:
        try:
            secret = password() or ""
        except Exception:  # noqa: BLE001 - a damaged key store must not turn a report into a crash
            secret = ""
    return text.replace(secret, "***") if secret else text
