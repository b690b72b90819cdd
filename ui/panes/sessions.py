"""The Sessions tab: one row per harness session in the time range, and under it the highlighted session's
tree of agents (main thread, subagents, forks, nested agents, compaction) with their models and money;
Enter shows that session's calls."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Tree
from textual.widgets.tree import TreeNode

from switch.ledger import agents, queries

from .. import format as fmt
from ..data import Ledger, since_of
from .base import LedgerPane


class SessionsPane(LedgerPane):
    """Spend and savings per session, split into orchestrator and subagents."""

    class Loaded(Message):
        """The sessions of the chosen time range were read."""

        bubble = False

        def __init__(self, rows: list[dict[str, Any]]) -> None:
            super().__init__()
            self.rows = rows

    class AgentsLoaded(Message):
        """One session's tree of agents was read (None: the session has no calls in the range)."""

        bubble = False

        def __init__(self, session_id: str, tree: dict[str, Any] | None) -> None:
            super().__init__()
            self.session_id = session_id
            self.tree = tree

    class SessionChosen(Message):
        """The user picked a session: the app shows its calls."""

        def __init__(self, session_id: str) -> None:
            super().__init__()
            self.session_id = session_id

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Sessions", ledger, clock, pane_id="sessions")
        self._range_key = "today"
        self._tree_of: str | None = None

    def compose(self) -> ComposeResult:
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        tree: Tree[None] = Tree(fmt.plain("agents: highlight a session"), id="agents-tree")
        tree.show_root = True
        yield tree

    def on_mount(self) -> None:
        self.query_one("#sessions-table", DataTable).add_columns(
            "session", "harness", "start", "duration", "calls", "orchestrator", "subagents", "saved", "cache hit"
        )

    def reload(self, range_key: str) -> None:
        """Read the sessions that started in `range_key`."""
        self._range_key = range_key
        self._load(range_key)

    @work(thread=True, exclusive=True, group="sessions")
    def _load(self, range_key: str) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            rows = queries.sessions(connection, since_of(range_key, self.clock()))
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.Loaded(rows))

    @on(Loaded)
    def _show(self, message: Loaded) -> None:
        rows = message.rows
        table = self.query_one("#sessions-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            duration = (row["ended_at"] or row["started_at"]) - row["started_at"]
            table.add_row(
                fmt.plain(str(row["session_id"])[:18]),
                fmt.plain(row["harness"]),
                time.strftime("%m-%d %H:%M", time.localtime(row["started_at"])),
                fmt.ms(duration * 1000),
                fmt.count(row["calls"]),
                _side(row, "orchestrator"),
                _side(row, "subagent"),
                fmt.money(row["savings_micros"]),
                fmt.pct(row["cache_hit_rate"]),
                key=str(row["session_id"]),
            )
        if rows and cursor >= 0:
            table.move_cursor(row=min(cursor, len(rows) - 1), scroll=False)
        if rows:
            row = rows[min(max(cursor, 0), len(rows) - 1)]
            self._load_agents(str(row["session_id"]), self._range_key)
        else:
            self._show_agents(self.AgentsLoaded("", None))

    @on(DataTable.RowHighlighted, "#sessions-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        session = event.row_key.value
        if session is not None and session != self._tree_of:
            self._load_agents(session, self._range_key)

    @work(thread=True, exclusive=True, group="session-agents")
    def _load_agents(self, session_id: str, range_key: str) -> None:
        try:
            connection = self.ledger.get()
            if connection is None:
                return
            found = agents.agent_trees(connection, since_of(range_key, self.clock()), session_id=session_id)
        except sqlite3.Error as exc:
            self.post_message(self.ReadFailed(str(exc)))
            return
        self.post_message(self.AgentsLoaded(session_id, found[0] if found else None))

    @on(AgentsLoaded)
    def _show_agents(self, message: AgentsLoaded) -> None:
        tree: Tree[None] = self.query_one("#agents-tree", Tree)
        tree.clear()
        self._tree_of = message.session_id or None
        if message.tree is None:
            tree.root.set_label(fmt.plain("agents: no session in this range"))
            return
        tree.root.set_label(fmt.plain(f"agents of session {message.session_id} ({message.tree['harness']})"))
        _add_agent(tree.root, message.tree["agents"])
        tree.root.expand_all()

    @on(DataTable.RowSelected, "#sessions-table")
    def _choose(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(self.SessionChosen(event.row_key.value))


def _side(row: dict[str, Any], side: str) -> str:
    """One side's spend and tokens; `none` when it made no call, so a session without subagents is not unpriced."""
    if not row[f"{side}_calls"]:
        return "none"
    return f"{fmt.money(row[f'{side}_micros'])} / {fmt.count(row[f'{side}_tokens'])} tok"


def _agent_label(node: dict[str, Any]) -> str:
    """One agent: what it is, the models that served it, its calls, spend and native estimate."""
    calls = node["calls"]
    models = ", ".join(node["models"]) or "no model"
    unpriced = f", {node['unpriced']} unpriced" if node["unpriced"] else ""
    return (
        f"{agents.label(node)} · {models} · {calls} call{'s' if calls != 1 else ''} · "
        f"{fmt.money(node['spend_micros'])} (native {fmt.money(node['native_micros'])}{unpriced})"
    )


def _add_agent(parent: TreeNode[None], node: dict[str, Any]) -> None:
    """Add `node` under `parent`, and its children under it."""
    text = fmt.plain(_agent_label(node))
    if node["children"]:
        branch = parent.add(text, expand=True)
        for child in node["children"]:
            _add_agent(branch, child)
    else:
        parent.add_leaf(text)
