"""Each session as a tree of agents, read from a real ledger: `switch.ledger.agents` and `spend --by agent`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.ledger.agents import agent_trees, label, walk
from tests.commands import run_switch
from tests.ledger_seed import FROZEN_NOW, kimi_call
from tests.ui.test_honest_numbers import record

KIMI, GLM = "moonshotai/Kimi-K3", "zai-org/GLM-5.2"


def session_calls(session: str = "s1", start: float = FROZEN_NOW) -> list[Any]:
    """A Claude Code session: main thread, a fork, a subagent that spawns a nested one, compaction, background."""
    at = iter(range(100))

    def call(**fields: Any) -> Any:
        return kimi_call(start + next(at), session_id=session, input_tokens=1000, output_tokens=100, **fields)

    return [
        call(role="orchestrator", agent_id=None),
        call(role="subagent", agent_id="fork-1", request_kind="fork"),
        call(role="orchestrator", agent_id=None),
        call(role="subagent", agent_id="child-1", served_model=GLM),
        call(role="subagent", agent_id="nested-1", parent_agent_id="child-1", served_model=GLM),
        call(role="subagent", agent_id="child-1", served_model=GLM),
        call(role="subagent", agent_id="child-1", request_kind="compaction", served_model=GLM),
        call(role="orchestrator", agent_id=None, request_kind="compaction"),
        call(role="background", agent_id=None, served_model=GLM),
    ]


def trees(path: Path, **kwargs: Any) -> list[dict[str, Any]]:
    connection = sqlite3.connect(path)
    try:
        return agent_trees(connection, **kwargs)
    finally:
        connection.close()


def shape(node: dict[str, Any]) -> Any:
    return (label(node), node["calls"], node["models"], [shape(child) for child in node["children"]])


def test_a_session_is_drawn_as_its_tree_of_agents(isolated_home: Path) -> None:
    ledger = isolated_home / "ledger.db"
    record(ledger, *session_calls())
    (tree,) = trees(ledger)
    assert tree["session_id"] == "s1" and tree["harness"] == "claude-code"
    assert shape(tree["agents"]) == (
        "orchestrator",
        2,
        [KIMI],
        [
            ("fork fork-1", 1, [KIMI], []),
            ("subagent child-1", 2, [GLM], [("subagent nested-1", 1, [GLM], []), ("compaction", 1, [GLM], [])]),
            ("compaction", 1, [KIMI], []),
            ("background", 1, [GLM], []),
        ],
    )
    nodes = [node for _depth, node in walk(tree["agents"])]
    assert sum(node["calls"] for node in nodes) == 9
    connection = sqlite3.connect(ledger)
    cost, native = connection.execute("SELECT SUM(cost_micros), SUM(native_cost_micros) FROM calls").fetchone()
    connection.close()
    assert sum(node["spend_micros"] for node in nodes) == cost > 0
    assert sum(node["native_micros"] for node in nodes) == native > cost
    nested = next(node for node in nodes if node["agent_id"] == "nested-1")
    assert nested["parent_agent_id"] == "child-1"


def test_unpriced_agents_stay_unknown_and_a_parent_outside_the_range_still_holds_its_child(
    isolated_home: Path,
) -> None:
    ledger = isolated_home / "ledger.db"
    record(
        ledger,
        kimi_call(FROZEN_NOW, session_id="s2", role="subagent", agent_id="old-parent"),
        kimi_call(FROZEN_NOW + 100, session_id="s2", role="orchestrator"),
        kimi_call(
            FROZEN_NOW + 101, session_id="s2", agent_id="kid", parent_agent_id="old-parent", served_model="nobody/X-1"
        ),
    )
    (tree,) = trees(ledger, since=FROZEN_NOW + 50)
    assert shape(tree["agents"]) == (
        "orchestrator",
        1,
        [KIMI],
        [("subagent old-pare", 0, [], [("subagent kid", 1, ["nobody/X-1"], [])])],
    )
    kid = tree["agents"]["children"][0]["children"][0]
    assert kid["spend_micros"] is None and kid["unpriced"] == 1


def test_delegated_calls_without_an_agent_id_are_one_node_and_harness_is_named_as_in_sessions(
    isolated_home: Path,
) -> None:
    ledger = isolated_home / "ledger.db"
    record(
        ledger,
        kimi_call(FROZEN_NOW, session_id="s3", harness="langchain", role="orchestrator"),
        kimi_call(FROZEN_NOW + 1, session_id="s3", harness="langchain", role="subagent"),
        kimi_call(FROZEN_NOW + 2, session_id="s3", harness="langchain", role="subagent"),
        kimi_call(FROZEN_NOW + 3, session_id="s3", harness="codex", role="subagent", agent_id="t1"),
    )
    (tree,) = trees(ledger)
    assert tree["harness"] == "codex"  # the same name `queries.sessions` gives the session (MIN)
    assert shape(tree["agents"]) == (
        "orchestrator",
        1,
        [KIMI],
        [("subagents (no agent id)", 2, [KIMI], []), ("subagent t1", 1, [KIMI], [])],
    )


def test_spend_by_agent_prints_the_tree_and_its_json(isolated_home: Path) -> None:
    ledger = isolated_home / "ledger.db"
    record(ledger, *session_calls("older", FROZEN_NOW - 1000), *session_calls("newer"))
    shown = run_switch("spend", "--by", "agent")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1].startswith("session newer (claude-code)")  # newest session first
    body = lines[2:9]
    names = [line[:34].strip() for line in body]
    assert names == [
        "orchestrator",
        "└ fork fork-1",
        "└ subagent child-1",
        "└ subagent nested-1",
        "└ compaction",
        "└ compaction",
        "└ background",
    ]
    assert [len(line) - len(line.lstrip()) for line in body] == [0, 2, 2, 4, 4, 2, 2]
    assert lines[9].startswith("session older")
    assert "moonshotai/Kimi-K3" in body[0] and "zai-org/GLM-5.2" in body[2]
    report = json.loads(run_switch("spend", "--by", "agent", "--json").stdout)
    assert [s["session_id"] for s in report["sessions"]] == ["newer", "older"]
    assert report["sessions"][0]["agents"]["children"][1]["children"][0]["agent_id"] == "nested-1"
    refused = run_switch("spend", "--by", "agents")
    assert refused.returncode == 2 and "agent" in refused.stderr and "Traceback" not in refused.stderr


_ids = st.sampled_from(["a", "b", "c", "d", ""])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(
        st.tuples(
            _ids,
            _ids,
            st.sampled_from(["orchestrator", "subagent", "background"]),
            st.sampled_from([None, "fork", "compaction", "review"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_every_call_lands_in_exactly_one_node_whatever_the_parents_say(calls: list[Any]) -> None:
    """Parents that loop, name themselves or are missing never lose a call or recurse forever."""
    from switch.ledger.agents import _tree

    rows = [
        ("s", "claude-code", agent, parent or None, role, kind or "", "m", 1, 5, 9, 0, 10, 1, float(n), 0, float(n))
        for n, (agent, parent, role, kind) in enumerate(calls)
    ]
    tree = _tree("claude-code", rows)
    nodes = walk(tree["agents"])
    assert sum(node["calls"] for _depth, node in nodes) == len(calls)
    keys = [node["key"] for _depth, node in nodes]
    assert len(keys) == len(set(keys))
