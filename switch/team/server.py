"""Connections to the team server (psycopg 3, imported here only), and its errors in words without secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switch.config_team import Team
from switch.errors import SwitchError
from switch.team.config import conninfo, redact, where

if TYPE_CHECKING:
    import psycopg


class TeamServerError(SwitchError):
    """The team server cannot be reached or refused what switch asked of it."""


def connect(team: Team, connect_timeout: int = 5) -> psycopg.Connection[tuple[Any, ...]]:
    """An autocommit connection to the team server; raises TeamServerError naming the server and the fix."""
    import psycopg

    try:
        return psycopg.connect(conninfo(team, connect_timeout), autocommit=True)
    except psycopg.Error as exc:
        raise TeamServerError(describe(exc, team)) from None


def describe(exc: BaseException, team: Team) -> str:
    """One line about a failure talking to the team server, without the password."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return redact(
        f"team server {where(team)}: {detail}; check [team] ledger_url in config.toml and the password "
        "(SWITCH_TEAM_PASSWORD or `switch keys set team`)",
        team,
    )
