"""What a LiteLLM target adds, against a chat target and a direct call to the same upstream, in one run.

The fake chat upstream of `upstream_server.py` is reached three ways: directly; through `switch serve`
on the chat target `baseten/...` (switch's own HTTP path); and through the same proxy on a LiteLLM
target (`api = "litellm"`, LiteLLM's `openai` provider with `api_base` at the same upstream), chosen
per call with the `switch/subagent` model alias. Calls alternate so load and noise fall on all three.

    python bench/litellm_overhead.py [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import serving  # noqa: E402
from bench.overhead import KIMI, Connection, Result, percentile  # noqa: E402
from bench.workload import claude_code_request  # noqa: E402
from switch.protocols.anthropic_messages.inbound import request_to_ir  # noqa: E402
from switch.protocols.openai_chat.outbound import request_from_ir  # noqa: E402

EXTRA_CONFIG = """
[providers.viallm]
api = "litellm"
litellm_provider = "openai"
base_url = "{upstream}/v1"
api_key_env = "BASETEN_API_KEY"
"""
PRESET = '[default]\norchestrator = "baseten/moonshotai/Kimi-K3"\nsubagent = "viallm/moonshotai/Kimi-K3"\n'
PATH = "/v1/messages?beta=true"


def summary(results: list[Result]) -> tuple[float, float, float]:
    totals = [r.total_ms for r in results]
    return statistics.median(totals), percentile(totals, 0.99), statistics.median(r.ttft_ms for r in results)


async def run(args: argparse.Namespace, home: Path) -> None:
    with serving(home, extra_config=EXTRA_CONFIG) as stack:
        for stream in (False, True):
            inbound = claude_code_request(stream=stream)
            chat = orjson.dumps(request_from_ir(request_to_ir(inbound), KIMI))
            via_chat = orjson.dumps({**inbound, "model": "switch/orchestrator"})
            via_litellm = orjson.dumps({**inbound, "model": "switch/subagent"})
            direct, proxy_chat, proxy_litellm = (
                Connection(p) for p in (stack.upstream_port,) + (stack.proxy_port,) * 2
            )
            calls = (
                (direct, "/v1/chat/completions", chat, b'"content":"tok'),
                (proxy_chat, PATH, via_chat, b"text_delta"),
                (proxy_litellm, PATH, via_litellm, b"text_delta"),
            )
            for _ in range(20):  # warm-up: LiteLLM's import and first-call set-up, connections
                for connection, path, body, marker in calls:
                    await connection.request(path, body, marker)
            results: list[list[Result]] = [[], [], []]
            for _ in range(args.requests):
                for slot, (connection, path, body, marker) in enumerate(calls):
                    results[slot].append(await connection.request(path, body, marker))
            (d50, d99, dt), (c50, c99, ct), (l50, l99, lt) = (summary(r) for r in results)
            kind = "stream 100 chunks" if stream else "no stream"
            print(f"Claude Code 52 KB, {kind}:")
            print(f"  direct           p50 {d50:7.2f} ms  p99 {d99:7.2f} ms  TTFT {dt:7.2f} ms")
            print(f"  chat target      p50 {c50:7.2f} ms  p99 {c99:7.2f} ms  TTFT {ct:7.2f} ms  (+{c50 - d50:.2f} ms)")
            print(f"  LiteLLM target   p50 {l50:7.2f} ms  p99 {l99:7.2f} ms  TTFT {lt:7.2f} ms  (+{l50 - d50:.2f} ms)")
            print(
                f"  LiteLLM target / chat target: x{l50 / c50:.2f} p50; added over direct: "
                f"{l50 - d50:.2f} ms vs {c50 - d50:.2f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="switch-bench-litellm-"))
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "bench.toml").write_text(PRESET, encoding="utf-8")
    (home / "run").mkdir()
    import os

    os.environ["SWITCH_HOME"] = str(home)
    from switch.routing.presets import set_active

    set_active("bench")
    asyncio.run(run(args, home))


if __name__ == "__main__":
    main()
