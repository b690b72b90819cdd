"""Snapshots of every screen at 80x24, 100x30, 120x36 and 160x48 (seeded ledger, frozen clock, UTC)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from switch.ui.app import make_app
from switch.ui.screens.detail import CallDetail
from textual.widgets import DataTable

from tests.ledger_seed import FROZEN_NOW, seed_ledger


@pytest.fixture
def snapshot_ledger(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    path = isolated_home / "ledger.db"
    seed_ledger(path, 300, FROZEN_NOW, 3 * 86400)
    return path


async def shown(pilot: Any) -> None:
    """Wait until the focused table has its rows (or the call detail is up), then for every read in flight."""
    # On a loaded machine a tab's first read can start after a fixed pause.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        await pilot.app.workers.wait_for_complete()
        focused = pilot.app.focused
        if isinstance(pilot.app.screen, CallDetail) or (isinstance(focused, DataTable) and focused.row_count):
            break
    await pilot.pause(0.1)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.1)


@pytest.mark.parametrize(
    "size", [(80, 24), (100, 30), (120, 36), (160, 48)], ids=["80x24", "100x30", "120x36", "160x48"]
)
@pytest.mark.parametrize(
    "keys",
    [(), ("r", "r"), ("c",), ("c", "enter"), ("r", "t"), ("s", "r", "r"), ("p",), ("s", "r", "r", "enter")],
    ids=["overview", "overview-7d", "calls", "call-detail", "trends-7d", "sessions-30d", "presets", "session-calls"],
)
def test_screen_snapshot(
    snap_compare: Any, snapshot_ledger: Path, size: tuple[int, int], keys: tuple[str, ...]
) -> None:
    app = make_app(snapshot_ledger, clock=lambda: FROZEN_NOW, poll=3600)

    async def settle(pilot: Any) -> None:
        await shown(pilot)  # the dashboard is up before the first key
        for key in keys:
            await pilot.press(key)
            await shown(pilot)
        # A toast lasts a few seconds: on a loaded machine it may be gone or not by now, so none is pictured.
        pilot.app.clear_notifications()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=settle)


class Ready:
    """A snapshot already read, as the writer takes them (`PendingQuota` reads its headers on demand)."""

    def __init__(self, snapshot: Any) -> None:
        self.taken = snapshot

    def snapshot(self) -> Any:
        return self.taken


def test_overview_shows_the_native_plans(snap_compare: Any, snapshot_ledger: Path) -> None:
    """A Claude plan at 42 % / 18 % and a ChatGPT plan whose 5-hour reset has passed (stale)."""
    from switch.ledger.db import open_for_writing
    from switch.ledger.plan_quota import write_snapshots
    from switch.protocols.ratelimits import Snapshot, Window

    claude = Snapshot(
        "anthropic",
        "key-0123456789ab",
        "unified",
        "allowed",
        (Window("5h", 0.42, FROZEN_NOW + 2 * 3600 + 300, "allowed"), Window("7d", 0.18, FROZEN_NOW + 4 * 86400)),
        "5h",
        None,
        FROZEN_NOW - 60,
    )
    codex = Snapshot(
        "openai",
        "key-ba9876543210",
        "codex",
        "allowed",
        (Window("5h", 0.97, FROZEN_NOW - 600), Window("7d", 0.55, FROZEN_NOW + 86400)),
        None,
        None,
        FROZEN_NOW - 7200,
    )
    connection = open_for_writing(snapshot_ledger)
    try:
        write_snapshots(connection, {(s.provider, s.account): Ready(s) for s in (claude, codex)})
    finally:
        connection.close()
    app = make_app(snapshot_ledger, clock=lambda: FROZEN_NOW, poll=3600)

    assert snap_compare(app, terminal_size=(120, 36), run_before=shown)
