"""The dashboard rendered to SVG without a terminal (the README screenshot and its snapshot tests use it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from .app import make_app
from .data import now_seconds


async def render_svg(
    ledger_path: Path,
    *,
    size: tuple[int, int] = (120, 36),
    keys: Sequence[str] = (),
    clock: Callable[[], float] = now_seconds,
    title: str | None = None,
) -> str:
    """The dashboard over `ledger_path` at `size` (columns, rows) after pressing `keys`, as SVG text."""
    app = make_app(ledger_path, clock=clock, poll=3600)  # no poll during the render: one settled frame
    async with app.run_test(size=size) as pilot:
        for key in (None, *keys):
            if key is not None:
                await pilot.press(key)
            # Each pane reads in a worker and draws on the next refresh: wait for both.
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
        return app.export_screenshot(title=title)


def save_svg(
    ledger_path: Path,
    destination: Path,
    *,
    size: tuple[int, int] = (120, 36),
    keys: Sequence[str] = (),
    clock: Callable[[], float] = now_seconds,
    title: str | None = None,
) -> Path:
    """Write `render_svg`'s picture to `destination` (call it outside a running event loop)."""
    svg = asyncio.run(render_svg(ledger_path, size=size, keys=keys, clock=clock, title=title))
    destination.write_text(svg, encoding="utf-8")
    return destination
