"""The CLI's (and the starting proxy's) probe of a port's /healthz: whatever answers there, a dict or None.

It runs against ports another program may hold (`switch up`, `status`, a second `serve`), so any answer, a
stranger's garbage included, must end in "not a switch proxy" rather than an exception.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from switch import daemon
from tests.fake_upstream import read_head
from tests.servers import end_process, free_port, user_serve_argv, wait_until


@contextmanager
def one_connection(handle: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A loopback port whose first connection, once its request head has arrived, goes to `handle` (with an
    event set when the test is done); yields the port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(10)
    done = threading.Event()

    def serve_once() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.settimeout(10)
            if read_head(connection) is not None:
                handle(connection, done)

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()
        thread.join(timeout=10)


def answering(reply: bytes) -> AbstractContextManager[int]:
    """A loopback port whose connection gets `reply`, then a close."""
    return one_connection(lambda connection, _done: connection.sendall(reply))


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
        assert reply.startswith((b"HTTP/1.0 200 ", b"HTTP/1.1 200 "))
        if b"content-length" not in reply.lower():
            assert found == json.loads(reply.split(b"\r\n\r\n", 1)[1])


def test_a_stranger_that_trickles_bytes_for_ever_is_given_up_on(isolated_home: Path) -> None:
    # One byte every 50 ms never lets a per-read timeout fire: the probe has a deadline of its own.
    def trickle(connection: socket.socket, done: threading.Event) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\n")
        while not done.wait(0.05):
            connection.sendall(b"x")

    results: list[object] = []
    with one_connection(trickle) as port:
        probe = threading.Thread(target=lambda: results.append(daemon.healthy(port, timeout=0.3)))
        probe.start()
        probe.join(timeout=30)
    assert results == [None]


def test_an_answer_is_read_to_its_content_length_even_if_the_connection_stays_open(isolated_home: Path) -> None:
    body = b'{"pid": 7, "home": "h"}'

    def answer_and_hold(connection: socket.socket, done: threading.Event) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body))
        done.wait(30)

    with one_connection(answer_and_hold) as port:
        assert daemon.healthy(port, timeout=10) == {"pid": 7, "home": "h"}


class _Pieces:
    """A connection whose reads return `pieces` one by one, then the end.

    A real socket cannot be made to end a read at a chosen byte: the kernel hands over whatever has
    arrived. This stands in for it so that every place a read can end is tried."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)

    def __enter__(self) -> _Pieces:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def sendall(self, data: bytes) -> None:
        return None

    def settimeout(self, timeout: float) -> None:
        return None

    def recv(self, size: int) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


_BODY = b'{"pid": 8, "home": "pieces"}'
_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(_BODY), _BODY)
_EXTRA = b"trailing bytes past the content-length"


@pytest.mark.parametrize("cut", range(1, len(_ANSWER)))
def test_an_answer_split_anywhere_between_two_reads_is_read_to_its_length(
    cut: int, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    # Bytes past the content-length would spoil the JSON if the head's end were found late or not at all.
    pieces = [_ANSWER[:cut], _ANSWER[cut:] + _EXTRA]
    monkeypatch.setattr(socket, "create_connection", lambda *args, **kwargs: _Pieces(pieces))
    assert daemon.healthy(1, timeout=5) == {"pid": 8, "home": "pieces"}


def test_an_answer_one_byte_per_read_is_read_to_its_length(
    monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    pieces = [bytes([byte]) for byte in _ANSWER + _EXTRA]
    monkeypatch.setattr(socket, "create_connection", lambda *args, **kwargs: _Pieces(pieces))
    assert daemon.healthy(1, timeout=5) == {"pid": 8, "home": "pieces"}


def test_nothing_listening_is_none(isolated_home: Path) -> None:
    assert daemon.healthy(free_port()) is None


def test_a_proxy_with_an_access_token_is_probed_with_it(isolated_home: Path) -> None:
    # The token is not ASCII: it goes out as UTF-8, as the proxy's guard compares it.
    port = free_port()
    (isolated_home / "config.toml").write_text('[server]\naccess_token = "tök-en"\n', encoding="utf-8")
    process = subprocess.Popen(user_serve_argv(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: daemon.healthy(port) is not None or process.poll() is not None, 30, "the probe to answer")
        found = daemon.healthy(port, timeout=5)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 401
    finally:
        end_process(process)
    assert found is not None and found["home"] == str(isolated_home.resolve())
