"""The proxy's tail and its memory, against a direct call to the same upstream in the same run.

One fake chat upstream and `switch serve` routing to it (pinned to a core of its own where there are
two), and this client. Phases, in order:

1. idle: the proxy's RSS once it listens and has settled;
2. sequential: `--requests` whole (non-streamed) 52 KB Claude Code calls and as many 100-chunk streams,
   each proxied call and the same call made directly to the upstream taken in turn (which goes first
   alternates): p50, p99, p99.9 and max of both, and what the proxy adds at each;
3. load: `--concurrency` clients for `--seconds`, whole answers then streams (requests/s), then RSS;
4. rest: RSS again after `--rest` seconds with nothing to do (60 by default; shorten it with `--rest 5`).

    python bench/tail_memory.py [--requests 2000] [--concurrency 16] [--seconds 10] [--rest 60]

A percentile of n samples is the value below which that fraction of them fall (p99.9 of 2,000 calls is
the second slowest). Added = proxied minus direct, percentile by percentile. Figures from a machine that
others share are noisy: compare two checkouts in one sitting, alternating, and read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import rss_mb, serving  # noqa: E402
from bench.overhead import KIMI, Connection, Result, throughput  # noqa: E402
from bench.workload import claude_code_request  # noqa: E402
from switch.protocols.anthropic_messages.inbound import request_to_ir  # noqa: E402
from switch.protocols.openai_chat.outbound import request_from_ir  # noqa: E402

FRACTIONS = (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))
PATH = "/v1/messages?beta=true"
# No null keyring: the proxy loads the keyring only where one can answer, as on the user's machine.
ENV = {"PYTHON_KEYRING_BACKEND": ""}


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p99, p99.9 and max of `values`: the sorted value at index ⌊fraction × n⌋ (the last, for max)."""
    ordered = sorted(values)
    last = len(ordered) - 1
    return {name: ordered[min(last, int(fraction * len(ordered)))] for name, fraction in FRACTIONS}


async def in_turn(
    ways: dict[str, tuple[int, str, bytes, bytes]], count: int, warmup: int = 30
) -> dict[str, list[Result]]:
    """Total and first-token times of `count` calls each way, one call of each in every round, after `warmup` rounds.

    `ways` maps a name to (port, path, body, first-token marker), one kept-alive connection each. The order
    turns every round, so that no way always follows the same one; a call that takes a minute fails the run.
    """
    connections = {name: Connection(port) for name, (port, _path, _body, _marker) in ways.items()}
    names = list(ways)
    results: dict[str, list[Result]] = {name: [] for name in names}
    for number in range(warmup + count):
        turn = number % len(names)
        for name in names[turn:] + names[:turn]:
            _port, path, body, marker = ways[name]
            result = await asyncio.wait_for(connections[name].request(path, body, marker), 60)
            if number >= warmup:
                results[name].append(result)
    return results


def differences(
    got: dict[str, dict[str, float]], pairs: tuple[tuple[str, str, str], ...]
) -> dict[str, dict[str, float]]:
    """For each (label, minuend, subtrahend), the difference of `got`'s two rows, percentile by percentile."""
    return {
        label: {name: got[minuend][name] - got[subtrahend][name] for name, _ in FRACTIONS}
        for label, minuend, subtrahend in pairs
    }


async def sequential(
    direct_port: int, proxy_port: int, stream: bool, count: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """`count` calls each way, in turn, after 30 warm-up rounds: percentiles of total time (ms), and what the
    proxy adds."""
    inbound = claude_code_request(stream=stream)
    chat = orjson.dumps(request_from_ir(request_to_ir(inbound), KIMI))
    body = orjson.dumps(inbound)
    results = await in_turn(
        {
            "direct": (direct_port, "/v1/chat/completions", chat, b'"content":"tok'),
            "switch": (proxy_port, PATH, body, b"text_delta"),
        },
        count,
    )
    got = {name: percentiles([result.total_ms for result in values]) for name, values in results.items()}
    return got, differences(got, (("added", "switch", "direct"),))


def print_table(label: str, got: dict[str, dict[str, float]], apart: dict[str, dict[str, float]]) -> None:
    """One block: a row per entry of `got`, then one per difference in `apart` (signed), a column per percentile."""
    print(f"\n{label}")
    width = max(8, *(len(row) for row in (*got, *apart)))
    print(f"{'ms':>{width}s}" + "".join(f"{name:>10s}" for name, _ in FRACTIONS))
    for rows, sign in ((got, ""), (apart, "+")):
        for row, values in rows.items():
            print(f"{row:>{width}s}" + "".join(f"{values[name]:>{sign}10.3f}" for name, _ in FRACTIONS))


async def main(args: argparse.Namespace) -> None:
    with serving(Path(tempfile.mkdtemp(prefix="switch-bench-tail-")), extra_env=ENV) as stack:
        time.sleep(args.settle)
        idle = rss_mb(stack.proxy.pid)
        for stream in (False, True):
            label = f"sequential, {'stream 100 chunks' if stream else 'no stream'}, {args.requests} calls"
            print_table(label, *await sequential(stack.upstream_port, stack.proxy_port, stream, args.requests))
        print()
        for stream in (False, True):
            body = orjson.dumps(claude_code_request(stream=stream))
            marker = b"text_delta" if stream else b""
            rate = await throughput(stack.proxy_port, PATH, body, marker, args.concurrency, args.seconds)
            kind = "streamed" if stream else "whole"
            print(f"load: {args.concurrency} clients, {kind} answers: {rate:.0f} requests/s")
        loaded = rss_mb(stack.proxy.pid)
        time.sleep(args.rest)
        rested = rss_mb(stack.proxy.pid)
        print(
            f"\nproxy RSS: idle {idle:.1f} MB | after load {loaded:.1f} MB | after {args.rest:g} s rest {rested:.1f} MB"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="Sequential calls per kind (each way).")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0, help="Length of each load phase.")
    parser.add_argument("--rest", type=float, default=60.0, help="Seconds of rest before the last RSS reading.")
    parser.add_argument("--settle", type=float, default=2.0, help="Seconds after start before the idle reading.")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(parser.parse_args()))
