"""The native plans' quota as `switch status` and `switch spend` print it (read from the ledger)."""

from __future__ import annotations

import sqlite3
from typing import Any

import typer


def read_plans() -> list[dict[str, Any]]:
    """Every native plan's last snapshot in this home's ledger (none without a ledger or a readable one)."""
    from switch.errors import SwitchError
    from switch.ledger.db import open_read_only
    from switch.ledger.plan_quota import plans

    try:
        connection = open_read_only()
    except (SwitchError, sqlite3.Error):
        return []  # the ledger's own damage is reported by the command's ledger check
    if connection is None:
        return []
    try:
        return plans(connection)
    except sqlite3.Error:
        return []
    finally:
        connection.close()


def echo_plans(found: list[dict[str, Any]]) -> None:
    """One block per plan: its status, then each window's use and reset."""
    from switch.ledger.plan_quota import long_lines

    for plan in found:
        for line in long_lines(plan):
            typer.echo(line)
