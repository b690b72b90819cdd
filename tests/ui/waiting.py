"""Waiting for the dashboard on a loaded machine: on conditions, never on a fixed pause alone."""

from __future__ import annotations

import time
from typing import Any

from textual.worker import WorkerCancelled

DEADLINE_SECONDS = 60


async def settle(app: Any, pilot: Any) -> None:
    """Return once the dashboard is idle: no message pending and no read running, three checks in a row.

    A key's message can start a read only after a fixed pause has ended on a busy machine, so one look at
    the workers is not enough; a read replaced by a newer one (exclusive groups) is cancelled, no failure.
    """
    deadline = time.monotonic() + DEADLINE_SECONDS
    quiet = 0
    while quiet < 3:
        if time.monotonic() > deadline:
            raise AssertionError("the dashboard never settled")
        await pilot.pause()  # every pending message handled
        busy = any(not worker.is_finished for worker in app.workers)
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            busy = True
        await pilot.pause(0.02)
        quiet = 0 if busy else quiet + 1


async def ready(app: Any, pilot: Any) -> None:
    """Wait until the dashboard is up (the Overview read and its table focused) before the first key."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        await settle(app, pilot)
        focused = app.focused
        if focused is not None and focused.id == "by-model":
            return
    raise AssertionError(f"the dashboard did not come up: focus on {app.focused!r}")
