"""Claude Code's forks, compaction turns and nested agents: classified from the hint headers when it sends
them (`CLAUDE_CODE_GATEWAY_HINT_HEADERS=1`), else from the body, on real captures of Claude Code 2.1.332."""

from __future__ import annotations

import copy
import tracemalloc
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from switch.routing.classify import classify
from switch.routing.forks import ForkMatcher
from tests.conftest import load_capture


def _call(name: str) -> tuple[dict[str, str], dict[str, Any]]:
    capture = load_capture(name)
    return {k.lower(): v for k, v in capture["headers"]}, capture["body"]


def _session(folder: str, count: int, matcher: ForkMatcher | None = None) -> list[Any]:
    """Each call of a captured session classified in order, as the relay does."""
    matcher = matcher or ForkMatcher()
    infos = []
    for seq in range(1, count + 1):
        headers, body = _call(f"{folder}/{seq:02d}_POST_v1_messages.json")
        infos.append(matcher.refine(classify(headers, body), body))
    return infos


def _without_hints(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k not in HINTS}


HINTS = {
    "x-claude-code-request-class",
    "x-claude-1p-request-class",
    "x-claude-code-agent-type",
    "x-claude-code-compaction",
    "x-claude-code-prompt-id",
    "x-claude-code-prev-tool-durations",
}


def test_hinted_fork_is_a_subagent_of_kind_fork() -> None:
    infos = _session("claude_code_fork_hinted", 4)
    assert [(i.role, i.kind) for i in infos] == [
        ("orchestrator", None),
        ("subagent", "fork"),
        ("orchestrator", None),
        ("orchestrator", None),
    ]
    assert infos[1].agent_id and infos[1].session_id == infos[0].session_id


def test_fork_hint_alone_needs_no_memory_of_the_orchestrator() -> None:
    headers, body = _call("claude_code_fork_hinted/02_POST_v1_messages.json")
    assert ForkMatcher().refine(classify(headers, body), body).kind == "fork"


def test_unhinted_fork_is_matched_against_its_sessions_orchestrator() -> None:
    infos = _session("claude_code_fork", 4)
    assert [(i.role, i.kind) for i in infos] == [
        ("orchestrator", None),
        ("subagent", "fork"),
        ("orchestrator", None),
        ("orchestrator", None),
    ]


def test_unhinted_fork_is_not_a_fork_without_the_orchestrator_or_with_another_prompt() -> None:
    headers, body = _call("claude_code_fork/02_POST_v1_messages.json")
    # No orchestrator call of this session seen (a proxy restarted mid-session): an ordinary subagent.
    assert ForkMatcher().refine(classify(headers, body), body).kind is None
    matcher = ForkMatcher()
    main_headers, main_body = _call("claude_code_fork/01_POST_v1_messages.json")
    matcher.refine(classify(main_headers, main_body), main_body)
    other_tools = copy.deepcopy(body)
    other_tools["tools"] = other_tools["tools"][:-1]
    assert matcher.refine(classify(headers, other_tools), other_tools).kind is None
    other_system = copy.deepcopy(body)
    other_system["system"][1]["text"] = "You are a different agent."
    assert matcher.refine(classify(headers, other_system), other_system).kind is None
    unmarked = copy.deepcopy(body)
    unmarked["messages"][-1]["content"] = [b for b in unmarked["messages"][-1]["content"] if b.get("type") != "text"]
    assert matcher.refine(classify(headers, unmarked), unmarked).kind is None
    # Another session's orchestrator proves nothing.
    elsewhere = {**headers, "x-claude-code-session-id": "another-session"}
    assert matcher.refine(classify(elsewhere, body), body).kind is None
    assert matcher.refine(classify(headers, body), body).kind == "fork"


def test_a_forks_later_turns_stay_forks_without_the_marker_at_the_end() -> None:
    matcher = ForkMatcher()
    _session("claude_code_fork", 2, matcher)
    headers, body = _call("claude_code_fork/02_POST_v1_messages.json")
    later = copy.deepcopy(body)
    later["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    assert matcher.refine(classify(headers, later), later).kind == "fork"
    # Another agent of the session with the same body shape but no marker is not one.
    other = {**headers, "x-claude-code-agent-id": "someone-else"}
    assert matcher.refine(classify(other, later), later).kind is None


def test_general_purpose_subagent_is_not_a_fork() -> None:
    infos = _session("claude_code_subagent", 4)
    assert [i.kind for i in infos] == [None] * 4
    infos = _session("claude_code_nested_subagent", 6)
    assert [i.kind for i in infos] == [None] * 6


def test_compaction_from_the_hint_header_and_from_the_prompt() -> None:
    hinted = _session("claude_code_compaction_hinted", 2)
    unhinted = _session("claude_code_compaction", 2)
    for infos in (hinted, unhinted):
        assert [(i.role, i.kind) for i in infos] == [("orchestrator", None), ("orchestrator", "compaction")]
    headers, body = _call("claude_code_compaction_hinted/02_POST_v1_messages.json")
    assert headers["x-claude-code-compaction"] == "manual"
    # The header alone says it, whatever the prompt.
    body = {**body, "messages": [{"role": "user", "content": "hello"}]}
    assert classify(headers, body).kind == "compaction"
    assert classify({**headers, "x-claude-code-request-class": "main"}, body).kind == "compaction"


def test_hint_headers_win_over_the_body() -> None:
    """With the hint headers on, a turn they call `main` is the main thread's even if it quotes the prompt."""
    headers, body = _call("claude_code_compaction/02_POST_v1_messages.json")
    assert classify(headers, body).kind == "compaction"
    hinted = {**headers, "x-claude-code-request-class": "main"}
    assert classify(hinted, body).kind is None and classify(hinted, body).role == "orchestrator"
    # A subagent named by the hint header, even without the agent id header.
    sub_headers, sub_body = _call("claude_code_subagent/01_POST_v1_messages.json")
    assert classify({**sub_headers, "x-claude-code-request-class": "subagent"}, sub_body).role == "subagent"


def test_compaction_prompt_must_open_the_last_user_turn() -> None:
    headers, body = _call("claude_code_compaction/02_POST_v1_messages.json")
    prompt = body["messages"][-1]["content"]
    quoted = {**body, "messages": [*body["messages"][:-1], {"role": "user", "content": "please read: " + prompt}]}
    assert classify(headers, quoted).kind is None
    no_summary = {**body, "messages": [*body["messages"][:-1], {"role": "user", "content": prompt[:100]}]}
    assert classify(headers, no_summary).kind is None


def test_nested_subagent_names_its_parent() -> None:
    infos = _session("claude_code_nested_subagent", 6)
    child = infos[2]
    nested = infos[3]
    assert child.role == nested.role == "subagent"
    assert child.parent_agent_id is None and child.agent_id
    assert nested.parent_agent_id == child.agent_id and nested.agent_id != child.agent_id
    assert infos[4].agent_id == child.agent_id


def test_other_harnesses_hints_are_not_read() -> None:
    headers = {"originator": "codex_exec", "x-claude-code-agent-type": "fork", "x-claude-code-parent-agent-id": "a"}
    info = classify(headers, {"model": "gpt-5.5", "input": "hi"})
    assert info.harness == "codex" and info.kind is None and info.parent_agent_id is None


_text = st.text(max_size=40)
_header_values = st.one_of(st.none(), st.sampled_from(["main", "subagent", "compaction", "fork", ""]), _text)


@given(
    request_class=_header_values,
    agent_type=_header_values,
    compaction=_header_values,
    parent=_header_values,
    body=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), _text),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
        max_leaves=20,
    ),
    last=st.one_of(_text, st.just("CRITICAL: Respond with TEXT ONLY <summary>"), st.just("<fork-boilerplate> go")),
)
def test_any_hints_and_body_classify_without_error(
    request_class: str | None, agent_type: str | None, compaction: str | None, parent: str | None, body: Any, last: str
) -> None:
    headers = {"x-claude-code-session-id": "s"}
    for name, value in (
        ("x-claude-code-request-class", request_class),
        ("x-claude-code-agent-type", agent_type),
        ("x-claude-code-compaction", compaction),
        ("x-claude-code-parent-agent-id", parent),
    ):
        if value is not None:
            headers[name] = value
    matcher = ForkMatcher()
    for candidate in (body, {"messages": [{"role": "user", "content": last}], "system": body, "tools": body}):
        info = matcher.refine(classify(headers, candidate), candidate)
        assert info.kind in (None, "fork", "compaction")
        assert info.parent_agent_id == (parent or None)
        if agent_type == "fork":
            assert info.kind == "fork" and info.role == "subagent"


def test_the_fork_memory_keeps_each_sessions_prompt_and_tool_names_not_its_tool_schemas() -> None:
    # Each session's entry must cost about its system text, not the parsed tool schemas (several times
    # their JSON): 64 Claude Code sessions would otherwise hold tens of MB of a long-running proxy.
    headers, body = _call("claude_code_fork/01_POST_v1_messages.json")
    raw = orjson.dumps(body)
    system_bytes = sum(len(block["text"]) for block in body["system"])
    sessions = 64
    matcher = ForkMatcher(sessions=sessions)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for number in range(sessions):
            parsed = orjson.loads(raw)
            session_headers = {**headers, "x-claude-code-session-id": f"session-{number}"}
            matcher.refine(classify(session_headers, parsed), parsed)
            del parsed
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_session = (kept - before) / sessions
    assert per_session < system_bytes + 4096, (per_session, system_bytes, len(raw))
    # The memory still recognises the fork of the last session it was told about.
    fork_headers, fork_body = _call("claude_code_fork/02_POST_v1_messages.json")
    last = {**fork_headers, "x-claude-code-session-id": f"session-{sessions - 1}"}
    assert matcher.refine(classify(last, fork_body), fork_body).kind == "fork"
