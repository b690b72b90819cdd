"""Real loopback servers for tests: any ASGI app on uvicorn, 127.0.0.1, a free port, in a thread."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


class _QuietServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:
        pass


@contextmanager
def serve(app: Any, http: str = "auto") -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (port chosen by the OS) and yield its base URL; `http`: uvicorn's protocol."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="critical", access_log=False, lifespan="auto", http=http
    )
    server = _QuietServer(config)

    def run() -> None:
        asyncio.run(server.serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers_health(port: int) -> bool:
    """Whether a switch proxy on `port` answers its health probe."""
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def start_serve(port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`switch serve --port PORT` as its own process (extra `env` on top of ours), once it answers."""
    process = subprocess.Popen(
        [sys.executable, "-m", "switch", "serve", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not answers_health(port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait(30)  # reaped here: the caller never gets it
            raise RuntimeError("switch serve did not start")
        time.sleep(0.05)
    return process


def send_post(sock: socket.socket, path: str, body: bytes) -> None:
    """Write one HTTP/1.1 JSON POST on a raw socket (for tests that read the answer byte by byte)."""
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
