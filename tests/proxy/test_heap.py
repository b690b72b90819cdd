"""After a busy spell the proxy hands its freed heap back to the OS once, and never while a call runs."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

import pytest

from switch.proxy import heap


class Calls:
    """The proxy's call counters as the trimmer reads them; counts its checks."""

    def __init__(self) -> None:
        self._served = 0
        self.busy = False
        self.checks = 0

    @property
    def served(self) -> int:
        self.checks += 1
        return self._served

    def serve(self, count: int, *, running: bool = False) -> None:
        self._served += count
        self.busy = running


async def _checks(calls: Calls, more: int) -> None:
    """Until the trimmer has looked `more` more times (each look is its own turn of the loop), within 30 s."""
    target = calls.checks + more

    async def looked() -> None:
        while calls.checks < target:
            await asyncio.sleep(0)  # hands the loop to the trimmer's task: the condition is polled, not a wait

    await asyncio.wait_for(looked(), timeout=30)


@contextlib.asynccontextmanager
async def trimming(calls: Calls) -> AsyncIterator[list[int]]:
    """The trimmer running over `calls` (a look every millisecond); yields the trims it made."""
    trims: list[int] = []
    task = asyncio.create_task(heap.return_freed_heap(calls, lambda: trims.append))
    try:
        yield trims
    finally:
        task.cancel()


async def test_the_heap_is_trimmed_once_per_busy_spell_and_never_during_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "HEAP_CHECK_S", 0.001)
    calls = Calls()
    async with trimming(calls) as trims:
        await _checks(calls, 5)
        assert trims == []  # nothing was served: nothing to give back
        calls.serve(3, running=True)
        await _checks(calls, 5)
        assert trims == []  # a call is still running
        calls.busy = False
        await _checks(calls, 5)
        assert trims == [0]  # once, however long the proxy then rests
        calls.serve(1)
        await _checks(calls, 5)
        assert trims == [0, 0]


class SteadyLoad(Calls):
    """A call begins between every two looks of the trimmer while `loading`; none is running at a look."""

    def __init__(self) -> None:
        super().__init__()
        self.loading = True

    @property
    def served(self) -> int:
        self.checks += 1
        if self.loading:
            self._served += 1
        return self._served


async def test_a_steady_load_is_never_paused_for_a_trim_only_its_end_is(monkeypatch: pytest.MonkeyPatch) -> None:
    # No call is running at any look, yet the next one is about to begin: a trim there delays it.
    monkeypatch.setattr(heap, "HEAP_CHECK_S", 0.001)
    calls = SteadyLoad()
    async with trimming(calls) as trims:
        await _checks(calls, 20)
        assert trims == []
        calls.loading = False
        await _checks(calls, 5)
        assert trims == [0]  # the first whole period without a new call


async def test_without_a_trim_function_the_trimmer_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "HEAP_CHECK_S", 0.001)
    calls = Calls()
    task = asyncio.create_task(heap.return_freed_heap(calls, lambda: None))
    await _checks(calls, 1)
    calls.serve(1)
    await asyncio.wait_for(task, timeout=30)  # ends, rather than looking every few seconds for ever


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim exists only on Linux")
def test_glibc_trim_is_found_and_runs() -> None:
    trim = heap.malloc_trim()
    assert trim is not None
    assert trim(0) in (0, 1)  # 1: memory was released, 0: there was none to release
