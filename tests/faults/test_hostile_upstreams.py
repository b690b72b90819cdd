"""Hostile upstreams (issue 31): keys echoed inside 200 streams, trickled and oversized headers, endless
streams, compression bombs and endless SSE lines. Each caller still gets a terminated answer in its own
format, the row records why, no key reaches the client, the row or `switch export`, and memory stays bounded.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switch.config import load_settings
from switch.errors import ConfigError
from switch.protocols.sse import MAX_EVENT_BYTES
from switch.proxy.http1 import MAX_BODY_BYTES, MAX_HEAD_BYTES
from switch.routing.presets import set_active
from tests.conftest import FAKE_BASETEN_KEY, FAKE_CLIENT_KEY, Proxy, drain, kimi_proxy_on
from tests.fake_upstream import (
    ANTHROPIC_STREAM,
    FakeChatUpstream,
    FakeUpstream,
    RawUpstream,
    Reply,
    Turn,
    chat_chunks,
    endless_headers,
    trickled_headers,
)
from tests.faults.test_upstream_faults import PATHS, assert_error_shape, assert_stream_well_formed, body_for
from tests.faults.test_upstream_fuzz import assert_client_stream
from tests.servers import free_port, serve, serve_process

UPSTREAM_KEYS = {
    "openai-chat": "sk-fake-chat-key",
    "anthropic": "sk-fake-anthropic-key",
    "openai-responses": "sk-fake-responses-key",
}


def echoed_error(upstream_api: str, key: str) -> bytes:
    """A 200 stream whose upstream reports, in band, an error quoting the key it was called with."""
    message = f"Incorrect API key provided: {key}. Check your key."
    if upstream_api == "openai-chat":
        first = chat_chunks(Turn(text="hi"), "m", iter(range(9)))[0]  # type: ignore[arg-type]
        return b"data: " + orjson.dumps(first) + b"\n\ndata: " + orjson.dumps({"error": {"message": message}}) + b"\n\n"
    if upstream_api == "anthropic":
        start = ANTHROPIC_STREAM.partition(b"\n\n")[0] + b"\n\n"
        error = {"type": "error", "error": {"type": "authentication_error", "message": message}}
        return start + b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
    failed = {
        "type": "response.failed",
        "sequence_number": 1,
        "response": {"id": "resp_x", "status": "failed", "output": [], "error": {"code": "bad", "message": message}},
    }
    return b"event: response.failed\ndata: " + orjson.dumps(failed) + b"\n\n"


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("inbound_api", list(PATHS))
@pytest.mark.parametrize("upstream_api", list(UPSTREAM_KEYS))
def test_a_key_in_a_streamed_upstream_error_is_scrubbed_on_translated_routes(
    multi_proxy: Callable[[str], Proxy], upstream_api: str, inbound_api: str, stream: bool
) -> None:
    proxy = multi_proxy(upstream_api)
    assert proxy.upstream is not None
    key = UPSTREAM_KEYS[upstream_api]
    proxy.upstream.script(Reply(200, [echoed_error(upstream_api, key)]))
    response = httpx.post(proxy.url + PATHS[inbound_api], json=body_for(inbound_api, stream), timeout=20)
    (record,) = proxy.sink.wait(1)
    assert key not in response.text and key not in (record.error or "")
    assert "Incorrect API key provided: ***" in (record.error or ""), record.error
    assert "Incorrect API key provided: ***" in response.text
    if stream:
        assert_stream_well_formed(inbound_api, response.text, completed=False)
    else:
        assert_error_shape(inbound_api, response.json())


NATIVE_CLIENT_KEY = "sk-proj-native-client-key-0123456789"


def native_error_stream(inbound_api: str, key: str) -> bytes:
    """A native provider's 200 stream with an in-band error quoting the caller's own key."""
    message = f"key {key} was revoked"
    if inbound_api == "anthropic":
        return echoed_error("anthropic", key)
    if inbound_api == "openai-chat":
        return b"data: " + orjson.dumps({"error": {"message": message}}) + b"\n\ndata: [DONE]\n\n"
    return b"event: error\ndata: " + orjson.dumps({"type": "error", "message": message}) + b"\n\n"


def ask_native(proxy: Proxy, inbound_api: str, stream: bool) -> httpx.Response:
    """A call on `inbound_api` with the caller's own key, as a harness on a native route sends it."""
    if inbound_api == "anthropic":
        headers = {"x-api-key": NATIVE_CLIENT_KEY}
    else:
        headers = {"authorization": f"Bearer {NATIVE_CLIENT_KEY}"}
    return httpx.post(proxy.url + PATHS[inbound_api], json=body_for(inbound_api, stream), headers=headers, timeout=20)


@pytest.mark.parametrize("inbound_api", list(PATHS))
def test_a_key_in_a_pass_through_stream_is_masked_even_split_across_reads(
    native_proxy: Proxy, inbound_api: str
) -> None:
    assert native_proxy.upstream is not None
    data = native_error_stream(inbound_api, NATIVE_CLIENT_KEY)
    cut = data.index(NATIVE_CLIENT_KEY.encode()) + 10  # the key arrives in two reads
    native_proxy.upstream.script(Reply(200, [data[:cut], data[cut:]], delay_between=0.05))
    response = ask_native(native_proxy, inbound_api, True)
    assert response.status_code == 200
    assert NATIVE_CLIENT_KEY not in response.text
    assert "***" in response.text
    native_proxy.sink.wait(1)


@pytest.mark.parametrize("inbound_api", list(PATHS))
def test_a_key_in_a_pass_through_error_body_is_masked(native_proxy: Proxy, inbound_api: str) -> None:
    assert native_proxy.upstream is not None
    body = orjson.dumps({"error": {"message": f"invalid x-api-key {NATIVE_CLIENT_KEY}"}})
    native_proxy.upstream.script(Reply(401, [body], "application/json"))
    response = ask_native(native_proxy, inbound_api, False)
    assert response.status_code == 401
    assert NATIVE_CLIENT_KEY not in response.text and "invalid x-api-key ***" in response.text


def test_a_streamed_key_never_reaches_the_ledger_or_switch_export(ledger_proxy: tuple[Proxy, Any]) -> None:
    proxy, recorder = ledger_proxy
    assert proxy.upstream is not None
    proxy.upstream.script(Reply(200, [echoed_error("openai-chat", FAKE_BASETEN_KEY)]))
    response = httpx.post(proxy.url + "/v1/chat/completions", json=body_for("openai-chat", True), timeout=20)
    assert FAKE_BASETEN_KEY not in response.text
    drain(recorder, 1)
    recorder.close()
    exported = subprocess.run(
        [sys.executable, "-m", "switch", "export", "--format", "jsonl"], capture_output=True, text=True, timeout=60
    )
    assert exported.returncode == 0, exported.stderr
    (row,) = [orjson.loads(line) for line in exported.stdout.splitlines()]
    assert "Incorrect API key provided: ***" in row["error"]
    assert FAKE_BASETEN_KEY not in exported.stdout + exported.stderr


# ---- status line and headers ----------------------------------------------------------------------------

FALLBACK_PRESET = '[default]\norchestrator = ["baseten/moonshotai/Kimi-K3", "backup/backup-model"]\n'


@pytest.fixture
def raw_first(
    start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Proxy]:
    """A route whose first target is a raw hostile upstream and whose second is a well-behaved fake."""
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    monkeypatch.setenv("BACKUP_API_KEY", "sk-fake-backup-key")
    (isolated_home / "presets").mkdir(exist_ok=True)
    (isolated_home / "presets" / "test.toml").write_text(FALLBACK_PRESET, encoding="utf-8")
    set_active("test")
    backup = FakeChatUpstream()
    with RawUpstream() as raw, serve(backup) as backup_url:
        proxy = start_proxy(
            f'[providers.baseten]\nbase_url = "{raw.url}/v1"\n'
            f'[providers.backup]\nbase_url = "{backup_url}/v1"\napi_key_env = "BACKUP_API_KEY"\n'
            "[routing]\nttft_timeout = 0.5\n",
            read_timeout=3.0,
        )
        proxy.extra.update(raw=raw, backup=backup)
        yield proxy


def ask_anthropic(proxy: Proxy, stream: bool = False) -> httpx.Response:
    return httpx.post(
        proxy.url + "/v1/messages",
        json=body_for("anthropic", stream),
        headers={"x-api-key": FAKE_CLIENT_KEY},
        timeout=60,
    )


def test_trickled_headers_are_cut_off_at_the_ttft_deadline_and_fall_back(raw_first: Proxy) -> None:
    raw, backup = raw_first.extra["raw"], raw_first.extra["backup"]
    raw.script(trickled_headers(seconds=8.0))  # one byte every 50 ms: each byte used to re-arm the timer
    backup.script(Turn(text="from the backup"))
    started = time.monotonic()
    response = ask_anthropic(raw_first)
    print(f"fell back after {time.monotonic() - started:.2f} s")  # the figure, for the note
    assert response.status_code == 200 and "from the backup" in response.text
    first, second = raw_first.sink.wait(2)
    assert first.outcome == "transport_error" and "status line and headers in time" in (first.error or "")
    assert second.fallback_trigger == "timeout" and second.outcome == "completed"


def test_oversized_headers_are_refused_after_the_cap_and_fall_back(raw_first: Proxy) -> None:
    raw, backup = raw_first.extra["raw"], raw_first.extra["backup"]
    raw.script(endless_headers(total=32 << 20))
    backup.script(Turn(text="from the backup"))
    response = ask_anthropic(raw_first)
    assert response.status_code == 200 and "from the backup" in response.text
    first, second = raw_first.sink.wait(2)
    assert f"more than {MAX_HEAD_BYTES} bytes of status line and headers" in (first.error or "")
    assert second.fallback_trigger == "connect"
    print(f"the hostile upstream got {raw.sent} bytes into the socket")  # the figure, for the note
    assert raw.sent < (32 << 20)  # cut off long before the whole flood


def test_oversized_headers_without_a_fallback_are_a_502_in_the_callers_format(
    start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    with RawUpstream() as raw:
        proxy = start_proxy(f'[providers.baseten]\nbase_url = "{raw.url}/v1"\n', read_timeout=3.0)
        raw.script(endless_headers(total=8 << 20))
        response = ask_anthropic(proxy)
        assert response.status_code == 502
        assert_error_shape("anthropic", response.json())
        assert "bytes of status line and headers" in response.json()["error"]["message"]
        raw.script(endless_headers(total=16 << 10))  # a modest head still passes
        assert ask_anthropic(proxy).status_code == 200


# ---- the overall stream deadline -----------------------------------------------------------------------


def slow_stream(chunks: int = 40, interval: float = 0.1) -> Reply:
    """A well-formed stream that goes on (never silent for long) for `chunks` × `interval` seconds."""
    turn = Turn(text="tick " * chunks, fragment=5)
    data = [b"data: " + orjson.dumps(c) + b"\n\n" for c in chat_chunks(turn, "m", iter(range(9)))]  # type: ignore[arg-type]
    return Reply(200, [*data, b"data: [DONE]\n\n"], delay_between=interval)


@pytest.mark.parametrize("inbound_api", list(PATHS))
def test_a_stream_past_max_stream_seconds_ends_with_the_callers_error_event(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    inbound_api: str,
) -> None:
    proxy = kimi_proxy_on(fake_chat, start_proxy, monkeypatch, "switch", read_timeout=3.0, max_stream_seconds=1.0)
    fake_chat[0].script(slow_stream())
    response = httpx.post(proxy.url + PATHS[inbound_api], json=body_for(inbound_api, True), timeout=60)
    assert response.status_code == 200
    assert_stream_well_formed(inbound_api, response.text, completed=False)
    assert "max_stream_seconds" in response.text
    (record,) = proxy.sink.wait(1)
    assert record.outcome == "transport_error" and "1 s stream limit (max_stream_seconds)" in (record.error or "")


def test_a_pass_through_stream_past_max_stream_seconds_ends_with_an_error_event(
    start_proxy: Callable[..., Proxy],
) -> None:
    fake = FakeUpstream()
    with serve(fake) as url:
        proxy = start_proxy(
            f'[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n',
            read_timeout=3.0,
            max_stream_seconds=1.0,
        )
        events = [ANTHROPIC_STREAM[i : i + 40] for i in range(0, len(ANTHROPIC_STREAM), 40)]
        fake.script(Reply(200, events, delay_between=0.1))
        response = ask_anthropic(proxy, stream=True)
        assert response.text.rstrip().endswith("}") and "event: error" in response.text
        assert "max_stream_seconds" in response.text
        (record,) = proxy.sink.wait(1)
        assert record.outcome == "transport_error" and "max_stream_seconds" in (record.error or "")


# ---- compression bombs and endless lines ----------------------------------------------------------------


def test_a_gzip_bomb_on_a_whole_answer_is_refused_at_the_inflation_bound(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    bomb = gzip.compress(b" " * (MAX_BODY_BYTES + (1 << 20)), compresslevel=9)  # just over the bound
    kimi_proxy.upstream.script(Reply(200, [bomb], "application/json", headers={"content-encoding": "gzip"}))
    response = httpx.post(kimi_proxy.url + "/v1/chat/completions", json=body_for("openai-chat", False), timeout=60)
    assert response.status_code == 502
    assert_error_shape("openai-chat", response.json())
    (record,) = kimi_proxy.sink.wait(1)
    assert f"larger than {MAX_BODY_BYTES} bytes" in (record.error or ""), record.error


def long_line_stream(size: int) -> list[bytes]:
    """One SSE `data:` line of `size` bytes that never ends, in 64 KiB reads."""
    piece = b"x" * (64 << 10)
    return [b"data: ", *[piece] * (size // len(piece))]


@pytest.mark.parametrize("inbound_api", list(PATHS))
def test_an_endless_sse_line_is_cut_at_the_cap_with_an_error_event(kimi_proxy: Proxy, inbound_api: str) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Reply(200, long_line_stream(MAX_EVENT_BYTES + (1 << 20))))
    response = httpx.post(kimi_proxy.url + PATHS[inbound_api], json=body_for(inbound_api, True), timeout=60)
    assert response.status_code == 200
    assert_stream_well_formed(inbound_api, response.text, completed=False)
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "incomplete_stream"
    assert f"longer than {MAX_EVENT_BYTES} bytes" in (record.error or ""), record.error


def test_an_endless_sse_line_on_a_pass_through_stream_is_cut_at_the_cap(native_proxy: Proxy) -> None:
    assert native_proxy.upstream is not None
    native_proxy.upstream.script(Reply(200, long_line_stream(MAX_EVENT_BYTES + (1 << 20))))
    response = ask_anthropic(native_proxy, stream=True)
    assert "event: error" in response.text and f"longer than {MAX_EVENT_BYTES} bytes" in response.text
    (record,) = native_proxy.sink.wait(1)
    assert record.outcome == "incomplete_stream" and "longer than" in (record.error or "")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the proxy's peak RSS from /proc")
def test_a_streamed_gzip_bomb_keeps_the_proxys_memory_bounded(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 96 MiB of one never-ending line, gzipped to ~100 KB: inflated whole (as before) the peak RSS grew ~300 MB
    # (947 MB for 256 MiB); inflated in 1 MiB steps and cut at the SSE cap it stays near its idle size.
    bomb = gzip.compress(b"data: " + b"0" * (96 << 20), compresslevel=9)
    fake = FakeChatUpstream()
    fake.script(
        Reply(200, [bomb[i : i + 65536] for i in range(0, len(bomb), 65536)], headers={"content-encoding": "gzip"})
    )
    with serve(fake) as url:
        port = free_port()
        (isolated_home / "config.toml").write_text(
            f'[server]\nport = {port}\n[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8"
        )
        env = {"BASETEN_API_KEY": FAKE_BASETEN_KEY, "SWITCH_HOME": str(isolated_home)}
        with serve_process(port, env) as process:
            idle = peak_rss_mb(process.pid)
            response = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions", json=body_for("openai-chat", True), timeout=120
            )
            grown = peak_rss_mb(process.pid) - idle
    print(f"proxy peak RSS: {idle:.0f} MB idle, grew {grown:.0f} MB")  # the figure, for the note
    assert grown < 120, f"the proxy's peak RSS grew {grown:.0f} MB"
    assert_stream_well_formed("openai-chat", response.text, completed=False)
    assert "longer than" in response.text


# ---- property: any hostile stream ---------------------------------------------------------------------

HOSTILE_LINES = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda n: b"data: " + b"y" * n + b"\n\n", st.integers(0, 200_000)),
    st.just(b"data: " + orjson.dumps({"error": {"message": f"bad key {FAKE_BASETEN_KEY}"}}) + b"\n\n"),
    st.just(b"event: error\ndata: " + orjson.dumps({"error": {"message": FAKE_BASETEN_KEY}}) + b"\n\n"),
    st.sampled_from([b"data: " + orjson.dumps(c) + b"\n\n" for c in chat_chunks(Turn(text="ok"), "m", iter(range(9)))]),  # type: ignore[arg-type]
    st.just(b"data: [DONE]\n\n"),
    st.just(b"\r\n\r"),
)


def test_any_hostile_stream_ends_in_the_callers_format_without_the_key(kimi_proxy: Proxy) -> None:
    fake = kimi_proxy.upstream
    assert fake is not None
    calls = 0

    @settings(max_examples=max(25, settings().max_examples // 4))
    @given(
        inbound_api=st.sampled_from(list(PATHS)),
        lines=st.lists(HOSTILE_LINES, max_size=12),
        split=st.integers(1, 5000),
    )
    def check(inbound_api: str, lines: list[bytes], split: int) -> None:
        nonlocal calls
        data = b"".join(lines)
        # At most ~200 reads: a fake sending a long stream a byte at a time would starve its next answer.
        split = max(split, len(data) // 200)
        fake.script(Reply(200, [data[i : i + split] for i in range(0, len(data), split)]))
        response = httpx.post(kimi_proxy.url + PATHS[inbound_api], json=body_for(inbound_api, True), timeout=30)
        calls += 1
        assert response.status_code == 200
        assert FAKE_BASETEN_KEY not in response.text
        assert_client_stream(inbound_api, response.content)
        record = kimi_proxy.sink.wait(calls, timeout=10)[-1]
        assert FAKE_BASETEN_KEY not in (record.error or "")

    check()


@pytest.mark.parametrize("value", ["0", "-5.0", "nan", "inf", "-inf", "1e9"])
def test_max_stream_seconds_must_be_finite_positive_and_at_most_a_week(isolated_home: Path, value: str) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nmax_stream_seconds = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="max_stream_seconds") as refused:
        load_settings()
    assert "\n" not in str(refused.value).strip() and "config.toml" in str(refused.value)
    (isolated_home / "config.toml").write_text("[server]\nmax_stream_seconds = 5400\n", encoding="utf-8")
    assert load_settings().server.max_stream_seconds == 5400
