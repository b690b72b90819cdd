"""The longest gap between two chunks of a stream while config.toml's budgets are edited, on a big ledger.

A `switch serve` over a 1,000,000-row ledger (a week of calls, so this period's spend and the week's prices
are real reads) streams a long answer from a loopback fake upstream (one chunk every 10 ms); while it
streams, the budgets in config.toml are edited `--edits` times, each edit a reload. The figure is the
longest gap between two chunks the client received, next to the same stream with no edit.

    python bench/reload_gap.py [--rows 1000000] [--edits 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fake_upstream import FakeChatUpstream, Reply, Turn, chat_chunks  # noqa: E402
from tests.ledger_seed import seed_ledger  # noqa: E402
from tests.servers import free_port, serve, serve_process  # noqa: E402

CHUNKS = 600
DELAY = 0.01
CONFIG = """
[server]
port = {port}
[providers.baseten]
base_url = "{url}/v1"
{budgets}
"""
BUDGET = '[[budgets]]\nscope = "{scope}"\nperiod = "{period}"\nlimit_usd = {limit}\n'


def _chunks() -> list[bytes]:
    turn = Turn(text="x" * CHUNKS, fragment=1, completion_tokens=CHUNKS)
    events = chat_chunks(turn, "moonshotai/Kimi-K3", itertools.count())
    return [b"data: " + orjson.dumps(event) + b"\n\n" for event in events] + [b"data: [DONE]\n\n"]


def _budgets(edit: int) -> str:
    # Each edit changes the budgets, so each one rebuilds them from the ledger.
    # Limits far above the seeded spend: the stream is served, never blocked.
    return BUDGET.format(scope="total", period="week", limit=1_000_000 + edit) + BUDGET.format(
        scope="session", period="day", limit=100_000 + edit
    )


def longest_gap(port: int, fake: FakeChatUpstream, edit: Callable[[int], None] | None, edits: int) -> tuple[float, int]:
    """(the longest gap between two received pieces in seconds, pieces received) for one stream."""
    fake.script(Reply(200, _chunks(), delay_between=DELAY))
    arrivals: list[float] = []
    started = threading.Event()

    def read() -> None:
        body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120) as reply:
            if reply.status_code != 200:
                print(f"the proxy answered {reply.status_code}: {reply.read()[:300]!r}", flush=True)
                return
            for _piece in reply.iter_raw():
                arrivals.append(time.perf_counter())
                started.set()

    reader = threading.Thread(target=read)
    reader.start()
    if not started.wait(30):
        raise SystemExit("the stream did not start")
    if edit is not None:
        for number in range(edits):
            edit(number)
            time.sleep(CHUNKS * DELAY / (edits + 1))  # spread over the stream; the proxy polls every 0.5 s
    reader.join(120)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    return max(gaps), len(arrivals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--edits", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="switch-reload-gap-") as directory:
        home = Path(directory)
        # Seeded once per size and day (the rows span the week before), then copied for each run.
        seeded = Path(tempfile.gettempdir()) / f"switch-reload-gap-{options.rows}-{time.strftime('%Y%m%d')}.db"
        if not seeded.exists():
            began = time.perf_counter()
            seed_ledger(seeded.with_suffix(".part"), options.rows, now=time.time(), span_seconds=7 * 86400)
            seeded.with_suffix(".part").rename(seeded)
            print(f"seeded {options.rows:,} rows in {time.perf_counter() - began:.0f} s", flush=True)
        shutil.copyfile(seeded, home / "ledger.db")
        fake = FakeChatUpstream()
        port = free_port()
        with serve(fake) as url:
            config = home / "config.toml"

            def edit(number: int) -> None:
                config.write_text(CONFIG.format(port=port, url=url, budgets=_budgets(number + 1)), encoding="utf-8")

            config.write_text(CONFIG.format(port=port, url=url, budgets=_budgets(0)), encoding="utf-8")
            env = {"SWITCH_HOME": str(home), "BASETEN_API_KEY": "sk-bench"}
            os.environ["SWITCH_HOME"] = str(home)
            with serve_process(port, env):
                quiet, pieces = longest_gap(port, fake, None, 0)
                print(f"no edit:            longest gap {quiet * 1000:7.1f} ms over {pieces} pieces")
                busy, pieces = longest_gap(port, fake, edit, options.edits)
                print(f"{options.edits} budget edits:    longest gap {busy * 1000:7.1f} ms over {pieces} pieces")


if __name__ == "__main__":
    main()
