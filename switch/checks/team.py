"""The team ledger finding: how far shipping is behind, from local files only (no server, no psycopg)."""

from __future__ import annotations

from switch.checks.base import Check, check


def team_lag_line() -> tuple[bool, str, str | None]:
    """(ok, one line, the fix) about what this home has not shipped to the team ledger yet."""
    from switch.team import local

    lag = local.ledger_lag()
    ok, line = local.describe(lag)
    if ok:
        return True, line, None
    if lag.last_error and "switch team init" in lag.last_error:
        return False, line, "switch team init (creates or migrates the team server's schema)"
    if lag.last_error:
        return False, line, "make the team server reachable (ledger_url, password); the proxy catches up on its own"
    return False, line, "keep the proxy running (switch up): it ships in the background"


def team_check() -> Check:
    """The `team` finding of `switch doctor`."""
    ok, line, fix = team_lag_line()
    return check("team", ok, line, fix)
