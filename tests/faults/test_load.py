"""A short version of `bench/load.py`: concurrent streaming clients, injected upstream failures,
and afterwards one ledger row per call with the right outcome, nothing stuck, memory flat."""

from __future__ import annotations

import gc
import types
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.load import run_load
from tests.conftest import Proxy
from tests.fake_upstream import Reply
from tests.faults.test_upstream_faults import GOOD, PATHS, body_for, sse


async def test_concurrent_streams_with_injected_failures_lose_nothing(tmp_path: Path) -> None:
    calls, fail_every = 1500, 50
    result = await run_load(calls, concurrency=32, fail_every=fail_every, home=tmp_path / "home", pin=False)
    injected = calls // fail_every
    assert result.upstream_requests == calls and result.injected == injected
    # Every client got a well-formed answer or a well-formed error; none hung, none lost its connection.
    assert set(result.answers) <= {"completed", "error_status", "stream_error"}, result.answers
    assert result.answers["completed"] == calls - injected
    # The failures rotate: a 500 before any byte, a reset mid-stream, a stream cut short.
    assert result.answers["error_status"] == injected // 3
    assert result.answers["stream_error"] == injected - injected // 3
    assert result.rows == calls
    assert result.outcomes == {
        "completed": calls - injected,
        "upstream_error": injected // 3,
        "transport_error": injected // 3,
        "incomplete_stream": injected // 3,
    }
    assert result.rss_growth < 0.2, (result.rss_first_thousand_mb, result.rss_end_mb)


def switch_garbage_after(calls: Callable[[], None]) -> list[str]:
    """What of switch's own objects is left for the cycle collector after `calls` (kept off meanwhile)."""
    gc.collect()
    gc.disable()
    try:
        calls()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        leftovers = [
            f"frame {item.f_code.co_qualname}" if isinstance(item, types.FrameType) else type(item).__qualname__
            for item in gc.garbage
            if (isinstance(item, types.FrameType) and "/switch/" in item.f_code.co_filename)
            or type(item).__module__.startswith("switch.")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return leftovers


def test_failed_calls_leave_no_reference_cycles(kimi_proxy: Proxy) -> None:
    # Under load the collector rarely runs (`switch serve` raises its thresholds): whatever a failed
    # call leaves in a cycle, the request body and parsed request included, stays in memory.
    assert kimi_proxy.upstream is not None
    good = sse(GOOD)

    def failing_calls() -> None:
        for api, path in PATHS.items():
            kimi_proxy.upstream.script(  # type: ignore[union-attr]
                Reply(500, [b'{"error":{"message":"boom"}}'], "application/json"),
                Reply(200, good, break_after=2),
                Reply(200, good[:3]),
                Reply(200, good, break_after=2),
                Reply(200, [b"{not json"], "application/json"),
            )
            for stream in (False, True, True, False, False):
                httpx.post(kimi_proxy.url + path, json=body_for(api, stream), timeout=20)
        records = kimi_proxy.sink.wait(15)
        assert len(records) == 15 and all(record.outcome != "completed" for record in records)

    leftovers = switch_garbage_after(failing_calls)
    assert leftovers == [], " ".join(leftovers)
