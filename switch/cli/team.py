"""`switch team init|status` and `switch spend --team`: the team ledger on PostgreSQL (switch.team)."""

from __future__ import annotations

import json
from typing import Any

import typer

team_app = typer.Typer(
    help="The team ledger on PostgreSQL: create or migrate its schema, see what is not shipped yet.",
    no_args_is_help=True,
)


def _team() -> Any:
    from switch.config import load_settings
    from switch.errors import ConfigError

    team = load_settings().team
    if team is None:
        raise ConfigError(
            'no [team] table in config.toml; add one with ledger_url = "postgresql://USER@HOST:PORT/DATABASE" '
            "(see the README's Team ledger section)"
        )
    return team


@team_app.command("init")
def init(
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply without asking."),
    sql: bool = typer.Option(False, "--sql", help="Also print every SQL statement that would run."),
) -> None:
    """Create or migrate the team server's schema: prints what it will do, then asks (or --yes)."""
    from switch.team.config import where
    from switch.team.migrations import current_version, migrate, pending
    from switch.team.server import connect

    team = _team()
    with connect(team) as connection:
        version = current_version(connection)
        steps = pending(connection)
        if not steps:
            typer.echo(f"team server {where(team)}: schema is up to date (version {version}); nothing to do")
            return
        typer.echo(f"team server {where(team)}: schema at version {version}; will apply, each in one transaction:")
        for step in steps:
            typer.echo(f"  {step.version}: {step.description}")
            if sql:
                for statement in step.statements:
                    typer.echo("    " + " ".join(statement.split()) + ";")
        if not yes and not typer.confirm("Apply?", default=False):
            typer.echo("nothing changed")
            raise typer.Exit(1)
        applied = migrate(connection)
        typer.echo(f"applied {len(applied)} migration(s); schema at version {current_version(connection)}")


@team_app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """What this home has not shipped yet, and how the last attempt went (reads only local files)."""
    from switch.team import local

    team = _team()
    lag = local.ledger_lag(team)
    if as_json:
        typer.echo(
            json.dumps(
                {"member": team.member, "project": team.project, "origin": local.origin(), **lag.__dict__}, indent=2
            )
        )
        return
    ok, line = local.describe(lag)
    typer.echo(line)
    if not ok:
        raise typer.Exit(1)


def team_spend(by: str | None, since: float | None, until: float | None, as_json: bool) -> None:
    """`switch spend --team`: the team's figures from PostgreSQL, grouped like `switch spend`."""
    from switch.ledger.queries import micros_to_usd
    from switch.team.reports import BY, spend
    from switch.team.server import connect

    if by is not None and by not in BY:
        typer.echo(f"switch: with --team, --by must be one of: {', '.join(BY)}", err=True)
        raise typer.Exit(2)
    team = _team()
    with connect(team) as connection:
        rows = spend(connection, by, since, until)
    if as_json:
        typer.echo(
            json.dumps({"team": True, "by": by, "since": since, "until": until, "groups": rows}, indent=2, default=str)
        )
        return
    if not rows:
        typer.echo("No team calls in that range.")
        return
    typer.echo(
        f"{(by or 'team total'):<28} {'spend':>12} {'native':>12} {'saved':>12} {'calls':>9} {'errors':>7}"
        f" {'cache hit':>9} {'TTFT p50':>10}"
    )
    for row in rows:
        hit = "-" if row["cache_hit_rate"] is None else f"{row['cache_hit_rate']:.0%}"
        ttft = "-" if row["median_ttft_ms"] is None else f"{row['median_ttft_ms']:,.0f} ms"
        typer.echo(
            f"{str(row['grp'])[:28]:<28} {micros_to_usd(row['spend_micros']):>12} "
            f"{micros_to_usd(row['native_micros']):>12} {micros_to_usd(row['savings_micros']):>12} "
            f"{row['calls']:>9} {row['errors']:>7} {hit:>9} {ttft:>10}"
        )


def register(app: typer.Typer) -> None:
    """Add the `team` group to `app`."""
    app.add_typer(team_app, name="team")
