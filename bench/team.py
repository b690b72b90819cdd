"""The team ledger at size: `switch spend --team` on 10 million rows, and the shipper's rows/s.

Starts a throwaway PostgreSQL server (the OS packages' binaries, as the tests do), creates the schema with
`switch team init`, fills `team_calls` with `--rows` rows by COPY (20 members, 90 days) and the daily rollup
from them, then times `switch spend --team` (whole command, as a user runs it; median of `--repeat`) for
the groupings and ranges the reports use, and the shipper sending a `--ship` row local ledger to it.

    python bench/team.py [--rows 10000000] [--ship 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from switch.ledger.columns import COLUMNS  # noqa: E402
from switch.ledger.db import open_for_writing  # noqa: E402
from switch.team.sql import CALLS_TABLE, DAILY_TABLE, daily_upsert  # noqa: E402
from tests.ledger_seed import seeded_rows, write_rows  # noqa: E402
from tests.team.pg import PASSWORD, running_cluster  # noqa: E402

CHUNK = 50_000
MEMBERS = 20
SPAN = 90 * 86400


def fill(url: str, rows: int) -> float:
    """COPY `rows` rows into team_calls and build the daily rollup from them; returns seconds taken."""
    import psycopg

    from switch.config_team import Team
    from switch.team.config import conninfo

    started = time.perf_counter()
    template = seeded_rows(CHUNK, time.time(), SPAN)
    names = ", ".join(("origin", "local_id", "member", "project", *COLUMNS))
    with psycopg.connect(conninfo(Team(ledger_url=url, member="bench")), autocommit=True) as connection:
        for chunk in range(0, rows, CHUNK):
            count = min(CHUNK, rows - chunk)
            origin, member = f"bench-origin-{chunk // CHUNK}", f"dev{(chunk // CHUNK) % MEMBERS:02d}"
            with connection.transaction(), connection.cursor().copy(f"COPY {CALLS_TABLE} ({names}) FROM STDIN") as copy:
                for index in range(count):
                    copy.write_row((origin, index + 1, member, "bench", *template[index]))
            if chunk // CHUNK % 20 == 0:
                print(f"  {chunk + count:,} rows ({time.perf_counter() - started:.0f} s)", flush=True)
        connection.execute(f"TRUNCATE {DAILY_TABLE}")
        connection.execute(daily_upsert(CALLS_TABLE))
        connection.execute(f"VACUUM ANALYZE {CALLS_TABLE}")
        connection.execute(f"VACUUM ANALYZE {DAILY_TABLE}")
    return time.perf_counter() - started


def timed(env: dict[str, str], args: list[str], repeat: int) -> float:
    """Median wall seconds of `switch ARGS` (a whole process, start-up included)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "switch", *args], env=env, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def in_process(url: str) -> None:
    """Where a report's time goes: the sums (rollup + edges) and the medians, each query alone, median of 3."""
    import psycopg

    from switch.config_team import Team
    from switch.ledger.times import parse_time
    from switch.team.config import conninfo
    from switch.team.reports import spend

    with psycopg.connect(conninfo(Team(ledger_url=url, member="bench")), autocommit=True) as connection:
        for by, since in ((None, None), ("member", None), ("model", None), ("role", "7d"), ("member", "30d")):
            for medians in (False, True):
                times = []
                for _ in range(3):
                    started = time.perf_counter()
                    spend(connection, by, parse_time(since), None, medians=medians)
                    times.append(time.perf_counter() - started)
                what = f"--by {by or 'total'}" + (f" --since {since}" if since else "")
                print(
                    f"  query {what:<24} {'with medians' if medians else 'sums only':<13}"
                    f" {statistics.median(times) * 1000:6.0f} ms"
                )


def main(args: argparse.Namespace) -> None:
    with running_cluster() as cluster:
        url = cluster.new_database()
        home = Path(tempfile.mkdtemp(prefix="switch-bench-team-"))
        (home / "config.toml").write_text(f'[team]\nledger_url = "{url}"\nmember = "shipper"\n')
        os.environ.update({"SWITCH_HOME": str(home), "SWITCH_TEAM_PASSWORD": PASSWORD})
        env = dict(os.environ)
        subprocess.run([sys.executable, "-m", "switch", "team", "init", "--yes"], env=env, check=True, cwd=ROOT)
        print(f"filling {args.rows:,} rows by COPY …", flush=True)
        seconds = fill(url, args.rows)
        print(f"filled {args.rows:,} rows and the daily rollup in {seconds:.0f} s ({args.rows / seconds:,.0f} rows/s)")
        baseline = timed(env, ["--version"], args.repeat)
        print(f"`switch --version` (process start-up alone): {baseline * 1000:.0f} ms")
        for query in (
            ["spend", "--team"],
            ["spend", "--team", "--by", "member"],
            ["spend", "--team", "--by", "model"],
            ["spend", "--team", "--by", "day"],
            ["spend", "--team", "--by", "role", "--since", "7d"],
            ["spend", "--team", "--by", "member", "--since", "30d", "--json"],
        ):
            print(f"`switch {' '.join(query)}` on {args.rows:,} rows: {timed(env, query, args.repeat) * 1000:.0f} ms")
        in_process(url)
        from switch.config import load_settings
        from switch.team.shipper import Shipper

        team = load_settings().team
        assert team is not None
        # First without pacing (what the driver and server sustain), then as the proxy runs it (resting four
        # times as long as each batch took while it catches up, so it takes at most a fifth of the interpreter).
        for pace in (0.0, 4.0):
            first = args.ship if pace else 0
            connection = open_for_writing(home / "ledger.db")
            for start in range(0, args.ship, CHUNK):
                write_rows(connection, seeded_rows(min(CHUNK, args.ship - start), time.time(), 86400, first + start))
            connection.close()
            shipper = Shipper(team, pace=pace)
            started = time.perf_counter()
            try:
                while not shipper.ship_some():
                    pass
            finally:
                shipper.stop()
            elapsed = time.perf_counter() - started
            print(
                f"shipper (pace {pace:g}): {shipper.shipped:,} rows in {elapsed:.1f} s = "
                f"{shipper.shipped / elapsed:,.0f} rows/s (batches of {shipper.batch_size}, into a "
                f"{args.rows:,}-row table)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--ship", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    main(parser.parse_args())
