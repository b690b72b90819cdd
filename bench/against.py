"""This checkout against another revision of switch, in one run: is any column worse than it was?

Both builds serve side by side, routed to the same fake chat upstream, each pinned to the proxy's core
(one idles while the other serves). The other revision is exported with `git archive` and installed into
a venv of its own under the temporary directory, kept for the next run (`--venv` to choose where); it is
run from outside any checkout, so it imports its own code and never this one's.

    python bench/against.py REV [--requests 1500] [--seconds 5] [--rounds 2]

Columns, each build measured in the same minutes as the other:
- whole and streamed 52 KB Claude Code calls, sequential, one call each way in every round (direct to the
  upstream, this checkout, REV; which goes first turns): p50 to max of total time (and of the first
  token, streamed), the proxy's CPU per call, and each build minus the other, percentile by percentile;
- requests/s under `--concurrency` clients, whole then streamed, the builds alternating for `--rounds`
  rounds of `--seconds` each;
- RSS once both listen and settled, and after everything.

The machine's slow phases fall on both builds alike, so `this − REV` holds where the absolute figures
move from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import (  # noqa: E402
    Stack,
    cpu_seconds,
    free_port,
    proxy_home,
    rss_mb,
    serving,
    stop,
    wait_listening,
)
from bench.overhead import KIMI, throughput  # noqa: E402
from bench.tail_memory import ENV, PATH, differences, in_turn, percentiles, print_table  # noqa: E402
from bench.workload import claude_code_request  # noqa: E402
from switch.protocols.anthropic_messages.inbound import request_to_ir  # noqa: E402
from switch.protocols.openai_chat.outbound import request_from_ir  # noqa: E402

THIS = "this"
WARMUP = 30


def resolve(revision: str) -> str:
    """The full commit id `revision` names in this checkout."""
    return subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def venv_python_for(commit: str, venv: Path) -> Path:
    """The Python of a venv holding `commit`'s switch, installed there first if it is not yet."""
    python = venv / "bin" / "python"
    marker = venv / "switch-commit"
    if python.exists() and marker.exists() and marker.read_text() == commit:
        return python
    # Whatever was there (another commit, or an install cut short) is not trusted until this one completes.
    marker.unlink(missing_ok=True)
    source = venv / "source"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")  # Python 3.11.4 and later
    print(f"installing {commit[:12]} into {venv} (once; kept for the next run)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(source)], check=True)
    marker.write_text(commit)
    return python


def start_other(python: Path, stack: Stack, home: Path) -> tuple[subprocess.Popen[bytes], int]:
    """REV's `switch serve` of its own home, routed to `stack`'s upstream and pinned beside this checkout's."""
    port = free_port()
    environment = {**proxy_home(home, stack.upstream_port), **ENV}
    environment.pop("PYTHONPATH", None)
    # -P and a working directory outside this checkout: REV's interpreter must not import this checkout's code.
    command = [str(python), "-P", "-m", "switch", "serve", "--port", str(port)]
    proxy = subprocess.Popen(command, env=environment, cwd=str(home))
    try:
        os.sched_setaffinity(proxy.pid, os.sched_getaffinity(stack.proxy.pid))
        wait_listening(port, timeout=60, process=proxy)
    except BaseException:
        stop(proxy)
        raise
    return proxy, port


async def sequential(
    stack: Stack, other_port: int, pids: dict[str, int], revision: str, stream: bool, count: int
) -> None:
    """`count` calls each way in turn; prints their percentiles, the differences and each build's CPU per call."""
    inbound = claude_code_request(stream=stream)
    chat = orjson.dumps(request_from_ir(request_to_ir(inbound), KIMI))
    body = orjson.dumps(inbound)
    marker = b"text_delta" if stream else b""
    ways = {
        "direct": (stack.upstream_port, "/v1/chat/completions", chat, b'"content":"tok' if stream else b""),
        THIS: (stack.proxy_port, PATH, body, marker),
        revision: (other_port, PATH, body, marker),
    }
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    results = await in_turn(ways, count, WARMUP)
    # Over the warm-up rounds too: the CPU clock cannot be read between one build's calls and the other's.
    spent = {name: (cpu_seconds(pid) - before[name]) * 1000 / (count + WARMUP) for name, pid in pids.items()}
    pairs = (
        (f"{THIS} − direct", THIS, "direct"),
        (f"{revision} − direct", revision, "direct"),
        (f"{THIS} − {revision}", THIS, revision),
    )
    kind = "streamed, 100 chunks" if stream else "whole"
    columns = (("total", "total_ms"), ("first token", "ttft_ms")) if stream else (("total", "total_ms"),)
    for label, column in columns:
        got = {name: percentiles([getattr(result, column) for result in values]) for name, values in results.items()}
        print_table(f"sequential, {kind}, {count} calls each way, {label} (ms)", got, differences(got, pairs))
    print("proxy CPU per call (ms): " + ", ".join(f"{name} {value:.3f}" for name, value in spent.items()))


async def main(args: argparse.Namespace) -> None:
    commit = resolve(args.revision)
    revision = args.revision if len(args.revision) <= 12 else commit[:12]
    if revision in (THIS, "direct"):
        revision = commit[:12]  # the table's other rows carry those names
    venv = Path(args.venv) if args.venv else Path(tempfile.gettempdir()) / f"switch-bench-build-{commit[:12]}"
    python = venv_python_for(commit, venv)
    scratch = Path(tempfile.mkdtemp(prefix="switch-bench-against-"))
    with serving(scratch / "this", extra_env=ENV) as stack:
        other, other_port = start_other(python, stack, scratch / "other")
        try:
            pids = {THIS: stack.proxy.pid, revision: other.pid}
            time.sleep(args.settle)
            idle = {name: rss_mb(pid) for name, pid in pids.items()}
            for stream in (False, True):
                await sequential(stack, other_port, pids, revision, stream, args.requests)
            ports = {THIS: stack.proxy_port, revision: other_port}
            print()
            for stream in (False, True):
                body = orjson.dumps(claude_code_request(stream=stream))
                marker = b"text_delta" if stream else b""
                rates: dict[str, list[float]] = {name: [] for name in ports}
                for number in range(args.rounds):
                    for name in list(ports)[number % 2 :] + list(ports)[: number % 2]:
                        rate = await throughput(ports[name], PATH, body, marker, args.concurrency, args.seconds)
                        rates[name].append(rate)
                kind = "streamed" if stream else "whole"
                print(
                    f"load: {args.concurrency} clients, {kind} answers, requests/s: "
                    + ", ".join(f"{name} {' / '.join(f'{r:.0f}' for r in values)}" for name, values in rates.items())
                )
            loaded = {name: rss_mb(pid) for name, pid in pids.items()}
            print(
                "RSS MB idle / after everything: "
                + ", ".join(f"{name} {idle[name]:.1f} / {loaded[name]:.1f}" for name in pids)
            )
        finally:
            stop(other)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", help="A commit, tag or branch of this repository.")
    parser.add_argument("--requests", type=int, default=1500, help="Sequential calls each way, whole and streamed.")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0, help="Length of each load round.")
    parser.add_argument("--rounds", type=int, default=2, help="Load rounds per build.")
    parser.add_argument("--settle", type=float, default=3.0, help="Seconds to wait before the idle RSS.")
    parser.add_argument("--venv", help="Where REV's venv lives (default: the temporary directory, by commit).")
    asyncio.run(main(parser.parse_args()))
