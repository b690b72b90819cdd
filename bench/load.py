"""Load with injected upstream failures: nothing unrecorded, nothing stuck, memory flat.

Three processes: the fast fake chat upstream failing every Nth request (HTTP 500, reset
mid-stream, stream cut short, in turn), `switch serve` routing to it and writing its real SQLite
ledger, and this client running `--concurrency` keep-alive connections that each send the 52 KB
streamed Claude Code request until `--calls` calls are done. Then it checks that every call got a
well-formed answer or error, that the ledger holds exactly one row per call with the right outcome,
and how the proxy's RSS moved between the first and the last thousand calls.

    python bench/load.py [--calls 10000] [--concurrency 32] [--fail-every 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import post_request, read_head, rss_mb, serving  # noqa: E402
from bench.overhead import percentile  # noqa: E402
from bench.workload import claude_code_request  # noqa: E402

REQUEST_TIMEOUT = 60.0


@dataclass
class LoadResult:
    calls: int
    injected: int
    upstream_requests: int
    answers: Counter[str] = field(default_factory=Counter)
    outcomes: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    rss_start_mb: float = 0.0
    rss_first_thousand_mb: float = 0.0
    rss_end_mb: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rss_growth(self) -> float:
        """Growth from the end of the first thousand calls (a fifth of a short run) to the end, as a fraction."""
        return self.rss_end_mb / self.rss_first_thousand_mb - 1


class Client:
    """One keep-alive connection speaking just enough HTTP/1.1 to tell answers from errors."""

    def __init__(self, port: int, body: bytes) -> None:
        self.port = port
        self.request = post_request(port, "/v1/messages", body)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def call(self) -> str:
        """Make one call; say what came back: `completed`, `error_status`, `stream_error` or `malformed`."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(self.request)
        status_line, headers = await read_head(self.reader)
        if b"content-length" in headers:
            body = await self.reader.readexactly(int(headers[b"content-length"]))
        else:
            parts = []
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                parts.append(await self.reader.readexactly(size + 2))
                if size == 0:
                    break
            body = b"".join(parts)
        if headers.get(b"connection") == b"close":
            self.close()
        if b" 200 " not in status_line:
            return "error_status" if orjson.loads(body).get("type") == "error" else "malformed"
        if b"event: message_stop" in body and b"event: error" not in body:
            return "completed"
        return "stream_error" if b"event: error" in body else "malformed"

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def count_rows(database: Path) -> dict[str, int]:
    if not database.exists():
        return {}
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return dict(connection.execute("SELECT outcome, COUNT(*) FROM calls GROUP BY outcome").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        connection.close()


async def run_load(
    calls: int, concurrency: int, fail_every: int, home: Path | None = None, pin: bool = True
) -> LoadResult:
    """Run the whole scenario and return what the client saw, what the ledger holds and the RSS curve."""
    home = home or Path(tempfile.mkdtemp(prefix="switch-load-"))
    upstream_args = ("--fail-every", str(fail_every))
    with serving(home, upstream_args, ("--log-level", "error"), pin) as stack:
        proxy = stack.proxy
        result = LoadResult(calls=calls, injected=0, upstream_requests=0, rss_start_mb=rss_mb(proxy.pid))
        body = orjson.dumps(claude_code_request(stream=True))
        remaining = iter(range(calls))
        done = 0
        started = time.perf_counter()

        async def worker() -> None:
            nonlocal done
            client = Client(stack.proxy_port, body)
            for _ in remaining:
                began = time.perf_counter()
                try:
                    answer = await asyncio.wait_for(client.call(), REQUEST_TIMEOUT)
                except TimeoutError:
                    answer = "stuck"
                    client.close()
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    answer = "broken_connection"
                    client.close()
                result.answers[answer] += 1
                if answer == "completed":
                    result.latencies_ms.append((time.perf_counter() - began) * 1000)
                done += 1
                if done == min(1000, calls // 5):
                    result.rss_first_thousand_mb = rss_mb(proxy.pid)
            client.close()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.seconds = time.perf_counter() - started
        result.rss_end_mb = rss_mb(proxy.pid)
        stats = orjson.loads(await asyncio.to_thread(_get, stack.upstream_port, "/stats"))
        result.injected, result.upstream_requests = stats["injected"], stats["requests"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the recorder writes just after each answer
            result.outcomes = count_rows(home / "ledger.db")
            result.rows = sum(result.outcomes.values())
            if result.rows >= calls:
                break
            await asyncio.sleep(0.1)
        return result


def _get(port: int, path: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:  # noqa: S310 (loopback)
        return bytes(response.read())


def report(result: LoadResult) -> dict[str, Any]:
    """The figures, printed and returned."""
    figures = {
        "calls": result.calls,
        "upstream_requests": result.upstream_requests,
        "errors_injected": result.injected,
        "client_answers": dict(result.answers),
        "ledger_rows": result.rows,
        "ledger_outcomes": result.outcomes,
        "rss_start_mb": round(result.rss_start_mb, 1),
        "rss_after_first_1000_mb": round(result.rss_first_thousand_mb, 1),
        "rss_end_mb": round(result.rss_end_mb, 1),
        "rss_growth_pct": round(result.rss_growth * 100, 1),
        "p50_ms": round(statistics.median(result.latencies_ms), 2) if result.latencies_ms else None,
        "p99_ms": round(percentile(result.latencies_ms, 0.99), 2) if result.latencies_ms else None,
        "calls_per_s": round(result.calls / result.seconds, 1),
    }
    for name, value in figures.items():
        print(f"{name:26s} {value}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--fail-every", type=int, default=100)
    arguments = parser.parse_args()
    report(asyncio.run(run_load(arguments.calls, arguments.concurrency, arguments.fail_every)))
