"""Background work that gives the proxy's core back to the event loop between small pieces.

The writer thread shares a core, and the interpreter, with the event loop serving calls. A batch of a
few hundred rows is 10-20 ms of work; run in one stretch, every call that arrives meanwhile waits for
it, the kernel sharing the core between the two threads in slices of milliseconds (measured: half the
calls that overlapped a batch took 3-8 times as long, and they made the proxy's whole p99). Between
pieces of a few dozen microseconds the writer releases the interpreter and yields the core: a call that
is waiting runs at once, and with none waiting the yield costs one system call.

Giving way is for a writer that keeps up. While the proxy is saturated the event loop always has work,
so a writer that yielded after every row would fall ever further behind, its backlog held in memory:
once a batch has taken `PATIENCE_S`, the rest of it is written straight through.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

PIECE_ROWS = 6
"""Rows per piece of work in C (an insert and its rollups). Measured with `bench/tail_cause.py`: 6 rows left
1-2 % of the calls overlapping a batch slow, against 3-5 % with 16, for about 5 % more writer CPU a row."""
PATIENCE_S = 0.25
"""How long one batch gives way at most (about the writer's batch window)."""

_yield = getattr(os, "sched_yield", None)


def give_way() -> None:
    """Release the interpreter and let another runnable thread on this core run first."""
    if _yield is not None:
        _yield()  # releases the GIL; the kernel runs a waiting thread before this one resumes
    else:  # Windows: sleep(0) gives up the rest of the time slice
        time.sleep(0)


class Pace:
    """One batch's pace: it gives way between pieces until it has run for `patience` seconds."""

    def __init__(self, patience: float | None = None) -> None:
        patience = PATIENCE_S if patience is None else patience
        self._until = time.monotonic() + patience if patience > 0 else 0.0

    def give_way(self) -> None:
        """Give way, unless the batch has run out of patience (then it goes on at once)."""
        if self._until and time.monotonic() < self._until:
            give_way()
        else:
            self._until = 0.0  # no clock read per row from here on

    def pieces(self, items: Sequence[T], size: int = PIECE_ROWS) -> Iterator[Sequence[T]]:
        """`items` in consecutive slices of `size`, giving way before each slice after the first."""
        for start in range(0, len(items), size):
            if start:
                self.give_way()
            yield items[start : start + size]


STRAIGHT = Pace(patience=0.0)
"""A pace that never gives way (rows written where nothing competes, such as the spill file's replay)."""
