"""Each harness session as a tree of agents: the main thread, the agents it spawned (subagents, forks),
the agents those spawned, and the compaction and background turns, each with its calls, models and money.

Read-only SQL over `calls` (one grouped scan per range, by the session index for one session), assembled in
Python. An agent is a distinct `agent_id` within its session; its parent is `parent_agent_id` when the
harness named one (Claude Code's nested agents, Codex's spawned threads), else the main thread.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from switch.ledger.queries import where_clause

MAIN = "main"
"""The key of a session's main thread, whose calls carry no agent id."""

_SQL = """
    SELECT session_id, MIN(harness), COALESCE(agent_id, ''), MAX(parent_agent_id), role,
           COALESCE(request_kind, ''), served_model,
           COUNT(*), SUM(cost_micros), SUM(native_cost_micros), SUM(cost_micros IS NULL AND provider != ''),
           SUM(input_tokens + cache_read_tokens + cache_write_tokens), SUM(output_tokens), MIN(started_at),
           SUM(outcome != 'completed'), MAX(started_at)
    FROM calls {where}
    GROUP BY session_id, agent_id, role, request_kind, served_model
"""


def _node(key: str, kind: str, agent_id: str | None) -> dict[str, Any]:
    return {
        "key": key,
        "kind": kind,
        "agent_id": agent_id,
        "parent_agent_id": None,
        "calls": 0,
        "errors": 0,
        "spend_micros": 0,
        "native_micros": 0,
        "unpriced": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "first_at": None,
        "models": {},
        "children": [],
    }


def _add(node: dict[str, Any], row: tuple[Any, ...]) -> None:
    model, calls, cost, native, unpriced, tokens_in, tokens_out, first, errors = row[6:15]
    node["calls"] += calls
    node["errors"] += errors or 0
    node["spend_micros"] += cost or 0
    node["native_micros"] += native or 0
    node["unpriced"] += unpriced or 0
    node["input_tokens"] += tokens_in or 0
    node["output_tokens"] += tokens_out or 0
    node["first_at"] = first if node["first_at"] is None else min(node["first_at"], first)
    if model:
        node["models"][model] = node["models"].get(model, 0) + calls


def _finish(node: dict[str, Any]) -> dict[str, Any]:
    """Models most used first; spend unknown (None) when no call of the node was priced; children by start."""
    node["models"] = [model for model, _count in sorted(node["models"].items(), key=lambda item: -item[1])]
    if node["unpriced"] and node["unpriced"] == node["calls"]:
        node["spend_micros"] = None
    node["children"] = sorted((_finish(child) for child in node["children"]), key=lambda c: c["first_at"] or 0)
    if node["first_at"] is None:  # a node known only through its children (a parent outside the range)
        node["first_at"] = min((c["first_at"] for c in node["children"] if c["first_at"] is not None), default=None)
    return node


def _holder(key: str, agents: dict[str, dict[str, Any]], main: dict[str, Any]) -> dict[str, Any]:
    """The node an agent hangs under: its parent, else (no parent named, or parents that loop) the main thread."""
    parent = agents[key]["parent_agent_id"]
    seen = {key}
    ancestor = parent
    while ancestor:
        if ancestor in seen:
            return main  # a loop in what the ledger says: show the agent, under the main thread
        seen.add(ancestor)
        ancestor = agents[ancestor]["parent_agent_id"]
    return agents[parent] if parent else main


def _tree(harness: str, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """One session's rows → its main thread node, with every other agent hung under its parent."""
    main = _node(MAIN, "orchestrator", None)
    agents: dict[str, dict[str, Any]] = {}
    # Calls that belong to an agent but are not its ordinary turns (compaction, background), and the main
    # thread's delegated calls that name no agent.
    turns: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        agent_id, parent, role, kind = row[2], row[3], row[4], row[5]
        owner = MAIN if not agent_id else agent_id
        if owner != MAIN and owner not in agents:
            agents[owner] = _node(owner, "subagent", owner)
        if kind == "compaction":
            turn = "compaction"
        elif role == "background" and kind != "fork":
            turn = "background"
        elif owner == MAIN and (role == "subagent" or kind == "fork"):
            # Delegated calls that name no agent (deepagents, Claude Code without the agent header): one node.
            turn = "fork" if kind == "fork" else "subagent"
        else:
            turn = ""
        if turn:
            node = turns.get((owner, turn))
            if node is None:
                node = turns[(owner, turn)] = _node(f"{owner}/{turn}", turn, agent_id or None)
            _add(node, row)
            continue
        node = main if owner == MAIN else agents[owner]
        if kind == "fork":
            node["kind"] = "fork"
        if parent and owner != MAIN:
            node["parent_agent_id"] = parent
        _add(node, row)
    for agent in list(agents.values()):
        parent = agent["parent_agent_id"]
        if parent and parent not in agents:
            # A parent seen only through its child (its own calls are outside the range): still a node.
            agents[parent] = _node(parent, "subagent", parent)
    for key, agent in agents.items():
        _holder(key, agents, main)["children"].append(agent)
    for (owner, _label), node in turns.items():
        (main if owner == MAIN else agents[owner])["children"].append(node)
    _finish(main)
    return {"harness": harness, "agents": main}


def agent_trees(
    connection: sqlite3.Connection,
    since: float | None = None,
    until: float | None = None,
    session_id: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """The agent tree of each session with calls in [since, until) (or just `session_id`), newest first."""
    where, params = where_clause(since, until, {"session_id": session_id} if session_id else None)
    where = f"{where} AND session_id IS NOT NULL" if where else "WHERE session_id IS NOT NULL"
    by_session: dict[str, list[tuple[Any, ...]]] = {}
    harness_of: dict[str, str] = {}
    for row in connection.execute(_SQL.format(where=where), params):
        by_session.setdefault(row[0], []).append(row)
        harness_of[row[0]] = min(harness_of.get(row[0], row[1]), row[1])  # as `queries.sessions` names it
    trees = []
    for session, rows in by_session.items():
        tree = _tree(harness_of[session], rows)
        tree["session_id"] = session
        tree["last_at"] = max(row[15] for row in rows)
        trees.append(tree)
    trees.sort(key=lambda tree: -tree["last_at"])
    return trees[:limit]


def walk(node: dict[str, Any], depth: int = 0) -> list[tuple[int, dict[str, Any]]]:
    """Every node of a tree with its depth, parents before children (what a text or TUI tree draws)."""
    found = [(depth, node)]
    for child in node["children"]:
        found.extend(walk(child, depth + 1))
    return found


def label(node: dict[str, Any]) -> str:
    """How a node is named in a tree: its kind, and the agent id's first 8 characters."""
    agent, kind = node["agent_id"], node["kind"]
    if kind in ("subagent", "fork"):
        return f"{kind} {agent[:8]}" if agent else f"{kind}s (no agent id)"
    return str(kind)
