"""Per-turn latency and proxy CPU of a 10-turn Codex-shaped session: Responses over WebSocket against HTTP SSE.

Three processes, as in `overhead.py`: the fast fake chat upstream, `switch serve` routing to it (pinned to a
core of its own where there are two), and this client. One session is Codex's: a 40 KB first turn (the captured
Codex function-call request), then nine turns each adding one `function_call_output`. Over HTTP every turn is a
new `POST /v1/responses` carrying the whole history so far (as Codex sends it with `store: false`); over the
WebSocket it is one connection, a `response.create` per turn with only the new item after
`previous_response_id` (as Codex 0.171 sends it). Sessions alternate HTTP, WebSocket, HTTP, … in one run, and
each turn is also timed as a direct call to the upstream with the chat body the proxy sends it, so the figure
reported is what the proxy adds per turn, and the proxy's own CPU time per turn (from /proc).

    python bench/websocket.py [--sessions 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loopback import cpu_seconds, post_request, read_head, rss_mb, serving  # noqa: E402
from bench.overhead import KIMI, Connection, percentile  # noqa: E402
from bench.workload import codex_request  # noqa: E402
from switch.protocols.openai_chat.outbound import request_from_ir  # noqa: E402
from switch.protocols.openai_responses.inbound import request_to_ir  # noqa: E402

TURNS = 10
BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06"}


def _tool_output(turn: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"call_{turn}", "output": f"exit 0\n{'line of output ' * 40}"}


async def _read_sse(reader: asyncio.StreamReader) -> bytes:
    """A chunked SSE body, whole (the bench upstream and the proxy both chunk their streams)."""
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).strip(), 16)
        if size == 0:
            await reader.readline()
            return b"".join(parts)
        parts.append((await reader.readexactly(size + 2))[:-2])


def _completed(stream: bytes) -> dict[str, Any]:
    for line in reversed(stream.split(b"\n")):
        if line.startswith(b"data: ") and b'"response.completed"' in line:
            return dict(orjson.loads(line[6:])["response"])
    raise RuntimeError("no response.completed in the stream")


class HttpSession:
    """Codex over HTTP: one POST per turn, the whole history in each."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def turn(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(post_request(self.port, "/v1/responses", orjson.dumps(body)))
        status, _headers = await read_head(self.reader)
        if b" 200 " not in status:
            raise RuntimeError(f"bad status {status!r}")
        return _completed(await _read_sse(self.reader))

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _ws_turn(ws: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    await ws.send(orjson.dumps(message).decode())
    while True:
        event = orjson.loads(await ws.recv())
        if event["type"] == "response.completed":
            return dict(event["response"])
        if event["type"] in ("error", "response.failed"):
            raise RuntimeError(f"turn failed: {event}")


def _session_bodies() -> list[dict[str, Any]]:
    """The full-history body of each turn (what HTTP sends, and what the proxy makes of a WebSocket turn)."""
    first = codex_request(stream=True)
    first["store"] = False
    bodies = [first]
    for turn in range(1, TURNS):
        previous = bodies[-1]
        reply = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok " * 100}]}]
        bodies.append({**previous, "input": [*previous["input"], *reply, _tool_output(turn)]})
    return bodies


async def http_session(port: int, bodies: list[dict[str, Any]]) -> list[float]:
    session = HttpSession(port)
    times = []
    history: list[Any] = []
    try:
        for turn, body in enumerate(bodies):
            new_items = body["input"] if turn == 0 else [_tool_output(turn)]
            sent = {**body, "input": [*history, *new_items]}
            started = time.perf_counter()
            response = await session.turn(sent)
            times.append((time.perf_counter() - started) * 1000)
            history = [*sent["input"], *response["output"]]
    finally:
        await session.close()
    return times


async def ws_session(port: int, bodies: list[dict[str, Any]]) -> list[float]:
    times = []
    async with connect(f"ws://127.0.0.1:{port}/v1/responses", additional_headers=BETA, compression=None) as ws:
        previous: str | None = None
        for turn, body in enumerate(bodies):
            message: dict[str, Any] = {"type": "response.create", **body}
            if previous is not None:
                message["input"] = [_tool_output(turn)]
                message["previous_response_id"] = previous
            started = time.perf_counter()
            response = await _ws_turn(ws, message)
            times.append((time.perf_counter() - started) * 1000)
            previous = response["id"]
    return times


async def direct_times(port: int, bodies: list[dict[str, Any]]) -> list[float]:
    """Each turn's chat body straight to the upstream (what the proxy sends it for that turn)."""
    connection = Connection(port)
    chat = [orjson.dumps(request_from_ir(request_to_ir(body), KIMI)) for body in bodies]
    return [(await connection.request("/v1/chat/completions", data, b'"content":"tok')).total_ms for data in chat]


def _summary(label: str, proxied: list[list[float]], direct: list[list[float]], cpu: list[float]) -> dict[str, float]:
    added = [p - d for session, base in zip(proxied, direct, strict=True) for p, d in zip(session, base, strict=True)]
    later = [
        p - d for session, base in zip(proxied, direct, strict=True) for p, d in zip(session[1:], base[1:], strict=True)
    ]
    result = {
        "proxied_p50_ms": statistics.median([t for session in proxied for t in session]),
        "direct_p50_ms": statistics.median([t for session in direct for t in session]),
        "added_p50_ms": statistics.median(added),
        "added_p99_ms": percentile(added, 0.99),
        "added_p50_later_turns_ms": statistics.median(later),
        # Summed over every session: /proc counts CPU time in clock ticks (10 ms), more than a turn takes.
        "proxy_cpu_ms_per_turn": sum(cpu) / (len(cpu) * TURNS) * 1000,
    }
    print(
        f"{label:10s} p50 {result['proxied_p50_ms']:.2f} ms (direct {result['direct_p50_ms']:.2f} ms);"
        f" added per turn p50 {result['added_p50_ms']:+6.3f} ms, p99 {result['added_p99_ms']:+6.3f} ms,"
        f" turns 2-10 p50 {result['added_p50_later_turns_ms']:+6.3f} ms | proxy CPU"
        f" {result['proxy_cpu_ms_per_turn']:.3f} ms/turn"
    )
    return result


async def main(args: argparse.Namespace) -> dict[str, Any]:
    bodies = _session_bodies()
    runs: dict[str, tuple[list[list[float]], list[list[float]], list[float]]] = {
        name: ([], [], []) for name in ("HTTP SSE", "WebSocket")
    }
    with serving(Path(tempfile.mkdtemp(prefix="switch-bench-ws-"))) as stack:
        pid = stack.proxy.pid
        for _ in range(3):  # warm-up of both paths
            await http_session(stack.proxy_port, bodies)
            await ws_session(stack.proxy_port, bodies)
        for _ in range(args.sessions):
            for name, run in (("HTTP SSE", http_session), ("WebSocket", ws_session)):
                proxied, direct, cpu = runs[name]
                direct.append(await direct_times(stack.upstream_port, bodies))
                before = cpu_seconds(pid)
                proxied.append(await run(stack.proxy_port, bodies))
                cpu.append(cpu_seconds(pid) - before)
        print(f"{args.sessions} sessions of {TURNS} Codex turns each, alternating, in one run:")
        results: dict[str, Any] = {name: _summary(name, *run) for name, run in runs.items()}
        results["proxy_rss_mb"] = rss_mb(pid)
        print(f"proxy RSS after the run: {results['proxy_rss_mb']:.1f} MB")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
