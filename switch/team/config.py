"""The connection string built from config.toml's `[team]` table (`switch.config_team`) with the password from outside.

[team]
ledger_url = "postgresql://switch@db.internal:5432/switch"   # no password here
member = "ana"          # default: the OS user name
project = "payments"    # optional

The password comes from `SWITCH_TEAM_PASSWORD` or `switch keys set team`, never from the file.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from switch.config_team import KEY_NAME, PASSWORD_ENV, Team


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
