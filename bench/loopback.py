"""The benchmarks' loopback plumbing: the fast fake chat upstream and `switch serve` routing to it, each a
process of its own and always stopped, and just enough HTTP/1.1 for a client that times them."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, timeout: float = 20.0, process: subprocess.Popen[bytes] | None = None) -> None:
    """Return once something accepts connections on `port`; fail after `timeout` seconds, or once `process`
    (what should be listening) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if process is not None and process.poll() is not None:
                status = process.returncode
                raise RuntimeError(f"the process meant to listen on {port} exited with status {status}") from None
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def rss_mb(pid: int) -> float:
    """The resident memory of process `pid`, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proxy_home(home: Path, upstream_port: int, extra_config: str = "") -> dict[str, str]:
    """Write `home`'s config.toml routing Baseten to the loopback upstream; the environment a proxy of it runs in.

    `{upstream}` in `extra_config` is that upstream's URL.
    """
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        # replace, not format: TOML inline tables use braces
        extra_config.replace("{upstream}", f"http://127.0.0.1:{upstream_port}")
        + f'\n[providers.baseten]\nbase_url = "http://127.0.0.1:{upstream_port}/v1"\n',
        encoding="utf-8",
    )
    return {
        **os.environ,
        "SWITCH_HOME": str(home),
        "BASETEN_API_KEY": "bench-key",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
    }


@dataclass(frozen=True)
class Stack:
    """The running upstream and proxy: their ports, and the proxy's process (to read its memory)."""

    upstream_port: int
    proxy_port: int
    proxy: subprocess.Popen[bytes]


@contextmanager
def serving(
    home: Path,
    upstream_args: tuple[str, ...] = (),
    proxy_args: tuple[str, ...] = (),
    pin: bool = True,
    extra_config: str = "",
    extra_env: dict[str, str] | None = None,
) -> Iterator[Stack]:
    """The fake upstream and `switch serve` of `home` routing Baseten to it, once both listen.

    With `pin` on a machine of two or more cores, the proxy gets a core of its own and the upstream
    shares the other with this process, so the proxy's figures are one core's and not the scheduler's.
    """
    upstream_port, proxy_port = free_port(), free_port()
    env = {**proxy_home(home, upstream_port, extra_config), **(extra_env or {})}
    upstream = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "upstream_server.py"), str(upstream_port), *upstream_args], env=env
    )
    try:
        proxy = subprocess.Popen(
            [sys.executable, "-m", "switch", "serve", "--port", str(proxy_port), *proxy_args], env=env, cwd=str(ROOT)
        )
        try:
            cores = sorted(os.sched_getaffinity(0))
            if pin and len(cores) > 1:
                os.sched_setaffinity(proxy.pid, {cores[1]})
                os.sched_setaffinity(upstream.pid, {cores[0]})
                os.sched_setaffinity(0, {cores[0]})
            wait_listening(upstream_port)
            wait_listening(proxy_port)
            yield Stack(upstream_port, proxy_port, proxy)
        finally:
            stop(proxy)
    finally:
        stop(upstream)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End `process` and reap it: SIGTERM, then SIGKILL if it does not exit in time."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def post_request(port: int, path: str, body: bytes) -> bytes:
    """One JSON POST to the loopback `port`, head and body, as the client writes it."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"x-api-key: bench\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes]]:
    """The status line and the headers (names lower-cased) of the answer coming on `reader`."""
    status_line = await reader.readline()
    headers: dict[bytes, bytes] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            return status_line, headers
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
