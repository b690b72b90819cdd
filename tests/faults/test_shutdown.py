"""Stopping the proxy with calls in flight: they get `[server] shutdown_grace`, then an in-band error
in their own API's format and the end of the response, and every one keeps its ledger row."""

from __future__ import annotations

import signal
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream, Reply
from tests.servers import free_port, read_until, send_post, serve, serve_process, wait_until

GRACE = 1
TICK = b'data: {"choices":[{"index":0,"delta":{"content":"tick "}}]}\n\n'


def ledger_rows(home: Path) -> list[dict[str, Any]]:
    path = home / "ledger.db"
    if not path.exists():
        return []
    connection = sqlite3.connect(path)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute("SELECT * FROM calls ORDER BY id")]
    except sqlite3.OperationalError:  # the writer has not created the table yet
        return []
    finally:
        connection.close()


def read_to_close(sock: socket.socket, received: bytes = b"") -> bytes:
    sock.settimeout(30)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


def test_sigterm_ends_live_calls_in_band_after_the_grace_and_records_them(isolated_home: Path) -> None:
    fake = FakeChatUpstream()
    # Both answers would take 20 s; the fake stops as soon as the proxy hangs up on it.
    fake.script(
        Reply(200, [TICK] * 400, delay_between=0.05),
        Reply(200, [b" "] * 400, "application/json", delay_between=0.05),
    )
    port = free_port()
    with serve(fake) as url:
        (isolated_home / "config.toml").write_text(
            f'[server]\nshutdown_grace = {GRACE}\n[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8"
        )
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}) as proxy:
            streamed = socket.create_connection(("127.0.0.1", port))
            waiting = socket.create_connection(("127.0.0.1", port))
            with streamed, waiting:
                request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
                send_post(streamed, "/v1/messages", orjson.dumps({**request, "stream": True}))
                received = read_until(streamed, b"tick")
                send_post(waiting, "/v1/messages", orjson.dumps(request))
                wait_until(lambda: len(fake.received) == 2, what="the second call to reach the upstream")
                proxy.send_signal(signal.SIGTERM)
                stopping = time.monotonic()
                stream = read_to_close(streamed, received)
                answer = read_to_close(waiting)
                proxy.wait(timeout=GRACE + 20)
                stopped_after = time.monotonic() - stopping
        # the upstream calls were closed, not left generating
        wait_until(lambda: fake.disconnects == 2, what="the upstream to see both calls hang up")
    assert proxy.returncode is not None and proxy.returncode != -signal.SIGKILL
    assert stopped_after < GRACE + 15, stopped_after
    # The stream: ticks, then Anthropic's in-band error event, then the end of the chunked body.
    assert stream.startswith(b"HTTP/1.1 200") and stream.endswith(b"\r\n0\r\n\r\n"), stream[-200:]
    error_at = stream.index(b"event: error")
    assert b"tick" in stream[:error_at] and b"shutting down" in stream[error_at:]
    # The non-streamed call: a 503 in Anthropic's error format.
    assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    error = orjson.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert error["type"] == "error" and "shutting down" in error["error"]["message"]
    rows = ledger_rows(isolated_home)
    assert sorted((row["streamed"], row["outcome"]) for row in rows) == [(0, "proxy_error"), (1, "incomplete_stream")]
    assert all("shutting down" in row["error"] for row in rows)


def test_a_second_ctrl_c_stops_at_once_and_the_live_call_keeps_its_row(isolated_home: Path) -> None:
    # The first Ctrl-C gives live calls `shutdown_grace` (here a minute); a second one is the user saying
    # "now": the proxy ends without waiting, yet the call it cut off is still written to the ledger.
    fake = FakeChatUpstream()
    fake.script(Reply(200, [TICK] * 1200, delay_between=0.05))
    port = free_port()
    with serve(fake) as url:
        (isolated_home / "config.toml").write_text(
            f'[server]\nshutdown_grace = 60\n[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8"
        )
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}) as proxy:
            with socket.create_connection(("127.0.0.1", port)) as streamed:
                request = {
                    "model": "m",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": "x"}],
                    "stream": True,
                }
                send_post(streamed, "/v1/messages", orjson.dumps(request))
                read_until(streamed, b"tick")
                proxy.send_signal(signal.SIGINT)
                # The first one is taken once the proxy has begun waiting for the call (its socket is closed).
                wait_until(lambda: not _accepts(port), what="the proxy to stop accepting")
                proxy.send_signal(signal.SIGINT)
                proxy.wait(timeout=50)  # well within the minute of grace
    assert proxy.returncode == 130
    rows = ledger_rows(isolated_home)
    assert [(row["streamed"], row["outcome"]) for row in rows] == [(1, "incomplete_stream")], rows


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
