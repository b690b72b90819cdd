"""The Sessions tab draws the highlighted session as its tree of agents, read from a real ledger."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from switch.ui.app import make_app
from textual.widgets import Tree

from tests.ledger.test_agent_tree import session_calls
from tests.ledger_seed import FROZEN_NOW, kimi_call
from tests.ui.test_dashboard import open_table
from tests.ui.test_honest_numbers import record
from tests.ui.waiting import DEADLINE_SECONDS, settle


def drawn(tree: Tree[Any]) -> list[str]:
    """Every node under the root, indented two spaces per level, as plain text."""
    lines: list[str] = []

    def visit(node: Any, depth: int) -> None:
        for child in node.children:
            lines.append("  " * depth + str(child.label))
            visit(child, depth + 1)

    visit(tree.root, 0)
    return lines


async def tree_of(app: Any, pilot: Any, session: str) -> list[str]:
    """The tree once it shows `session` (the read runs in a worker; wait on it, with a deadline)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    tree = app.query_one("#agents-tree", Tree)
    while f"session {session} " not in str(tree.root.label):
        assert time.monotonic() < deadline, f"the tree never showed {session}: {tree.root.label}"
        await settle(app, pilot)
    return drawn(tree)


async def test_sessions_tab_draws_the_highlighted_sessions_agents(isolated_home: Path) -> None:
    ledger = isolated_home / "ledger.db"
    record(
        ledger,
        kimi_call(FROZEN_NOW - 500, session_id="plain", role="orchestrator"),
        *session_calls("agents"),
    )
    app = make_app(ledger, clock=lambda: FROZEN_NOW + 60, poll=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        table = await open_table(app, pilot, "s", "sessions-table")
        assert table.get_row_at(0)[0].plain == "agents"  # newest first, highlighted
        lines = await tree_of(app, pilot, "agents")
        assert [line.split(" · ")[0] for line in lines] == [
            "orchestrator",
            "  fork fork-1",
            "  subagent child-1",
            "    subagent nested-1",
            "    compaction",
            "  compaction",
            "  background",
        ]
        assert lines[0] == "orchestrator · moonshotai/Kimi-K3 · 2 calls · $0.0090 (native $0.0120)"
        assert lines[3].startswith("    subagent nested-1 · zai-org/GLM-5.2 · 1 call · $")
        table.focus()
        await pilot.press("down")
        lines = await tree_of(app, pilot, "plain")
        assert [line.split(" · ")[0] for line in lines] == ["orchestrator"]


def test_health_tab_names_fork_and_compaction_routes_only_when_the_preset_does() -> None:
    from switch.ui.panes.health import active_routes

    from switch.checks.base import PresetStatus
    from switch.config import BUILTIN_PROVIDERS
    from switch.routing.presets import parse_preset

    def routes(section: dict[str, Any]) -> str:
        preset = parse_preset("p", None, {"default": section}, set(BUILTIN_PROVIDERS), "baseten/m")
        return active_routes([PresetStatus("p", "", True, None, preset)], "baseten/m").plain

    plain = routes({"orchestrator": "native", "subagent": "baseten/helper"})
    assert "fork" not in plain and "compaction" not in plain
    named = routes({"orchestrator": "native", "subagent": "baseten/helper", "fork": "baseten/forks"})
    assert "fork → baseten/forks" in named and "compaction" not in named
