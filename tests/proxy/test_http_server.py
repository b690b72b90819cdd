"""switch's own HTTP/1.1 server (switch.proxy.http_server), on real sockets: what a client of `switch serve`
sees of it, from raw bytes (pipelining, 100-continue, HEAD, broken apps, bad requests, any split of the
bytes) to a hang-up heard after a large body."""

from __future__ import annotations

import asyncio
import re
import socket
import tomllib
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet

from switch.proxy.exchange import Exchange
from tests.fake_upstream import read_body
from tests.servers import serve, wait_until

ROOT = Path(__file__).resolve().parents[2]


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with what it was asked: method, path, query, body length; `/boom` raises, `/long` lies."""
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    if scope["path"] == "/boom":
        raise RuntimeError("the app broke")
    answer = orjson.dumps(
        {"method": scope["method"], "path": scope["path"], "query": scope["query_string"].decode(), "length": len(body)}
    )
    declared = len(answer) + (5 if scope["path"] == "/long" else 0)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(declared).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _request(path: str, body: bytes = b"", method: str = "POST", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def _read_all(sock: socket.socket, until_closed: bool = False, responses: int = 1) -> bytes:
    """What the server sent: `responses` whole answers, or everything until it closes."""
    sock.settimeout(20)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
        if not until_closed and _answers(received) >= responses:
            break
    return received


def _answers(data: bytes) -> int:
    """How many whole content-length answers `data` holds."""
    count = 0
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        match = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
        length = int(match.group(1)) if match else 0
        if head.startswith(b"HTTP/1.1 100"):
            data = rest
            continue
        if len(rest) < length:
            break
        count += 1
        data = rest[length:]
    return count


def _bodies(data: bytes) -> list[dict[str, Any]]:
    out = []
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        if head.startswith(b"HTTP/1.1 100"):
            data = rest
            continue
        match = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
        length = int(match.group(1)) if match else 0
        out.append(orjson.loads(rest[:length]))
        data = rest[length:]
    return out


@pytest.fixture(scope="module")
def echo_url() -> Any:
    with serve(echo, http="switch") as url:
        yield url


def test_the_installed_uvicorn_is_one_pyproject_allows() -> None:
    # The server relies on uvicorn's protocol contract (the class it constructs with config, server_state and
    # app_state; server_state's connections, tasks and default headers): checked on the versions allowed.
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [dep for dep in dependencies if re.match(r"uvicorn\b", dep)]
    allowed = SpecifierSet(pin[len("uvicorn") :])
    assert uvicorn.__version__ in allowed, f"uvicorn {uvicorn.__version__} is outside pyproject's {allowed}"


def test_pipelined_requests_are_answered_in_order_on_one_connection(echo_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(_request("/a?x=1", b"one") + _request("/b", b"second") + _request("/c", b""))
        answers = _bodies(_read_all(sock, responses=3))
    assert [(a["path"], a["query"], a["length"]) for a in answers] == [("/a", "x=1", 3), ("/b", "", 6), ("/c", "", 0)]


def test_a_client_that_expects_100_continue_is_told_to_send_its_body(echo_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(b"POST /e HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n")
        sock.settimeout(20)
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(b"hello")
        answer = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n") :] + _read_all(sock)
    assert _bodies(answer)[0]["length"] == 5


def test_a_head_request_gets_the_headers_and_no_body(echo_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(_request("/h", method="HEAD") + _request("/after", b"x"))
        received = _read_all(sock, responses=1)
        while received.count(b"HTTP/1.1 200") < 2 or not received.endswith(b"}"):
            received += sock.recv(65536)
    head, _, rest = received.partition(b"\r\n\r\n")
    assert b"content-length:" in head
    # The next answer starts right after the HEAD answer's headers: no body was written for it.
    assert rest.startswith(b"HTTP/1.1 200")
    assert _bodies(rest)[0]["path"] == "/after"


def test_an_app_that_raises_gets_a_500_and_the_server_keeps_serving(echo_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(_request("/boom", b"{}"))
        received = _read_all(sock, until_closed=True)
    assert received.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(_request("/fine"))
        assert _bodies(_read_all(sock))[0]["path"] == "/fine"


def test_an_app_that_sends_less_than_its_content_length_has_its_connection_closed(echo_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(_request("/long") + _request("/never"))
        received = _read_all(sock, until_closed=True)
    # The short body and nothing after it: the next request on that connection would read garbage.
    assert received.count(b"HTTP/1.1") == 1


def test_a_malformed_request_gets_a_400_and_a_close(echo_url: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(b"NOT AN HTTP REQUEST\r\n\r\n")
        received = _read_all(sock, until_closed=True)
    assert received.startswith(b"HTTP/1.1 400 Bad Request\r\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=4),
    cuts=st.lists(st.integers(min_value=1, max_value=200), max_size=12),
)
def test_any_split_of_pipelined_requests_is_answered_whole_and_in_order(
    echo_url: str, bodies: list[bytes], cuts: list[int]
) -> None:
    wire = b"".join(_request(f"/r{number}", body) for number, body in enumerate(bodies))
    pieces, rest = [], wire
    for cut in cuts:
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            if piece:
                sock.sendall(piece)
        answers = _bodies(_read_all(sock, responses=len(bodies)))
    assert [(a["path"], a["length"]) for a in answers] == [(f"/r{n}", len(b)) for n, b in enumerate(bodies)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=400))
def test_any_bytes_a_client_sends_leave_the_server_serving(echo_url: str, garbage: bytes) -> None:
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(garbage)
        sock.shutdown(socket.SHUT_WR)
        received = _read_all(sock, until_closed=True)
    assert received == b"" or received.startswith(b"HTTP/1.1 ")
    with socket.create_connection(("127.0.0.1", _port(echo_url))) as sock:
        sock.sendall(_request("/still-here"))
        assert _bodies(_read_all(sock))[0]["path"] == "/still-here"


def test_a_client_that_hangs_up_after_a_large_body_is_heard_at_once() -> None:
    # A body over the read-ahead limit stops the socket being read until the app takes it; once taken,
    # reading resumes, so a client that then hangs up (Esc in Claude Code) cancels the call waiting on
    # its upstream instead of leaving it to run, and pay, until the upstream answers.
    seen: list[str] = []

    async def waits_for_an_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        task = asyncio.current_task()
        assert task is not None
        stop = Exchange(scope, receive, send).watch_client(task)
        try:
            seen.append("waiting")
            await asyncio.Event().wait()  # an upstream that never answers: only the hang-up ends the wait
        except asyncio.CancelledError:
            seen.append("cancelled")
        finally:
            stop()

    with serve(waits_for_an_upstream, http="switch") as url:
        client = socket.create_connection(("127.0.0.1", _port(url)))
        client.sendall(_request("/", b"x" * 300_000))
        wait_until(lambda: seen == ["waiting"], what="the call to wait on its upstream")
        client.close()
        wait_until(lambda: len(seen) == 2, what="the call to hear its client hang up")
    assert seen == ["waiting", "cancelled"]


class _Transport(asyncio.Transport):
    """A transport that records what the protocol does to it (whether it reads, what it writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = True
        self.closing = False
        self.written: list[bytes] = []

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8742) if name in ("peername", "sockname") else default


async def test_once_the_app_has_taken_a_large_body_the_socket_is_read_again() -> None:
    # The body's last read took the read-ahead over its limit, so reading paused; nothing asks for more
    # body after it. Were reading left paused, the client's hang-up would go unread (see the test above).
    from switch.proxy.connections import ConnectionLimits
    from switch.proxy.http_server import HIGH_WATER, http_protocol
    from switch.proxy.serving import ProtocolConfig, ServerState

    reading_once_taken: list[bool] = []
    transport = _Transport()

    async def takes_the_body(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        reading_once_taken.append(transport.reading)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    config = ProtocolConfig(takes_the_body, timeout_keep_alive=5.0, ws_protocol_class=None)
    connection = http_protocol(ConnectionLimits(10, 120, 16))(
        config=config, server_state=ServerState(), app_state={}, loop=asyncio.get_running_loop()
    )
    connection.connection_made(transport)
    connection.data_received(_request("/", b"x" * (HIGH_WATER * 2)))
    assert not transport.reading  # the whole body arrived in one read, over the read-ahead limit
    await asyncio.wait_for(asyncio.shield(asyncio.gather(*connection.server_state.tasks)), 10)
    assert reading_once_taken == [True]
    assert transport.written[0].startswith(b"HTTP/1.1 204 ")


def test_an_answer_given_before_the_body_was_read_closes_the_connection_after_it() -> None:
    # The app refuses on the declared length alone (as the relay's 413 does): the body still on its way must
    # not be parsed as the next request, so the answer says `connection: close` and the connection ends.
    async def refuses_on_length(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b'{"error":"too large"}'
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    with serve(refuses_on_length, http="switch") as url:
        with socket.create_connection(("127.0.0.1", _port(url))) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 10000000\r\n\r\n" + b"x" * 200_000)
            received = _read_all(sock, until_closed=True)
    head = received.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 413") and b"connection: close" in head
    assert received.count(b"HTTP/1.1") == 1  # no second answer to the body's bytes
