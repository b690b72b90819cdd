"""The CLI's (and the starting proxy's) probe of a port's /healthz: whatever answers there, a dict or None.

It runs against ports another program may hold (`switch up`, `status`, a second `serve`), so any answer, a
stranger's garbage included, must end in "not a switch proxy" rather than an exception.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from switch import daemon
from tests.fake_upstream import read_head
from tests.servers import end_process, free_port, wait_until


@contextmanager
def answering(reply: bytes) -> Iterator[int]:
    """A loopback port whose every connection gets `reply` once its request has arrived, then a close."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(10)

    def serve_once() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.settimeout(10)
            if read_head(connection) is not None:
                connection.sendall(reply)

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(timeout=10)


OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(lambda body: OK_HEAD + body)))
@example(reply=OK_HEAD + b"[1, 2]")
@example(reply=OK_HEAD + b"[" * 100_000)
@example(reply=OK_HEAD + b'{"pid": 1}')
@example(reply=b"HTTP/1.1 500 Oops\r\n\r\n{}")
@example(reply=b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
def test_any_answer_is_a_json_object_or_none(reply: bytes, isolated_home: Path) -> None:
    with answering(reply) as port:
        found = daemon.healthy(port, timeout=5)
    assert found is None or isinstance(found, dict)
    if found is not None:
        assert reply.startswith(b"HTTP/") and found == json.loads(reply.split(b"\r\n\r\n", 1)[1])


def test_nothing_listening_is_none(isolated_home: Path) -> None:
    assert daemon.healthy(free_port()) is None


def test_a_proxy_with_an_access_token_is_probed_with_it(isolated_home: Path) -> None:
    # The token is not ASCII: it goes out as UTF-8, as the proxy's guard compares it.
    port = free_port()
    (isolated_home / "config.toml").write_text('[server]\naccess_token = "tök-en"\n', encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "switch", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: daemon.healthy(port) is not None or process.poll() is not None, 30, "the probe to answer")
        found = daemon.healthy(port, timeout=5)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 401
    finally:
        end_process(process)
    assert found is not None and found["home"] == str(isolated_home.resolve())
