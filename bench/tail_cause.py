"""Where the proxy's slow calls fall: inside the ledger writer's batches, or outside them.

One fake chat upstream and `switch serve` (pinned to a core of its own where there are two) whose
writer notes when each batch starts and ends (this script, run as the proxy with `--as-proxy`, wraps
the writer's flush; nothing in switch itself changes), then `--requests` sequential 52 KB Claude Code
calls, whole or (`--stream`) streamed in 100 chunks. Prints the call percentiles, how many calls
overlapped a batch, and what share of those and of the others were slow (over `--slow` times the
median): a writer that holds the core shows as a much larger slow share inside batches than outside.

    python bench/tail_cause.py [--requests 3000] [--slow 2.0] [--stream]
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

PATH = "/v1/messages?beta=true"
BATCHES = "SWITCH_BENCH_BATCH_LOG"


def run_as_proxy(arguments: list[str]) -> None:
    """The proxy (`switch serve`'s process) with the writer's batch windows appended to $SWITCH_BENCH_BATCH_LOG."""
    from switch.ledger import recorder

    out = open(os.environ[BATCHES], "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    flush = recorder.Recorder._flush

    def timed_flush(self: recorder.Recorder) -> None:
        rows = len(self._taken)
        began, cpu = time.perf_counter(), time.thread_time()
        flush(self)
        out.write(f"{rows} {began:.6f} {time.perf_counter():.6f} {(time.thread_time() - cpu) * 1000:.3f}\n")
        out.flush()

    recorder.Recorder._flush = timed_flush  # type: ignore[method-assign]
    # The proxy's own process, as `switch serve` execs it (an exec would drop the wrapper above).
    from switch.proxy.server_main import main

    raise SystemExit(main(arguments))


async def calls(port: int, count: int, stream: bool) -> list[tuple[float, float]]:
    """(start, end) of `count` sequential calls after 30 warm-up ones, on this machine's monotonic clock."""
    import orjson

    from bench.overhead import Connection
    from bench.workload import claude_code_request

    body = orjson.dumps(claude_code_request(stream=stream))
    connection = Connection(port)
    spans = []
    for number in range(30 + count):
        began = time.perf_counter()
        await connection.request(PATH, body, b"text_delta" if stream else b"")
        if number >= 30:
            spans.append((began, time.perf_counter()))
    return spans


def main(args: argparse.Namespace) -> None:
    from bench.loopback import free_port, proxy_home, stop, wait_listening

    home = Path(tempfile.mkdtemp(prefix="switch-bench-cause-"))
    upstream_port, proxy_port = free_port(), free_port()
    log = home / "batches.log"
    env = {**proxy_home(home, upstream_port), BATCHES: str(log)}
    upstream = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "upstream_server.py"), str(upstream_port)], env=env
    )
    proxy = subprocess.Popen(
        [sys.executable, "-P", __file__, "--as-proxy", "--port", str(proxy_port)],
        env=env,
        cwd=str(home),
        stdout=subprocess.DEVNULL,
    )
    try:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 1:
            os.sched_setaffinity(proxy.pid, {cores[1]})
            os.sched_setaffinity(upstream.pid, {cores[0]})
            os.sched_setaffinity(0, {cores[0]})
        wait_listening(upstream_port)
        wait_listening(proxy_port)
        time.sleep(args.settle)
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        spans = asyncio.run(calls(proxy_port, args.requests, args.stream))
        time.sleep(0.5)  # the last batch
    finally:
        stop(proxy)
        stop(upstream)
    batches = [tuple(float(value) for value in line.split()) for line in log.read_text().splitlines() if line]
    batches = [batch for batch in batches if batch[2] > spans[0][0] and batch[0] > 0]
    report(spans, batches, args.slow)


def report(spans: list[tuple[float, float]], batches: list[tuple[float, ...]], slow_factor: float) -> None:
    """Percentiles, and the slow share of calls inside and outside the writer's batches."""
    durations = sorted((end - began) * 1000 for began, end in spans)
    count = len(durations)
    median = durations[count // 2]
    picks = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
    print(
        "calls: "
        + ", ".join(f"{name} {durations[min(count - 1, int(share * count))]:.3f}" for name, share in picks.items())
    )
    print(f"       max {durations[-1]:.3f} ms over {count} sequential calls")

    def inside(began: float, end: float) -> bool:
        return any(start < end and stop > began for _, start, stop, _ in batches)

    within = [(began, end) for began, end in spans if inside(began, end)]
    outside = [(began, end) for began, end in spans if not inside(began, end)]
    for label, group in (("overlapping a batch", within), ("outside the batches", outside)):
        slow = sum((end - began) * 1000 > slow_factor * median for began, end in group)
        share = slow / len(group) * 100 if group else 0.0
        print(f"{label:>20s}: {len(group):5d} calls, {slow:4d} slow (> {slow_factor:g} x median), {share:5.1f} %")
    if batches:
        rows = sum(batch[0] for batch in batches) / len(batches)
        wall = sum((batch[2] - batch[1]) * 1000 for batch in batches) / len(batches)
        cpu = sum(batch[3] for batch in batches) / len(batches)
        print(f"writer: {len(batches)} batches of {rows:.0f} rows on average, {wall:.1f} ms long, {cpu:.1f} ms of CPU")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--as-proxy"]:
        run_as_proxy(sys.argv[2:])
    else:
        parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--requests", type=int, default=3000, help="Sequential calls measured.")
        parser.add_argument("--slow", type=float, default=2.0, help="A call is slow above this many medians.")
        parser.add_argument("--stream", action="store_true", help="Streamed calls (100 chunks) instead of whole.")
        parser.add_argument("--settle", type=float, default=2.0, help="Seconds after start before the first call.")
        main(parser.parse_args())
