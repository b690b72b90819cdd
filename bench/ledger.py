"""Ledger benchmarks on this machine: a 1,000,000-row ledger.

* `switch spend --json` (the real command, its own process) over all rows and grouped by model;
* the recorder's sustained insert rate (records submitted → rows committed);
* the dashboard's Calls screen: time to first paint and to load the next page.

    python bench/ledger.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from switch.config import Settings  # noqa: E402
from switch.ledger.recorder import Recorder  # noqa: E402
from tests.ledger_seed import FROZEN_NOW, kimi_call, pricer_for, seed_ledger  # noqa: E402


def timed_command(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def recorder_rate(home: Path, count: int) -> float:
    recorder = Recorder(pricer_for(Settings()), database=home / "recorder.db", spill=home / "recorder.spill")
    recorder.start()
    record = kimi_call(
        time.time(),
        input_tokens=1000,
        output_tokens=200,
        cache_read_tokens=5000,
        ttft_ms=300.0,
        duration_ms=2000.0,
    )
    recorder.submit(record)  # first row: opens, migrates and loads prices before the clock starts
    while recorder.written < 1:
        time.sleep(0.01)
    started = time.perf_counter()
    for _ in range(count):
        recorder.submit(record)
    recorder.close(timeout=120)
    elapsed = time.perf_counter() - started
    assert recorder.written == count + 1, recorder.written
    return count / elapsed


async def dashboard_times(ledger: Path) -> tuple[float, float]:
    from switch.ui.app import make_app
    from textual.widgets import DataTable

    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    started = time.perf_counter()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("c")
        table = app.query_one("#calls-table", DataTable)
        while table.row_count == 0:
            await pilot.pause(0.005)
        first_paint = time.perf_counter() - started
        table.focus()
        count = table.row_count
        started = time.perf_counter()
        table.move_cursor(row=count - 1)
        while table.row_count == count:
            await pilot.pause(0.005)
        page = time.perf_counter() - started
    return first_paint, page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="switch-ledger-bench-"))
    env = {**os.environ, "SWITCH_HOME": str(home)}
    started = time.perf_counter()
    seed_ledger(home / "ledger.db", args.rows, FROZEN_NOW, 30 * 86400)
    print(f"seeded {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
    command = [sys.executable, "-m", "switch", "spend", "--json"]
    for extra in ([], ["--by", "model"], ["--by", "session"]):
        runs = sorted(timed_command(command + extra, env) for _ in range(3))
        label = " ".join(extra)
        print(f"switch spend --json {label:<14} median {runs[1] * 1000:7.0f} ms (whole command, {args.rows:,} rows)")
    rate = recorder_rate(home, 50_000)
    print(f"recorder: {rate:,.0f} rows/s sustained (50,000 records, priced and committed)")
    first_paint, page = asyncio.run(dashboard_times(home / "ledger.db"))
    print(f"dashboard Calls screen: first paint {first_paint * 1000:.0f} ms, next page {page * 1000:.0f} ms")


if __name__ == "__main__":
    main()
