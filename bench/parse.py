"""Request parsing speed: `request_to_ir` of each API we serve, on the captured harness requests.

The captures in tests/fixtures/captures are parsed by the API of their path: Claude Code (and the
Anthropic-speaking LangChain/deepagents runs) by Anthropic Messages, Codex (and the OpenAI ones) by
Responses, LangChain's chat calls by Chat Completions. Those chat calls are tiny, so `chat (sent on)`
also parses what the proxy sends a chat upstream for every Anthropic and Responses capture: long
chat bodies with tools, tool calls and tool results. A figure is µs per request, the best of 30.

    PYTHONPATH=<checkout> python bench/parse.py          # the checkout on PYTHONPATH
    python bench/parse.py --compare OLD NEW [--rounds 5]  # two checkouts, run turn about

With --compare every round runs OLD then NEW, each in a fresh process with the same string-hash seed
(a seed changes how fast dict lookups are), and a figure is the best over all rounds, so a load
that comes and goes on the machine falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "captures"
APIS = ("anthropic", "responses", "chat", "chat (sent on)")
BY_PATH = {"/v1/messages": "anthropic", "/v1/responses": "responses", "/v1/chat/completions": "chat"}
REPEATS = 30
# Each timed repeat parses the API's whole set this many times over, so one repeat lasts milliseconds.
TARGET_SECONDS = 0.01


def _bodies() -> dict[str, list[Any]]:
    bodies: dict[str, list[Any]] = {api: [] for api in APIS}
    for path in sorted(CAPTURES.glob("*/*.json")):
        capture = json.loads(path.read_text())
        bodies[BY_PATH[capture["path"]]].append(capture["body"])
    return bodies


def _parsers() -> dict[str, Callable[[Any], Any]]:
    from switch.protocols.anthropic_messages.inbound import request_to_ir as anthropic
    from switch.protocols.openai_chat.inbound import request_to_ir as chat
    from switch.protocols.openai_responses.inbound import request_to_ir as responses

    return {"anthropic": anthropic, "responses": responses, "chat": chat, "chat (sent on)": chat}


def _sent_on(bodies: dict[str, list[Any]], parsers: dict[str, Callable[[Any], Any]]) -> list[Any]:
    from switch.protocols.openai_chat.outbound import request_from_ir
    from switch.routing.resolve import ChatTarget

    target = ChatTarget("moonshotai/Kimi-K3", effort_levels=("low", "high", "max"), max_output_tokens=262144)
    return [request_from_ir(parsers[api](body), target) for api in ("anthropic", "responses") for body in bodies[api]]


def _best_seconds(parse: Callable[[Any], Any], bodies: list[Any], loops: int) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(loops):
            for body in bodies:
                parse(body)
        best = min(best, time.perf_counter() - started)
    return best


def measure() -> dict[str, float]:
    """µs per request per API for the `switch` this process imports."""
    parsers = _parsers()
    bodies = _bodies()
    bodies["chat (sent on)"] = _sent_on(bodies, parsers)
    figures: dict[str, float] = {}
    for api in APIS:
        parse, requests = parsers[api], bodies[api]
        started = time.perf_counter()
        for body in requests:
            parse(body)
        loops = max(1, round(TARGET_SECONDS / max(time.perf_counter() - started, 1e-9)))
        figures[api] = _best_seconds(parse, requests, loops) / (loops * len(requests)) * 1e6
    return figures


def _measure_checkout(checkout: str, hash_seed: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": checkout, "PYTHONHASHSEED": str(hash_seed)}
    out = subprocess.run(
        [sys.executable, __file__, "--json"], env=env, check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def compare(old: str, new: str, rounds: int) -> None:
    """Print both checkouts' best figures over `rounds` interleaved rounds, and NEW's change."""
    best = {old: dict.fromkeys(APIS, float("inf")), new: dict.fromkeys(APIS, float("inf"))}
    for round_number in range(rounds):
        for checkout in (old, new):
            for api, figure in _measure_checkout(checkout, round_number).items():
                best[checkout][api] = min(best[checkout][api], figure)
    print(f"{'API':<16}{'old µs':>10}{'new µs':>10}{'change':>9}")
    for api in APIS:
        before, after = best[old][api], best[new][api]
        print(f"{api:<16}{before:>10.2f}{after:>10.2f}{(after / before - 1) * 100:>+8.1f}%")


def main() -> None:
    """Measure the checkout on PYTHONPATH, or compare two."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one line of JSON, for --compare")
    args = parser.parse_args()
    if args.compare:
        compare(*(str(Path(checkout).resolve()) for checkout in args.compare), rounds=args.rounds)
        return
    figures = measure()
    if args.json:
        print(json.dumps(figures))
        return
    import switch

    print(f"switch from {Path(switch.__file__).parent}")
    for api, figure in figures.items():
        print(f"{api:<16}{figure:>8.2f} µs per request")


if __name__ == "__main__":
    main()
