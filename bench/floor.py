"""What switch adds beyond the least a translating proxy must do on these hops, in one run.

Three ways to the same fake chat upstream, one call each in every round (which goes first turns):

- direct: the chat body switch would send, posted to the upstream;
- floor: a relay in this file (`--relay`), the least any Python proxy must do for a whole Claude Code
  call routed to a chat upstream: parse the body, map its system, messages and tools to a chat body,
  send it on a kept-alive upstream connection, map the answer back. No checks, routing, ledger, limits
  or streams. It runs on the proxy's core with uvloop and httptools, as `switch serve` does;
- switch: `switch serve` routing the same call to the same upstream.

    python bench/floor.py [--requests 2000]

floor − direct is what any proxy on these hops pays here (two more sockets, the hand-offs between the
two cores, a 52 KB parse); switch − floor is switch's own work. Differences are taken percentile by
percentile, as `bench/tail_memory.py` takes them (at p99.9 and max, each is two single calls apart).

Taken in turn, the machine's slow moments fall at the same times on all three, but they lengthen the
proxied calls far more than the direct ones (each proxied call crosses the two cores four times; a
direct call never does): floor − direct moves with the machine's state, switch − floor much less. The
floor shares its core with switch's idle proxy, whose ledger writer may run during a floor call
(switch's last calls' rows): read the floor's tail with that in mind.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httptools
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from bench.loopback import Stack

_UPSTREAM_HEAD = "POST /v1/chat/completions HTTP/1.1\r\nhost: upstream\r\ncontent-type: application/json\r\n"
_STOPS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


# ---- the floor relay (its own process) ---------------------------------------------------------


def chat_body(anthropic: dict[str, Any]) -> dict[str, Any]:
    """The least mapping of an Anthropic Messages body to a chat completions body."""
    system = anthropic.get("system") or []
    texts = [system] if isinstance(system, str) else [block.get("text", "") for block in system]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "\n\n".join(texts)}]
    for message in anthropic["messages"]:
        content = message["content"]
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type")
            if kind == "text":
                text.append(block["text"])
            elif kind == "tool_use":
                arguments = orjson.dumps(block.get("input") or {}).decode()
                calls.append(
                    {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}
                )
            elif kind == "tool_result":
                result = block.get("content")
                if isinstance(result, list):
                    result = "\n".join(part.get("text", "") for part in result)
                messages.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": result or ""})
        if text or calls:
            entry: dict[str, Any] = {"role": message["role"], "content": "\n".join(text) or None}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
    tools = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t.get("description", ""), "parameters": t["input_schema"]},
        }
        for t in anthropic.get("tools") or []
    ]
    return {"model": "moonshotai/Kimi-K3", "messages": messages, "tools": tools, "max_tokens": anthropic["max_tokens"]}


def anthropic_message(chat: dict[str, Any], model: str) -> dict[str, Any]:
    """The least mapping of a chat completion back to an Anthropic message."""
    choice = chat["choices"][0]
    said = choice["message"]
    content: list[dict[str, Any]] = [{"type": "text", "text": said["content"]}] if said.get("content") else []
    for call in said.get("tool_calls") or []:
        function = call["function"]
        content.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": orjson.loads(function["arguments"] or "{}"),
            }
        )
    usage = chat.get("usage") or {}
    return {
        "id": chat["id"],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _STOPS.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
    }


class _Messages(asyncio.Protocol):
    """An HTTP/1.1 connection that hands each whole message body to `whole` (its parser is the subclass's)."""

    parser: Any

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)

    def on_message_complete(self) -> None:
        body, self.pieces = b"".join(self.pieces), []
        self.whole(body)

    def whole(self, body: bytes) -> None:
        raise NotImplementedError


class _Upstream(_Messages):
    """One kept-alive connection to the chat upstream, one request at a time."""

    def __init__(self) -> None:
        super().__init__()
        self.parser = httptools.HttpResponseParser(self)
        self.waiting: asyncio.Future[bytes] | None = None

    def whole(self, body: bytes) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_result(body)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(ConnectionError("the upstream closed the connection"))

    async def post(self, body: bytes) -> bytes:
        self.waiting = asyncio.get_running_loop().create_future()
        head = f"{_UPSTREAM_HEAD}content-length: {len(body)}\r\n\r\n"
        self.transport.write(head.encode() + body)
        return await self.waiting


class _Client(_Messages):
    """One client connection, whose requests come one at a time (as the measurement sends them), each relayed
    on this connection's own upstream connection; a call the relay cannot serve is a 502."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__()
        self.parser = httptools.HttpRequestParser(self)
        self.upstream_port = upstream_port
        self.upstream: _Upstream | None = None

    def whole(self, body: bytes) -> None:
        asyncio.get_running_loop().create_task(self.relay(body))

    async def relay(self, raw: bytes) -> None:
        try:
            if self.upstream is None or self.upstream.transport.is_closing():
                _transport, self.upstream = await asyncio.get_running_loop().create_connection(
                    _Upstream, "127.0.0.1", self.upstream_port
                )
            request = orjson.loads(raw)
            answer = orjson.loads(await self.upstream.post(orjson.dumps(chat_body(request))))
            body = orjson.dumps(anthropic_message(answer, request["model"]))
            status = "200 OK"
        except Exception as exc:  # the measurement stops on a status other than 200, instead of waiting
            body = repr(exc).encode()
            status = "502 Bad Gateway"
        head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        self.transport.write(head.encode() + body)


async def _relay(port: int, upstream_port: int) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: _Client(upstream_port), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


# ---- the measurement (this process) --------------------------------------------------------------


async def measure(
    stack: Stack, floor_port: int, count: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """`count` whole calls each way, in turn: percentiles of total time (ms), and the differences."""
    # Imported here, not at the top: the relay runs this file too and must carry none of switch's modules.
    from bench.overhead import KIMI
    from bench.tail_memory import PATH, differences, in_turn, percentiles
    from bench.workload import claude_code_request
    from switch.protocols.anthropic_messages.inbound import request_to_ir
    from switch.protocols.openai_chat.outbound import request_from_ir

    inbound = claude_code_request(stream=False)
    body = orjson.dumps(inbound)
    chat = orjson.dumps(request_from_ir(request_to_ir(inbound), KIMI))
    results = await in_turn(
        {
            "direct": (stack.upstream_port, "/v1/chat/completions", chat, b""),
            "floor": (floor_port, PATH, body, b""),
            "switch": (stack.proxy_port, PATH, body, b""),
        },
        count,
    )
    got = {name: percentiles([result.total_ms for result in values]) for name, values in results.items()}
    apart = differences(
        got,
        (
            ("floor − direct", "floor", "direct"),
            ("switch − direct", "switch", "direct"),
            ("switch − floor", "switch", "floor"),
        ),
    )
    return got, apart


async def main(args: argparse.Namespace) -> None:
    from bench.loopback import free_port, serving, stop, wait_listening
    from bench.tail_memory import ENV, print_table

    with serving(Path(tempfile.mkdtemp(prefix="switch-bench-floor-")), extra_env=ENV) as stack:
        floor_port = free_port()
        relay = subprocess.Popen([sys.executable, __file__, "--relay", str(floor_port), str(stack.upstream_port)])
        try:
            # On the proxy's core, as `serving` pinned it.
            os.sched_setaffinity(relay.pid, os.sched_getaffinity(stack.proxy.pid))
            wait_listening(floor_port, process=relay)
            got, apart = await measure(stack, floor_port, args.requests)
        finally:
            stop(relay)
    print_table(f"whole 52 KB Claude Code calls, {args.requests} each way, in turn", got, apart)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="Calls each way.")
    parser.add_argument("--relay", nargs=2, type=int, metavar=("PORT", "UPSTREAM_PORT"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if arguments.relay:
        asyncio.run(_relay(*arguments.relay))
    else:
        asyncio.run(main(arguments))
