"""A short version of `bench/load.py`: concurrent streaming clients, injected upstream failures,
and afterwards one ledger row per call with the right outcome, nothing stuck, memory flat."""

from __future__ import annotations

from pathlib import Path

from bench.load import run_load


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
