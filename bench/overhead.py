"""Proxy overhead against a direct call, measured in the same run.

Three processes: a fast fake chat upstream, `switch serve` routing to it, and this client (raw
HTTP/1.1 over asyncio, keep-alive, so client cost is tiny and identical on both paths). On a
machine with two or more cores the proxy is pinned to a core of its own and the upstream and
client share another, so the proxy's numbers are those of one core and the scheduler does not
add its own noise. For each workload the client times the direct upstream call with the
already-translated body, then the same call through the proxy, interleaved, and reports what
the proxy adds.

    python bench/overhead.py [--requests 400] [--concurrency 16]
    python bench/overhead.py --budgets [--requests 400]

`--budgets` runs two proxies side by side instead: one without budgets and with `/metrics` off, one
with three budgets (one of them acting on every call) and metrics on, and times the same calls
through both, each right after a direct call to its own upstream, to show what budgets and metrics
add. Neither proxy is pinned there: pinning two proxies to one core favours whichever started last.

    python bench/overhead.py --team [--backlog 200000]

With `--team`, a throwaway PostgreSQL server is started (its binaries from the OS packages) and two proxies
are measured one after the other in the same run: one without a [team] table, then one whose shipper is
catching up on a backlog of `--backlog` unshipped rows while its calls are measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import post_request, read_head, rss_mb, serving  # noqa: E402
from bench.workload import claude_code_request, codex_request  # noqa: E402
from switch.protocols.anthropic_messages.inbound import request_to_ir  # noqa: E402
from switch.protocols.openai_chat.outbound import request_from_ir  # noqa: E402
from switch.protocols.openai_responses.inbound import request_to_ir as responses_request_to_ir  # noqa: E402
from switch.routing.resolve import ChatTarget  # noqa: E402

KIMI = ChatTarget(
    "moonshotai/Kimi-K3", effort_levels=("low", "high", "max"), max_output_tokens=262144, fixed_sampling=True
)
# Each inbound API: its request, its translation to chat, its path, and the bytes of its first token.
WORKLOADS = [
    ("Claude Code 52 KB → chat", claude_code_request, request_to_ir, "/v1/messages?beta=true", b"text_delta"),
    ("Codex 40 KB Responses → chat", codex_request, responses_request_to_ir, "/v1/responses", b"output_text.delta"),
]


@dataclass
class Result:
    total_ms: float
    ttft_ms: float


class Connection:
    """One keep-alive HTTP/1.1 connection; enough protocol for these two servers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, path: str, body: bytes, marker: bytes) -> Result:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        request = post_request(self.port, path, body)
        started = time.perf_counter()
        self.writer.write(request)
        status_line, headers = await read_head(self.reader)
        if b" 200 " not in status_line:
            raise RuntimeError(f"bad status {status_line!r}")
        first_token = 0.0
        if b"content-length" in headers:
            await self.reader.readexactly(int(headers[b"content-length"]))
            first_token = time.perf_counter()
        else:
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                if size == 0:
                    await self.reader.readline()
                    break
                data = await self.reader.readexactly(size + 2)
                if not first_token and marker in data:
                    first_token = time.perf_counter()
        done = time.perf_counter()
        return Result((done - started) * 1000, (first_token - started) * 1000)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def paired(
    label: str, direct: tuple[int, str, bytes, bytes], proxied: tuple[int, str, bytes, bytes], count: int
) -> dict[str, float]:
    direct_conn, proxy_conn = Connection(direct[0]), Connection(proxied[0])
    for _ in range(30):  # warm-up: connections, caches, JIT-less but allocator-warm
        await direct_conn.request(*direct[1:])
        await proxy_conn.request(*proxied[1:])
    d_results, p_results = [], []
    for _ in range(count):
        d_results.append(await direct_conn.request(*direct[1:]))
        p_results.append(await proxy_conn.request(*proxied[1:]))
    d_total = [r.total_ms for r in d_results]
    p_total = [r.total_ms for r in p_results]
    d_ttft = [r.ttft_ms for r in d_results]
    p_ttft = [r.ttft_ms for r in p_results]
    summary = {
        "direct_p50_ms": statistics.median(d_total),
        "proxy_p50_ms": statistics.median(p_total),
        "added_p50_ms": statistics.median(p_total) - statistics.median(d_total),
        "added_p99_ms": percentile(p_total, 0.99) - percentile(d_total, 0.99),
        "direct_ttft_p50_ms": statistics.median(d_ttft),
        "proxy_ttft_p50_ms": statistics.median(p_ttft),
        "added_ttft_p50_ms": statistics.median(p_ttft) - statistics.median(d_ttft),
        "ratio_p50": statistics.median(p_total) / statistics.median(d_total),
    }
    print(
        f"{label:34s} direct p50 {summary['direct_p50_ms']:6.2f} ms"
        f" | proxy p50 {summary['proxy_p50_ms']:6.2f} ms"
        f" | added p50 {summary['added_p50_ms']:+6.2f} ms, p99 {summary['added_p99_ms']:+6.2f} ms,"
        f" TTFT {summary['added_ttft_p50_ms']:+6.2f} ms ({summary['direct_ttft_p50_ms']:.2f} → "
        f"{summary['proxy_ttft_p50_ms']:.2f}) | x{summary['ratio_p50']:.2f}"
    )
    return summary


METRICS_OFF = "[server]\nmetrics = false\n"
BUDGETS_ON = """
[[budgets]]
scope = "total"
period = "day"
limit_usd = 1000000.0
[[budgets]]
scope = "role:orchestrator"
period = "week"
limit_usd = 1000000.0
[[budgets]]
scope = "model:baseten/moonshotai/Kimi-K3"
period = "month"
limit_usd = 0.000001
actions = [{ at = 0.5, do = "warn" }]
"""


async def budgets_on_off(args: argparse.Namespace) -> dict[str, Any]:
    """Budgets and metrics on versus off, in the same run: direct, off and on calls interleaved."""
    results: dict[str, Any] = {}
    root = Path(tempfile.mkdtemp(prefix="switch-bench-"))
    with (
        serving(root / "off", extra_config=METRICS_OFF, pin=False) as off,
        serving(root / "on", extra_config=BUDGETS_ON, pin=False) as on,
    ):
        for name, build, to_ir, path, marker in WORKLOADS:
            for stream in (False, True):
                inbound_body = orjson.dumps(build(stream=stream))
                chat_body = orjson.dumps(request_from_ir(to_ir(build(stream=stream)), KIMI))
                # Each proxy has its own upstream, timed directly just before it: both pairs see the same state.
                pairs = {
                    "off": (Connection(off.upstream_port), Connection(off.proxy_port)),
                    "on": (Connection(on.upstream_port), Connection(on.proxy_port)),
                }
                timings: dict[str, list[float]] = {"direct off": [], "off": [], "direct on": [], "on": []}
                for number in range(30 + args.requests):
                    order = ("off", "on") if number % 2 else ("on", "off")  # neither always goes first
                    for key in order:
                        upstream, proxy = pairs[key]
                        direct_result = await upstream.request("/v1/chat/completions", chat_body, b'"content":"tok')
                        proxied = await proxy.request(path, inbound_body, marker)
                        if number >= 30:  # the first ones warm connections and caches
                            timings[f"direct {key}"].append(direct_result.total_ms)
                            timings[key].append(proxied.total_ms)
                p50 = {key: statistics.median(values) for key, values in timings.items()}
                label = f"{name}, {'stream 100 chunks' if stream else 'no stream'}"
                added_off, added_on = p50["off"] - p50["direct off"], p50["on"] - p50["direct on"]
                results[label] = {
                    "added_p50_ms_off": added_off,
                    "added_p50_ms_on": added_on,
                    "budgets_metrics_p50_ms": added_on - added_off,
                }
                print(
                    f"{label:34s} added p50: budgets+metrics off {added_off:+6.3f} ms"
                    f" | on {added_on:+6.3f} ms | on - off {added_on - added_off:+6.3f} ms"
                )
    return results


async def throughput(port: int, path: str, body: bytes, marker: bytes, concurrency: int, seconds: float) -> float:
    deadline = time.perf_counter() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        connection = Connection(port)
        while time.perf_counter() < deadline:
            await connection.request(path, body, marker)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with serving(Path(tempfile.mkdtemp(prefix="switch-bench-"))) as stack:
        for name, build, to_ir, path, marker in WORKLOADS:
            for stream in (False, True):
                inbound_body = build(stream=stream)
                chat_body = request_from_ir(to_ir(inbound_body), KIMI)
                label = f"{name}, {'stream 100 chunks' if stream else 'no stream'}"
                results[label] = await paired(
                    label,
                    (stack.upstream_port, "/v1/chat/completions", orjson.dumps(chat_body), b'"content":"tok'),
                    (stack.proxy_port, path, orjson.dumps(inbound_body), marker),
                    args.requests,
                )
        body = orjson.dumps(claude_code_request(stream=True))
        rps_proxy = await throughput(
            stack.proxy_port, "/v1/messages", body, b"text_delta", args.concurrency, args.seconds
        )
        print(f"streamed requests/s through the proxy at {args.concurrency} concurrent clients: {rps_proxy:.0f}")
        results["rps_streamed"] = rps_proxy
        results["proxy_rss_mb"] = rss_mb(stack.proxy.pid)
        print(f"proxy RSS after the run: {results['proxy_rss_mb']:.1f} MB")
    return results


async def compare_team(args: argparse.Namespace) -> dict[str, Any]:
    """The proxy's overhead without a team ledger and with its shipper busy, measured in the same run."""
    import subprocess

    from switch.config_team import Team
    from switch.team import local
    from tests.ledger_seed import seed_ledger
    from tests.team.pg import PASSWORD, running_cluster

    results: dict[str, Any] = {}
    with running_cluster() as cluster:
        url = cluster.new_database()
        plain_home = Path(tempfile.mkdtemp(prefix="switch-bench-plain-"))
        team_home = Path(tempfile.mkdtemp(prefix="switch-bench-team-"))
        team_config = f'\n[team]\nledger_url = "{url}"\nmember = "bench"\n'
        team = Team(ledger_url=url, member="bench")
        team_env = {"SWITCH_TEAM_PASSWORD": PASSWORD}
        (team_home / "config.toml").write_text(team_config)
        env = {**os.environ, "SWITCH_HOME": str(team_home), **team_env}
        subprocess.run([sys.executable, "-m", "switch", "team", "init", "--yes"], env=env, check=True, cwd=ROOT)
        seed_ledger(team_home / "ledger.db", args.backlog, time.time(), 86400)
        os.environ["SWITCH_HOME"] = str(team_home)
        shipped, elapsed = 0, 0.0
        # One proxy at a time (both would share the pinned core): the first without a team ledger, then the one
        # whose shipper works through its backlog while it is measured.
        for kind, home, config, extra_env in (
            ("no team", plain_home, "", {}),
            ("shipping", team_home, team_config, team_env),
        ):
            with serving(home, extra_config=config, extra_env=extra_env) as stack:
                started, shipped_before = time.perf_counter(), local.cursor(team)
                for name, build, to_ir, path, marker in WORKLOADS:
                    for stream in (False, True):
                        inbound_body = build(stream=stream)
                        chat_body = orjson.dumps(request_from_ir(to_ir(inbound_body), KIMI))
                        label = f"{name}, {'stream' if stream else 'no stream'}"
                        results[f"{label} [{kind}]"] = await paired(
                            f"{label[:22]} [{kind}]",
                            (stack.upstream_port, "/v1/chat/completions", chat_body, b'"content":"tok'),
                            (stack.proxy_port, path, orjson.dumps(inbound_body), marker),
                            args.requests,
                        )
                if kind == "shipping":
                    elapsed = time.perf_counter() - started
                    shipped = local.cursor(team) - shipped_before
        print(
            f"rows the shipper sent to PostgreSQL meanwhile: {shipped} in {elapsed:.1f} s ({shipped / elapsed:.0f}/s)"
        )
        results["shipped_rows"] = shipped
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--budgets", action="store_true", help="Budgets and metrics on versus off instead.")
    parser.add_argument("--team", action="store_true", help="Compare: no team ledger vs its shipper running.")
    parser.add_argument("--backlog", type=int, default=200_000, help="With --team: unshipped rows at the start.")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    arguments = parser.parse_args()
    if arguments.budgets:
        asyncio.run(budgets_on_off(arguments))
    elif arguments.team:
        asyncio.run(compare_team(arguments))
    else:
        asyncio.run(main(arguments))
