"""Calls through the real proxy land in the real SQLite ledger: tokens, costs, outcomes, and
nothing lost when the database is locked or the proxy is killed."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from switch.config import load_settings
from switch.ledger.queries import connect, spend
from switch.ledger.recorder import Recorder
from switch.ledger.spill import default_path as spill_file
from tests.conftest import FAKE_BASETEN_KEY, FAKE_CLIENT_KEY, Proxy, drain
from tests.fake_upstream import FakeChatUpstream, Reply, Turn, chat_chunks
from tests.ledger_seed import pricer_for
from tests.servers import answers_health, free_port, send_post, serve, serve_process, wait_until

KIMI = (3.0, 0.3, 15.0)  # USD per million: input, cached input, output
OPUS = (4.0, 0.2, 20.0)


def by_hand(prices: tuple[float, float, float], uncached: int, cached: int, output: int) -> int:
    return round(uncached * prices[0] + cached * prices[1] + output * prices[2])


def rows(home: Path) -> list[dict[str, Any]]:
    if not (home / "ledger.db").exists():
        return []
    connection = sqlite3.connect(f"file:{home / 'ledger.db'}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute("SELECT * FROM calls ORDER BY id")]
    except sqlite3.OperationalError:
        return []  # not created or migrated yet
    finally:
        connection.close()


def test_rows_hold_usage_costs_and_timings_for_every_inbound_api(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    proxy, recorder = ledger_proxy
    assert proxy.upstream is not None
    turn = Turn(text="ok", prompt_tokens=1200, cached_tokens=1000, completion_tokens=80, reasoning_tokens=20)
    proxy.upstream.script(*[turn] * 6)
    claude = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    gpt = openai.OpenAI(base_url=proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = [{"role": "user", "content": "hi"}]
    claude.messages.create(model="claude-opus-5-5", max_tokens=100, messages=message)  # type: ignore[arg-type]
    with claude.messages.stream(model="claude-opus-5-5", max_tokens=100, messages=message) as stream:  # type: ignore[arg-type]
        stream.get_final_message()
    gpt.chat.completions.create(model="gpt-5.5", messages=message)  # type: ignore[arg-type]
    list(gpt.chat.completions.create(model="gpt-5.5", messages=message, stream=True))  # type: ignore[arg-type]
    gpt.responses.create(model="gpt-5.5", input="hi")
    with gpt.responses.stream(model="gpt-5.5", input="hi") as events:
        events.get_final_response()
    drain(recorder, 6)
    recorded = rows(isolated_home)
    assert [(r["inbound_api"], r["streamed"]) for r in recorded] == [
        ("anthropic", 0),
        ("anthropic", 1),
        ("openai-chat", 0),
        ("openai-chat", 1),
        ("openai-responses", 0),
        ("openai-responses", 1),
    ]
    for row in recorded:
        assert row["outcome"] == "completed"
        assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"], row["reasoning_tokens"]) == (
            200,
            1000,
            80,
            20,
        )
        assert row["cost_micros"] == by_hand(KIMI, 200, 1000, 80)
        assert row["served_model"] == "moonshotai/Kimi-K3" and row["provider"] == "baseten"
        assert row["role"] == "orchestrator"
        assert 0 < row["ttft_ms"] <= row["duration_ms"]
    assert recorded[0]["native_cost_micros"] == by_hand(OPUS, 200, 1000, 80)
    assert recorded[0]["requested_model"] == "claude-opus-5-5"
    assert recorded[2]["native_price_source"] == "litellm:gpt-5.5"


def test_failed_and_cancelled_calls_are_recorded(ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path) -> None:
    proxy, recorder = ledger_proxy
    assert proxy.upstream is not None
    proxy.upstream.script(Reply(500, [b'{"error":{"message":"down"}}'], "application/json"))
    with pytest.raises(anthropic.InternalServerError):
        anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    chunks = [b'data: {"choices":[{"index":0,"delta":{"content":"tick tock "}}]}\n\n'] * 100
    proxy.upstream.script(Reply(200, chunks, delay_between=0.05))
    body = b'{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}'
    port = int(proxy.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        send_post(sock, "/v1/messages", body)
        received = b""
        while received.count(b"tick") < 3:
            received += sock.recv(4096)
    drain(recorder, 2)
    failed, cancelled = rows(isolated_home)
    assert failed["outcome"] == "upstream_error" and failed["http_status"] == 500 and "down" in failed["error"]
    assert cancelled["outcome"] == "client_cancelled" and cancelled["usage_reported"] == 0
    assert cancelled["output_tokens"] > 0  # estimated from what was streamed before the disconnect


def test_output_rate_is_measured_only_across_two_or_more_stream_chunks(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    """A whole body, or a stream that arrives in one piece, has no measurable rate: null, not 300,000 tok/s."""
    proxy, recorder = ledger_proxy
    assert proxy.upstream is not None
    turn = Turn(text="one two three four five six", fragment=4, completion_tokens=60)
    events = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chat_chunks(turn, "k", itertools.count())]
    events.append(b"data: [DONE]\n\n")
    gap = 0.05
    proxy.upstream.script(turn, Reply(200, [b"".join(events)]), Reply(200, events, delay_between=gap))
    claude = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    message = [{"role": "user", "content": "hi"}]
    claude.messages.create(model="claude-opus-5-5", max_tokens=100, messages=message)  # type: ignore[arg-type]
    for _ in range(2):
        with claude.messages.stream(model="claude-opus-5-5", max_tokens=100, messages=message) as stream:  # type: ignore[arg-type]
            stream.get_final_message()
    drain(recorder, 3)
    whole, one_piece, streamed = rows(isolated_home)
    assert whole["streamed"] == 0 and whole["output_tps"] is None
    assert one_piece["streamed"] == 1 and one_piece["output_tps"] is None
    # The first token is in the second chunk (the first only opens the message); the upstream paused `gap`
    # after each chunk, so the rate is at most 60 tokens over (chunks - 2) gaps.
    assert streamed["output_tokens"] == 60
    assert 0 < streamed["output_tps"] <= 60 / ((len(events) - 2) * gap)


@contextmanager
def reaped(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """Yield `process`; on the way out, however the test went, kill it if it still runs and reap it."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


def hold_lock(database: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Another process holding an exclusive lock on `database` for `seconds` (the caller reaps it)."""
    script = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(database)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        f"time.sleep({seconds})\n"
        "c.execute('COMMIT')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        with process.stdout:
            assert process.stdout.readline().strip() == b"locked"
    except BaseException:
        process.kill()
        process.wait(30)
        raise
    return process


class DatabaseLock:
    """Another process holds an exclusive lock on a ledger until `release()` or the end of the block."""

    def __init__(self, database: Path) -> None:
        script = (
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(database)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
            "c.execute('COMMIT')\n"
        )
        self.process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def __enter__(self) -> DatabaseLock:
        try:
            assert self.process.stdout is not None
            assert self.process.stdout.readline().strip() == b"locked"
        except BaseException:
            self.__exit__()
            raise
        return self

    def release(self) -> None:
        """Commit and end the holder, then return."""
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()  # its readline returns: it commits and exits
        assert self.process.wait(30) == 0

    def __exit__(self, *_exc: object) -> None:
        with reaped(self.process):
            pass


def test_locked_database_loses_no_call(ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path) -> None:
    proxy, recorder = ledger_proxy
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "warm"}])
    wait_until(lambda: len(rows(isolated_home)) == 1)
    with DatabaseLock(isolated_home / "ledger.db") as lock:
        # The lock is held until released below: had a call waited for the database, it would
        # never have been answered.
        for index in range(200):
            response = client.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": str(index)}]
            )
            assert response.content
        wait_until(lambda: recorder.spilled == 200)
        assert spill_file().read_bytes().count(b"\n") == 200
        assert len(rows(isolated_home)) == 1
        lock.release()
        wait_until(lambda: len(rows(isolated_home)) == 201)
    assert not recorder.spill_pending()
    assert len({row["id"] for row in rows(isolated_home)}) == 201


def test_kill_minus_nine_with_rows_in_spill_file_loses_nothing(isolated_home: Path) -> None:
    fake = FakeChatUpstream()
    with serve(fake) as url, ExitStack() as processes:
        (isolated_home / "config.toml").write_text(f'[providers.baseten]\nbase_url = "{url}/v1"\n')
        env = {**os.environ, "BASETEN_API_KEY": FAKE_BASETEN_KEY}
        log = isolated_home / "serve.log"

        def start(port: int) -> subprocess.Popen[bytes]:
            with log.open("ab") as output:
                process = subprocess.Popen(
                    [sys.executable, "-m", "switch", "serve", "--port", str(port), "--log-level", "info"],
                    env=env,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            processes.enter_context(reaped(process))
            wait_until(lambda: answers_health(port))
            return process

        port = free_port()
        proxy = start(port)
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key=FAKE_CLIENT_KEY, max_retries=0)
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "warm"}])
        wait_until(lambda: (isolated_home / "ledger.db").exists() and len(rows(isolated_home)) == 1)
        with DatabaseLock(isolated_home / "ledger.db") as lock:
            for index in range(50):
                client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": str(index)}])
            wait_until(lambda: spill_file().exists() and spill_file().read_bytes().count(b"\n") == 50)
            spilled = spill_file().read_bytes()
            assert FAKE_BASETEN_KEY.encode() not in spilled and FAKE_CLIENT_KEY.encode() not in spilled
            proxy.send_signal(signal.SIGKILL)
            proxy.wait(10)
            lock.release()
        start(free_port())
        wait_until(lambda: len(rows(isolated_home)) == 51)
        assert not spill_file().exists()
    export = subprocess.run(
        [sys.executable, "-m", "switch", "export", "--format", "csv"], env=env, capture_output=True, check=True
    ).stdout
    assert export.count(b"\n") == 52
    for secret in (FAKE_BASETEN_KEY.encode(), FAKE_CLIENT_KEY.encode()):
        for blob in (
            (isolated_home / "ledger.db").read_bytes(),
            log.read_bytes(),
            export,
        ):
            assert secret not in blob


def test_calls_and_prices_commands(ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path) -> None:
    from typer.testing import CliRunner

    from switch.cli import app

    proxy, recorder = ledger_proxy
    assert proxy.upstream is not None
    proxy.upstream.script(Turn(text="ok", prompt_tokens=100, cached_tokens=0, completion_tokens=10))
    anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0).messages.create(
        model="claude-opus-5-5", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    drain(recorder, 1)
    runner = CliRunner()
    listed = runner.invoke(app, ["calls", "--json", "--limit", "5"])
    assert listed.exit_code == 0
    # Only the JSON lines: log lines from other threads may share the captured output.
    json_lines = [line for line in listed.output.splitlines() if line.startswith("{")]
    assert json_lines, listed.output
    row = json.loads(json_lines[-1])
    assert row["served_model"] == "moonshotai/Kimi-K3" and row["cost_micros"] == 100 * 3 + 10 * 15
    prices = runner.invoke(app, ["prices", "baseten/moonshotai/Kimi-K3", "--json"])
    assert json.loads(prices.output[prices.output.index("[") :])[0]["price"] == {
        "input": 3.0,
        "cached_input": 0.3,
        "cache_write": 3.0,
        "output": 15.0,
    }
    unknown = runner.invoke(app, ["prices", "baseten/nobody/none"])
    assert "unpriced" in unknown.output


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stopping_the_proxy_right_after_calls_loses_none_of_them(isolated_home: Path, signal_number: int) -> None:
    # The writer gathers records for a moment before a transaction; a stop in that moment must
    # still write them (uvicorn ends the process with the caught signal once it has shut down).
    fake = FakeChatUpstream()
    with serve(fake) as url:
        (isolated_home / "config.toml").write_text(f'[providers.baseten]\nbase_url = "{url}/v1"\n')
        port = free_port()
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}) as process:
            try:
                client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="k", max_retries=0)
                for index in range(3):
                    client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": str(index)}])
                client.close()
            finally:
                process.send_signal(signal_number)
                process.wait(20)
    assert [row["outcome"] for row in rows(isolated_home)] == ["completed"] * 3


def test_healthz_status_and_doctor_show_the_ledger_state(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    import threading

    import httpx
    from typer.testing import CliRunner

    from switch.cli import app
    from switch.ledger.pricer import Pricer
    from switch.ledger.record import CallRecord

    proxy, recorder = ledger_proxy
    port = int(proxy.url.rsplit(":", 1)[1])
    (isolated_home / "run").mkdir()
    (isolated_home / "run" / "proxy.json").write_text(
        json.dumps({"pid": os.getpid(), "port": port, "started_at": time.time(), "log": "proxy.log"})
    )
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    runner = CliRunner()

    def health() -> dict[str, Any]:
        answer = httpx.get(proxy.url + "/healthz")
        assert answer.status_code == 200  # harness probes pass whatever the ledger's state
        return dict(answer.json())

    def doctor_ledger() -> dict[str, Any]:
        report = json.loads(runner.invoke(app, ["doctor", "--json"]).output)
        return next(check for check in report["checks"] if check["check"] == "ledger")

    client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "warm"}])
    wait_until(lambda: len(rows(isolated_home)) == 1)
    first = health()
    assert first["status"] == "ok"
    assert first["ledger"]["writer_alive"] and first["ledger"]["queued"] == 0 and first["ledger"]["spill_bytes"] == 0
    assert "ledger: writer alive, 0 queued, nothing spilled" in runner.invoke(app, ["status"]).output
    assert doctor_ledger()["ok"]

    flowing = threading.Event()

    class StuckPricer(Pricer):
        def row(self, record: CallRecord) -> dict[str, Any]:
            flowing.wait(30)
            return super().row(record)

    recorder.pricer = pricer_for(load_settings(), StuckPricer)
    try:
        for index in range(3):
            client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": str(index)}])
        wait_until(lambda: health()["ledger"]["queued"] == 3)
        with DatabaseLock(isolated_home / "ledger.db") as lock:
            flowing.set()
            wait_until(lambda: health()["ledger"]["spilled_rows"] == 3)
            degraded = health()
            assert degraded["status"] == "degraded"
            assert degraded["ledger"]["spill_bytes"] == spill_file().stat().st_size > 0
            status = runner.invoke(app, ["status"]).output
            assert "warning: ledger: 3 rows" in status and "fix:" in status
            check = doctor_ledger()
            assert not check["ok"] and "spill file" in check["detail"] and check["fix"]
            lock.release()
            wait_until(lambda: len(rows(isolated_home)) == 4)
    finally:
        flowing.set()
    wait_until(lambda: health()["status"] == "ok")
    assert health()["ledger"]["spill_bytes"] == 0


def test_calls_refused_before_any_provider_are_rejected_not_unpriced(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    """A 400 or 413 names its route, is recorded as rejected, and adds no unpriced call to spend."""
    proxy, recorder = ledger_proxy
    proxy.upstream.script(Turn(text="ok"))  # type: ignore[union-attr]
    claude = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    claude.messages.create(model="claude-opus-5-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    bad = {"model": "claude-opus-5-5", "max_tokens": 10, "messages": "not a list"}
    too_big = b"x" * (load_settings().server.max_body_bytes + 1)
    refused = [
        httpx.post(proxy.url + "/v1/messages", json=bad, timeout=30),
        httpx.post(proxy.url + "/v1/messages", content=too_big, timeout=30),
    ]
    assert [r.status_code for r in refused] == [400, 413]
    for response in refused:
        assert response.headers["x-switch-route"].endswith("; model=none"), response.headers
    drain(recorder, 3)
    recorded = rows(isolated_home)
    assert [(r["outcome"], r["http_status"]) for r in recorded] == [
        ("completed", 200),
        ("rejected", 400),
        ("rejected", 413),
    ]
    connection = connect(isolated_home / "ledger.db")
    assert connection is not None
    try:
        totals = spend(connection)[0]
        by_model = spend(connection, by="model")
    finally:
        connection.close()
    assert totals["calls"] == 3 and totals["unpriced"] == 0
    assert all(row["unpriced"] == 0 for row in by_model)
