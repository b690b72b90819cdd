"""Freed heap handed back to the operating system once a busy spell is over.

A burst of calls leaves the C heap holding the memory its bodies and translations used: freed, but
kept by the allocator between the long-lived blocks allocated meanwhile (measured: 5-6 MB after 16
clients for 10 s, which `malloc_trim` returns). A check every `HEAP_CHECK_S` trims once after a busy
spell is over: calls were served since the last trim, and none began during the last whole period.
A trim walks the heap on the event loop (a millisecond or more), so it never falls between two calls
of a steady load, where the next call would wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("switch.app")

HEAP_CHECK_S = 10.0


class Calls(Protocol):
    """What the trimmer reads of the proxy's calls."""

    @property
    def served(self) -> int:
        """Calls begun so far."""

    @property
    def busy(self) -> bool:
        """Whether a call is running."""


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (macOS, Windows, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here: only a proxy that served a burst pays for it

    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


async def return_freed_heap(calls: Calls, trimmer: Callable[[], Callable[[int], int] | None] = malloc_trim) -> None:
    """Trim the heap once after each busy spell: a whole period without a new call, and none running."""
    trim: Callable[[int], int] | None = None
    trimmed_at = seen = calls.served
    while True:
        await asyncio.sleep(HEAP_CHECK_S)
        served = calls.served
        quiet = served == seen  # no call began during the period just ended
        seen = served
        if not quiet or served == trimmed_at or calls.busy:
            continue
        trimmed_at = served
        if trim is None:
            trim = trimmer()
            if trim is None:
                return  # nothing to trim with here: stop looking
        trim(0)
