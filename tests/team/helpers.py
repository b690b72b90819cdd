"""Helpers for the team tests: switch homes with a [team] table, seeded ledgers, server-side sums."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from switch.config_team import Team
from switch.team.config import conninfo
from tests.commands import run_switch
from tests.ledger_seed import FROZEN_NOW, seeded_rows, write_rows
from tests.team.pg import PASSWORD

MONEY = (
    "calls",
    "spend_micros",
    "native_micros",
    "savings_micros",
    "unpriced",
    "errors",
    "fallbacks",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cache_savings_micros",
)


def make_home(root: Path, name: str, url: str, member: str) -> Path:
    """A switch home whose config ships to `url` as `member`."""
    home = root / name
    home.mkdir()
    (home / "config.toml").write_text(f'[team]\nledger_url = "{url}"\nmember = "{member}"\nproject = "payments"\n')
    return home


def add_rows(home: Path, first: int, count: int, total: int, span: float = 5 * 86400) -> None:
    """Append seeded rows `first`..`first+count` (of a ledger of `total`) to the home's ledger, as the writer does."""
    from switch.ledger.db import open_for_writing

    connection: sqlite3.Connection = open_for_writing(home / "ledger.db")
    try:
        write_rows(connection, seeded_rows(count, FROZEN_NOW, span, first, total))
    finally:
        connection.close()


def switch(home: Path, *args: str, password: str = PASSWORD, stdin_text: str | None = None) -> Any:
    """`switch ARGS` run from `home` with the team password in the environment."""
    return run_switch(*args, env={"SWITCH_HOME": str(home), "SWITCH_TEAM_PASSWORD": password}, stdin=stdin_text)


def spend_json(home: Path, *args: str) -> list[dict[str, Any]]:
    """The groups of `switch spend --json ARGS` from `home`."""
    done = switch(home, "spend", "--json", *args)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["groups"])


def connect(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection to the test database as the test role."""
    os.environ.setdefault("SWITCH_TEAM_PASSWORD", PASSWORD)
    return psycopg.connect(conninfo(Team(ledger_url=url, member="test")), autocommit=True)


def iso(timestamp: float) -> str:
    """A local ISO date-time, as `--since` reads it."""
    return datetime.fromtimestamp(timestamp).isoformat(timespec="seconds")
