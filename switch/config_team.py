"""The `[team]` table of config.toml, validated (part of the config layer: `switch.config` reads it, `switch.team` too).

[team]
ledger_url = "postgresql://switch@db.internal:5432/switch"   # no password here
member = "ana"          # default: the OS user name
project = "payments"    # optional

The password comes from `SWITCH_TEAM_PASSWORD` or `switch keys set team`, never from the file.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from switch.config_schema import rules

PASSWORD_ENV = "SWITCH_TEAM_PASSWORD"
KEY_NAME = "team"
_SCHEMES = ("postgresql", "postgres")


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers): still a usable name
        return "unknown"


def _no_password(value: str) -> None:
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


@dataclass(slots=True)
class Team:
    """Where this machine's calls are shipped, and under which name."""

    ledger_url: str = field(metadata=rules(check=_no_password))
    """`postgresql://USER@HOST:PORT/DATABASE`, without a password."""
    member: str = field(default_factory=_os_user, metadata=rules(min_length=1))
    """Who these calls belong to in the team's reports (default: the OS user name)."""
    project: str = ""
    """Optional project name recorded with every row."""
