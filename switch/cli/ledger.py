"""`switch spend`, `switch calls`, `switch export`, `switch prices`: reports over the ledger."""

from __future__ import annotations

import csv
import json
import sys
import time
from typing import Any

import typer

FOLLOW_PAGE = 500
"""Rows `calls --follow` reads per query; it keeps reading until none are left."""


def _connection() -> Any:
    from switch.ledger.db import open_read_only

    connection = open_read_only()
    if connection is None:
        typer.echo("No calls recorded yet. Start the proxy with `switch serve` and point a harness at it.")
        raise typer.Exit(0)
    return connection


def _times(since: str | None, until: str | None) -> tuple[float | None, float | None]:
    from switch.ledger.queries import parse_time

    try:
        return parse_time(since), parse_time(until)
    except ValueError as exc:
        typer.echo(f"switch: {exc}", err=True)
        raise typer.Exit(2) from exc


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _agent_spend(since: float | None, until: float | None, as_json: bool) -> None:
    """`spend --by agent`: each session in the range as a tree of agents with calls, models, spend and native."""
    from switch.ledger.agents import agent_trees, label, walk
    from switch.ledger.queries import micros_to_usd

    trees = agent_trees(_connection(), since, until)
    if as_json:
        typer.echo(json.dumps({"by": "agent", "since": since, "until": until, "sessions": trees}, indent=2))
        return
    if not trees:
        typer.echo("No session calls in that range.")
        return
    typer.echo(f"{'agent':<34} {'model':<28} {'calls':>6} {'spend':>12} {'native':>12}")
    for tree in trees:
        typer.echo(f"session {tree['session_id']} ({tree['harness']})")
        for depth, node in walk(tree["agents"]):
            name = ("  " * depth + ("└ " if depth else "") + label(node))[:34]
            models = ", ".join(node["models"]) or "-"
            unpriced = f" ({node['unpriced']} unpriced)" if node["unpriced"] else ""
            typer.echo(
                f"{name:<34} {models[:28]:<28} {node['calls']:>6} {micros_to_usd(node['spend_micros']):>12} "
                f"{micros_to_usd(node['native_micros']):>12}{unpriced}"
            )


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""

    @app.command()
    def spend(
        since: str = typer.Option(None, help="Start: 1h, 24h, 7d, today, or an ISO date."),
        until: str = typer.Option(None, help="End, same forms."),
        by: str = typer.Option(
            None,
            help="Group by day, model, role, harness, session, preset, provider or requested; agent draws each "
            "session as its tree of agents (with --team: member, project, harness, role, model or day).",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
        team: bool = typer.Option(
            False, "--team", help="The whole team's figures from the team ledger ([team] in config.toml)."
        ),
    ) -> None:
        """Spend, native estimate, savings, calls, errors, cache use and speed."""
        from switch.ledger.queries import GROUPS, micros_to_usd, refused_calls
        from switch.ledger.queries import spend as spend_query

        if team:
            from switch.cli.team import team_spend

            team_spend(by, *_times(since, until), as_json)
            return
        if by == "agent":
            _agent_spend(*_times(since, until), as_json)
            return
        if by is not None and by not in GROUPS:
            typer.echo(f"switch: --by must be one of: {', '.join(GROUPS)}, agent", err=True)
            raise typer.Exit(2)
        start, end = _times(since, until)
        connection = _connection()
        rows = spend_query(connection, by, start, end)
        refused = refused_calls(connection, start, end)
        from switch.cli.plans import echo_plans, read_plans

        plans = read_plans()
        if as_json:
            report = {"by": by, "since": start, "until": end, "groups": rows, "rejected_before_provider": refused}
            typer.echo(json.dumps({**report, "plans": plans}, indent=2))
            return
        echo_plans(plans)
        if not rows and not refused:
            typer.echo("No calls in that range.")
            return
        # Wide enough for the longest group: a session id cut short finds nothing in `statusline --session`.
        width = max([28, *(len(str(row["grp"])) for row in rows)])
        header = f"{(by or 'total'):<{width}} {'spend':>12} {'native':>12} {'saved':>12} {'calls':>7} {'errors':>6}"
        typer.echo(header + f" {'cache hit':>9} {'TTFT p50':>10} {'tok/s p50':>9}")
        for row in rows:
            hit = "-" if row["cache_hit_rate"] is None else f"{row['cache_hit_rate']:.0%}"
            tps = "-" if row["median_output_tps"] is None else f"{row['median_output_tps']:.0f}"
            unpriced = f" ({row['unpriced']} unpriced)" if row["unpriced"] else ""
            typer.echo(
                f"{str(row['grp']):<{width}} {micros_to_usd(row['spend_micros']):>12} "
                f"{micros_to_usd(row['native_micros']):>12} {micros_to_usd(row['savings_micros']):>12} "
                f"{row['calls']:>7} {row['errors']:>6} {hit:>9} {_ms(row['median_ttft_ms']):>10} {tps:>9}{unpriced}"
            )
        if refused:
            # Not a model and not unpriced: refused by switch (400, 413) before any provider, so nothing was spent.
            typer.echo(f"rejected before any provider: {refused} call{'s' if refused != 1 else ''} (no model, no cost)")

    @app.command()
    def calls(
        limit: int = typer.Option(20, min=1, help="How many of the latest calls (1 or more)."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new calls."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON lines."),
    ) -> None:
        """The latest calls, newest last."""
        from switch.ledger.queries import calls as calls_query
        from switch.ledger.queries import calls_after, micros_to_usd

        connection = _connection()

        def show(rows: list[dict[str, Any]]) -> None:
            for row in rows:
                if as_json:
                    typer.echo(json.dumps(row))
                    continue
                when = time.strftime("%H:%M:%S", time.localtime(row["started_at"]))
                mark = " ↻" if row["fallback_attempt"] else ""
                # What the harness said the call is for (compaction, review, ...) and the agent that spawned it.
                if row.get("request_kind"):
                    mark += f" [{row['request_kind']}]"
                if row.get("parent_agent_id"):
                    mark += f" parent {row['parent_agent_id']}"
                tokens_in = row["input_tokens"] + row["cache_read_tokens"]
                typer.echo(
                    f"{when} {row['harness']:<11} {row['role']:<12} {row['requested_model'][:22]:<22} → "
                    f"{row['served_model'][:26]:<26} {row['outcome']:<16} in {tokens_in:>7}"
                    f" out {row['output_tokens']:>6} {micros_to_usd(row['cost_micros']):>10}"
                    f" TTFT {_ms(row['ttft_ms'])}{mark}"
                )

        rows = list(reversed(calls_query(connection, limit=limit)))
        show(rows)
        last_id = rows[-1]["id"] if rows else 0
        while follow:
            time.sleep(1.0)
            # Every row after the last one printed, page by page: a burst bigger than a page is never skipped.
            while fresh := calls_after(connection, last_id, FOLLOW_PAGE):
                show(fresh)
                last_id = fresh[-1]["id"]

    @app.command()
    def export(
        format: str = typer.Option("jsonl", "--format", help="csv or jsonl."),
        since: str = typer.Option(None, help="Start: 1h, 24h, 7d, today, or an ISO date."),
        until: str = typer.Option(None, help="End, same forms."),
        output: str = typer.Option(None, help="File to write (default: standard output)."),
        readable: bool = typer.Option(
            False,
            "--readable",
            help="Times as ISO 8601 (local, with UTC offset) and money in US dollars (*_usd columns), instead of "
            "epoch seconds (started_at) and integer micro-dollars (*_micros).",
        ),
    ) -> None:
        """Every recorded call, as CSV or JSON lines (started_at in epoch seconds, money in micro-dollars)."""
        from switch.errors import SwitchError
        from switch.ledger.columns import COLUMNS
        from switch.ledger.db import open_read_only
        from switch.ledger.export import readable_names, readable_row
        from switch.ledger.queries import iterate

        if format not in ("csv", "jsonl"):
            typer.echo("switch: --format must be csv or jsonl", err=True)
            raise typer.Exit(2)
        start, end = _times(since, until)
        # Opened before the output, so a damaged ledger leaves no half-made file behind.
        connection = open_read_only()
        names = ["id", *COLUMNS]
        try:
            handle = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
        except OSError as exc:
            raise SwitchError(
                f"cannot write {output}: {exc.strerror}; give --output a file in a folder that exists and you can "
                "write to"
            ) from None
        if connection is None:
            # Said on stderr: `switch export > calls.csv` gets the header alone, not this sentence.
            typer.echo("switch: no calls recorded yet; the export has none", err=True)
        try:
            rows = iterate(connection, start, end) if connection is not None else iter(())
            if readable:
                rows = map(readable_row, rows)
                names = readable_names(names)
            if format == "jsonl":
                for row in rows:
                    handle.write(json.dumps(row) + "\n")
            else:
                writer = csv.DictWriter(handle, fieldnames=names)
                writer.writeheader()
                for row in rows:
                    writer.writerow(row)
        finally:
            if output:
                handle.close()
            if connection is not None:
                connection.close()

    @app.command()
    def prices(
        model: str = typer.Argument(
            None, help="provider/model, or a model name as `switch calls` and the dashboard show it."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """The price that applies to a model, and where it comes from."""
        from switch.config import litellm_names, load_settings
        from switch.ledger.limits import limit_table
        from switch.ledger.pricing import SOURCE_NAMES, PriceTable

        settings = load_settings()
        table = PriceTable(settings.prices, litellm_names(settings))
        limits = limit_table(settings.models, litellm_names(settings))
        references = (
            [model] if model else sorted({settings.defaults.model, "anthropic/claude-opus-5-5", "openai/gpt-5.5"})
        )
        results: list[dict[str, Any]] = []
        for reference in references:
            candidates = [
                {
                    "model": found.reference,
                    "price": found.price.per_million(),
                    "source": found.price.source,
                    "source_name": SOURCE_NAMES.get(found.price.source.split(":", 1)[0]),
                    "limits": limits.of(found.reference).describe(),
                    "limits_text": limits.of(found.reference).summary(),
                }
                for found in table.resolve(reference, settings.providers)
            ]
            # One answer is the price; several are for the user to choose from, so none is the price.
            only = candidates[0] if len(candidates) == 1 else None
            results.append(
                {
                    "model": reference,
                    "resolved": only["model"] if only else None,
                    "price": only["price"] if only else None,
                    "source": only["source"] if only else None,
                    "source_name": only["source_name"] if only else None,
                    "candidates": candidates,
                    # Another provider's price for the same model is only ever offered, never applied.
                    "suggestions": [] if candidates else table.suggestions(reference),
                    "limits": limits.of(str(only["model"]) if only else reference).describe(),
                }
            )
        if as_json:
            typer.echo(json.dumps(results, indent=2))
            return
        for result in results:
            candidates = result["candidates"]
            if not candidates:
                typer.echo(f'{result["model"]}: unpriced (add [prices."{result["model"]}"] to config.toml)')
                if result["limits"]["context_window"] or result["limits"]["max_output_tokens"]:
                    typer.echo(f"  {limits.of(result['model']).summary()}")
                if result["suggestions"]:
                    typer.echo(
                        "  other providers price the same model name (not applied; prices differ between providers): "
                        + ", ".join(result["suggestions"])
                    )
            elif len(candidates) == 1:
                shown = result["model"]
                if result["resolved"] != shown:
                    shown += f" ({result['resolved']})"
                typer.echo(f"{shown}: {_price_text(candidates[0])}")
                typer.echo(f"  {candidates[0]['limits_text']}")
            else:
                typer.echo(f"{result['model']} is served by {len(candidates)} providers; name one as provider/model:")
                for candidate in candidates:
                    typer.echo(f"  {candidate['model']}: {_price_text(candidate)}")
                    typer.echo(f"    {candidate['limits_text']}")


def _price_text(candidate: dict[str, Any]) -> str:
    figures: dict[str, float] = candidate["price"]
    where = candidate["source"].split(":", 1)[-1]
    return (
        f"${figures['input']:g} input, ${figures['cached_input']:g} cached input, "
        f"${figures['output']:g} output per million tokens (source: {candidate['source_name']}, {where})"
    )
