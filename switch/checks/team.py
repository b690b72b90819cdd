"""The team ledger finding: how far shipping is behind, from local files only (no server, no psycopg)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from switch.checks.base import Check, check

if TYPE_CHECKING:
    from switch.config_team import Team


def team_lag_line(team: Team) -> tuple[bool, str, str | None]:
    """(ok, one line, the fix) about what this home has not shipped to `team`'s server yet."""
    from switch.team import local

    lag = local.ledger_lag(team)
    ok, line = local.describe(lag)
    if ok:
        return True, line, None
    if lag.refused:
        return (
            False,
            line,
            f"the rows stay in the local ledger; each reason is in {local.team_dir()}/servers/*/refused.jsonl "
            "(delete that file once read to clear this finding)",
        )
    if lag.last_error and "switch team init" in lag.last_error:
        return False, line, "switch team init (creates or migrates the team server's schema)"
    if lag.last_error:
        return False, line, "make the team server reachable (ledger_url, password); the proxy catches up on its own"
    return False, line, "keep the proxy running (switch up): it ships in the background"


def team_check(team: Team) -> Check:
    """The `team` finding of `switch doctor`."""
    ok, line, fix = team_lag_line(team)
    return check("team", ok, line, fix)
