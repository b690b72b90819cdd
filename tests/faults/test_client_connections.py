"""Hostile clients against a real `switch serve`: connections that send nothing, half their headers, half
their body or sit idle are closed after their deadlines, and a flood beyond `[server] max_connections`
does not keep a real call out (see switch.proxy.connections).

Before, uvicorn timed out only idle keep-alive connections: each of these stayed open for good.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import anthropic
import orjson
import pytest

from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream, Reply
from tests.servers import free_port, send_post, serve, serve_process, wait_until

TICK = b'data: {"choices":[{"index":0,"delta":{"content":"tick "}}]}\n\n'

# What a test waits for a close before calling the connection left open (the deadlines below are 1-2 s).
PATIENCE_S = 20


def closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sent until it closed the connection; fails if it is still open after PATIENCE_S."""
    sock.settimeout(PATIENCE_S)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the proxy left the connection open for {PATIENCE_S} s (received {received[:80]!r})")
    return received


@dataclass
class Running:
    port: int
    fake: FakeChatUpstream


@pytest.fixture
def start(isolated_home: Path) -> Iterator[Callable[[str], Running]]:
    """Start `switch serve` with the given [server] lines, over a fake Kimi upstream."""
    with ExitStack() as stack:

        def begin(limits: str) -> Running:
            fake = FakeChatUpstream()
            url = stack.enter_context(serve(fake))
            (isolated_home / "config.toml").write_text(
                f'[server]\n{limits}\n[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8"
            )
            port = free_port()
            stack.enter_context(serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}))
            return Running(port, fake)

        yield begin


def test_slow_clients_are_closed_after_their_deadlines(start: Callable[[str], Running]) -> None:
    """Silent, half-headers, half-body and idle keep-alive connections are all closed."""
    proxy_port = start("header_timeout = 1\nbody_timeout = 2\nidle_timeout = 1").port
    silent = socket.create_connection(("127.0.0.1", proxy_port))
    half_headers = socket.create_connection(("127.0.0.1", proxy_port))
    half_headers.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
    half_body = socket.create_connection(("127.0.0.1", proxy_port))
    half_body.sendall(
        b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"model": "m", '
    )
    idle = socket.create_connection(("127.0.0.1", proxy_port))
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    with silent, half_headers, half_body, idle:
        assert closed_by_server(silent) == b""
        assert closed_by_server(half_headers) == b""
        closed_by_server(half_body)
        assert closed_by_server(idle).startswith(b"HTTP/1.1 200")  # answered, then closed once idle


def test_a_flood_beyond_the_cap_does_not_keep_a_real_call_out(start: Callable[[str], Running]) -> None:
    """40 silent connections against a cap of 8: the oldest are closed and a real call still succeeds."""
    proxy_port = start("header_timeout = 60\nmax_connections = 8").port
    flood = [socket.create_connection(("127.0.0.1", proxy_port)) for _ in range(40)]
    try:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{proxy_port}", api_key="unused", max_retries=0)
        message = client.messages.create(
            model="claude-haiku-4-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
        assert message.content
        # Everything over the cap was pushed out (the real call's connection took one place too).
        for sock in flood[:32]:
            assert closed_by_server(sock) == b""
    finally:
        for sock in flood:
            sock.close()


def test_with_every_connection_carrying_a_call_a_new_one_gets_a_503(start: Callable[[str], Running]) -> None:
    """Four calls in flight are not pushed out: a fifth connection is answered 503 with retry-after and closed."""
    proxy = start("header_timeout = 60\nmax_connections = 4")
    proxy.fake.script(*[Reply(200, [TICK], delay_before=30) for _ in range(4)])
    busy = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(4)]
    try:
        request = orjson.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
        for sock in busy:
            send_post(sock, "/v1/messages", request)
        wait_until(lambda: len(proxy.fake.received) == 4, what="four calls to reach the upstream")
        with socket.create_connection(("127.0.0.1", proxy.port)) as extra:
            refused = closed_by_server(extra)
        assert refused.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in refused, refused
        assert b"too many client connections" in refused
        for sock in busy:
            sock.settimeout(0.05)
            with pytest.raises(TimeoutError):
                sock.recv(1)  # still open, its call still running
    finally:
        for sock in busy:
            sock.close()


def test_headers_over_the_cap_get_a_431(start: Callable[[str], Running]) -> None:
    """A request whose headers never end gets a 431 once they pass 64 KiB, not unbounded memory."""
    proxy_port = start("").port
    with socket.create_connection(("127.0.0.1", proxy_port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            for _ in range(40):
                sock.sendall(b"x-filler: " + b"a" * 4000 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert closed_by_server(sock).startswith(b"HTTP/1.1 431")
