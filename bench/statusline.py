"""The status line on this machine: the real command Claude Code runs, over a 1,000,000-row ledger.

Times the exact command `switch claude on` installs (its own process, Claude Code's status-line JSON on
stdin) for a typical session (40 calls) and a long one (10,000 calls), against the bare start-up of the
same Python with the same flags, measured in the same run. Prints median and p99.

    python bench/statusline.py [--rows 1000000] [--runs 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from switch.ledger.columns import COLUMNS  # noqa: E402
from switch.statusline import line_for  # noqa: E402
from switch.wiring import hook_argv  # noqa: E402
from tests.ledger_seed import FROZEN_NOW, seed_ledger, seeded_rows, write_rows  # noqa: E402

LONG_SESSION = "long-session"
LONG_CALLS = 10_000


def add_long_session(path: Path) -> None:
    """10,000 more calls in one session, as a long day in one Claude Code session would leave."""
    position = COLUMNS.index("session_id")
    rows = [
        (*row[:position], LONG_SESSION, *row[position + 1 :])
        for row in seeded_rows(LONG_CALLS, FROZEN_NOW, 8 * 3600, 0, LONG_CALLS)
    ]
    connection = sqlite3.connect(path)
    write_rows(connection, rows)
    connection.close()


def timings(command: list[str], stdin: bytes, env: dict[str, str], runs: int) -> list[float]:
    """Wall time of `runs` runs of `command`, in milliseconds (after two warm-up runs)."""
    results = []
    for index in range(runs + 2):
        started = time.perf_counter()
        done = subprocess.run(command, input=stdin, env=env, capture_output=True, check=True)
        elapsed = (time.perf_counter() - started) * 1000
        if index >= 2:
            results.append(elapsed)
    assert done.stdout.strip(), "the command printed nothing"
    return results


def report(label: str, values: list[float]) -> None:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{label:<46} median {statistics.median(ordered):6.1f} ms   p99 {p99:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="switch-statusline-bench-"))
    try:
        run(home, args.rows, args.runs)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(home: Path, rows: int, runs: int) -> None:
    env = {**os.environ, "SWITCH_HOME": str(home)}
    started = time.perf_counter()
    seed_ledger(home / "ledger.db", rows, FROZEN_NOW, 30 * 86400)
    add_long_session(home / "ledger.db")
    print(f"seeded {rows:,} rows (+{LONG_CALLS:,} in one session) in {time.perf_counter() - started:.1f} s")
    command = hook_argv("statusline")
    bare = [*command[:-2], "print(1)"]
    typical = json.dumps({"session_id": f"session-{rows // 80}", "cost": {"total_cost_usd": 1.5}}).encode()
    long = json.dumps({"session_id": LONG_SESSION}).encode()
    for stdin in (typical, long):
        print("line:", subprocess.run(command, input=stdin, env=env, capture_output=True).stdout.decode().strip())
    report("python start-up alone (same interpreter, flags)", timings(bare, b"", env, runs))
    report("switch statusline, 40-call session", timings(command, typical, env, runs))
    report(f"switch statusline, {LONG_CALLS:,}-call session", timings(command, long, env, runs))
    report("switch statusline, unknown session", timings(command, b'{"session_id": "nope"}', env, runs))
    # The command's own work without process start-up: open the ledger, look the session up, render.
    for session in (f"session-{rows // 80}", LONG_SESSION):
        in_process = []
        for _ in range(runs):
            started = time.perf_counter()
            line_for(session, home / "ledger.db")
            in_process.append((time.perf_counter() - started) * 1000)
        report(f"  of which ledger lookup and line ({session})", in_process)


if __name__ == "__main__":
    main()
