"""Real loopback servers for tests: any ASGI app on 127.0.0.1, a free port, in a thread.

`http="switch"` serves it as `switch serve` does: switch's own server (switch.proxy.serving) and HTTP/1.1
protocol, with the default connection limits; any other value is uvicorn's `http` option, on uvicorn."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn


class _QuietServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:
        pass


@contextmanager
def serve(app: Any, http: str = "auto", lifespan_required: bool = False) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (port chosen by the OS) and yield its base URL; `http`: the protocol (see above).

    `lifespan_required` (switch's server only): an app whose start-up does not complete is not served, as
    `switch serve` refuses the proxy's; the fake upstreams take no lifespan and leave it False.
    """
    if http == "switch":
        with _switch_server(app, lifespan_required) as url:
            yield url
        return
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="critical", access_log=False, lifespan="auto", http=http
    )
    server = _QuietServer(config)

    def run() -> None:
        asyncio.run(server.serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=10, what="the test server to start")
        if not server.started:
            raise RuntimeError("test server did not start")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def _switch_server(app: Any, lifespan_required: bool) -> Iterator[str]:
    """`app` on switch's own server, as `switch serve` runs it (signals left to the test process)."""
    from switch.config import Server
    from switch.proxy.server_main import server_for

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)
    server = server_for(app, Server(), handle_signals=False, lifespan_required=lifespan_required)
    thread = threading.Thread(target=server.run, args=([listener],), daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=10, what="the test server to start")
        if not server.started:
            raise RuntimeError("test server did not start")
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.stop()
        thread.join(timeout=10)
        listener.close()


def user_serve_argv(port: int, options: tuple[str, ...] = ()) -> list[str]:
    """`switch serve --port PORT OPTIONS` run by this Python as a user types it: without the `-P` that
    `switch.child.serve_argv` adds for the proxies switch starts itself."""
    return [sys.executable, "-m", "switch", "serve", "--port", str(port), *options]


def wait_answering(process: subprocess.Popen[Any], port: int) -> None:
    """Wait until the proxy `process` started on `port` answers its health probe, or has exited."""
    wait_until(lambda: answers_health(port) or process.poll() is not None, timeout=30, what="switch serve to answer")


def stopped_serve(stop: int, *options: str) -> subprocess.CompletedProcess[str]:
    """`switch serve --port P OPTIONS` once it answers, stopped by the signal `stop`: its exit code and output."""
    port = free_port()
    process = subprocess.Popen(
        user_serve_argv(port, options), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_answering(process, port)
        process.send_signal(stop)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


LISTENING = re.compile(r"^switch proxy listening on http://127\.0\.0\.1:(\d+) \(home .*, pid (\d+)\)$")


@contextmanager
def serve_command(
    command: list[str], stderr: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """`command` (a `switch serve --port 0`) running: (the process, the port and the pid its first line names)."""
    with stderr.open("w") as errors:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().rstrip("\n")
        match = LISTENING.match(line)
        assert match, line + stderr.read_text()
        yield process, int(match.group(1)), int(match.group(2))
    finally:
        end_process(process)
        if process.stdout is not None:
            process.stdout.close()


def wait_until(condition: Callable[[], object], timeout: float = 15.0, what: str = "the condition") -> None:
    """Poll `condition` until it holds; fail naming `what` after `timeout` seconds (generous: CI is loaded)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


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


def start_serve(port: int, env: dict[str, str], args: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """`switch serve --port PORT` as its own process (extra `env` on top of ours), once it answers.

    The caller stops and reaps it; prefer `serve_process`, which does so even when the test fails.
    """
    process = subprocess.Popen(
        user_serve_argv(port, args), env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_answering(process, port)
        if process.poll() is not None:
            raise RuntimeError(f"switch serve exited with {process.returncode} before answering")
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process


@contextmanager
def serve_process(port: int, env: dict[str, str], args: tuple[str, ...] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """`start_serve`, and on leaving the process is always ended and reaped, whatever the test did.

    The test may have stopped it already; otherwise SIGTERM, then SIGKILL if it does not exit in time.
    """
    process = start_serve(port, env, args)
    try:
        yield process
    finally:
        end_process(process)


def end_process(process: subprocess.Popen[Any]) -> None:
    """End and reap `process` if it still runs: SIGTERM, then SIGKILL if it does not exit within 30 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def hang_up_once_streaming(url: str, body: bytes, marker: bytes = b"tick") -> None:
    """POST `body` as a streamed Messages call to the proxy at `url`; close the socket once `marker` arrives."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        send_post(sock, "/v1/messages", body)
        read_until(sock, marker)


def read_until(sock: socket.socket, marker: bytes, timeout: float = 30.0) -> bytes:
    """What `sock` received up to and including `marker`; fails if it closes or `timeout` passes first."""
    deadline = time.monotonic() + timeout
    received = b""
    while marker not in received:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{marker!r} not received within {timeout:g} s: {received[-300:]!r}")
        sock.settimeout(left)
        piece = sock.recv(4096)
        if not piece:
            raise AssertionError(f"the connection closed before {marker!r}: {received[-300:]!r}")
        received += piece
    return received


def send_post(sock: socket.socket, path: str, body: bytes) -> None:
    """Write one HTTP/1.1 JSON POST on a raw socket (for tests that read the answer byte by byte)."""
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
