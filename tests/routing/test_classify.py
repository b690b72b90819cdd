"""Every captured request is classified to the harness and role a user would expect."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.routing.classify import CLASSIFYING_MODEL, classify
from tests.conftest import capture_names, load_capture

SUBAGENT_CALLS = {
    "claude_code_models_env/03_POST_v1_messages.json",
    "claude_code_subagent/03_POST_v1_messages.json",
    "claude_code_fork/02_POST_v1_messages.json",
    "claude_code_fork_hinted/02_POST_v1_messages.json",
    "claude_code_nested_subagent/03_POST_v1_messages.json",
    "claude_code_nested_subagent/04_POST_v1_messages.json",
    "claude_code_nested_subagent/05_POST_v1_messages.json",
    "claude_code_subagent_fg/02_POST_v1_messages.json",
    "claude_code_subagent_haiku/02_POST_v1_messages.json",
    "codex_subagent/03_POST_v1_responses.json",
    "deepagents_code_anthropic_subagent/02_POST_v1_messages.json",
    "deepagents_code_openai_subagent/02_POST_v1_responses.json",
}
HARNESS_BY_FOLDER = {
    "claude_code": "claude-code",
    "codex": "codex",
    "deepagents": "langchain",
    "langchain_anthropic": "langchain",
    # The plain OpenAI SDK inside LangChain sends nothing that names LangChain.
    "langchain_openai": "other",
    "sdk_anthropic": "other",
}


def expected_harness(name: str) -> str:
    return next(h for prefix, h in HARNESS_BY_FOLDER.items() if name.startswith(prefix))


@pytest.mark.parametrize("name", capture_names(""))
def test_capture_is_classified(name: str) -> None:
    capture = load_capture(name)
    headers = {k.lower(): v for k, v in capture["headers"]}
    info = classify(headers, capture["body"])
    assert info.harness == expected_harness(name)
    assert info.role == ("subagent" if name in SUBAGENT_CALLS else "orchestrator")
    if info.harness in ("claude-code", "codex"):
        assert info.session_id
    if name in SUBAGENT_CALLS and info.harness in ("claude-code", "codex"):
        assert info.agent_id


def test_explicit_header_and_alias_win() -> None:
    body = {"model": "claude-opus-5-5", "messages": []}
    assert classify({"x-switch-role": "background"}, body).role == "background"
    assert classify({}, {**body, "model": "switch/subagent"}).role == "subagent"
    assert classify({}, {**body, "model": "claude-switch-background"}).role == "background"


def test_codex_background_calls_and_haiku_models() -> None:
    legacy = classify({"originator": "codex_exec", "x-openai-subagent": "compact"}, {"model": "m"})
    # Older builds' compaction call keeps its background role, and is now marked as a compaction too.
    assert (legacy.role, legacy.kind) == ("background", "compaction")
    assert classify({"originator": "codex_exec", "x-openai-subagent": "review"}, {"model": "m"}).role == "subagent"
    headers = {"x-claude-code-session-id": "s"}
    assert classify(headers, {"model": "claude-haiku-4-5", "messages": []}).role == "background"
    title = {"model": "m", "system": "Generate a concise, sentence-case title (3-7 words)", "messages": []}
    assert classify(headers, title).role == "background"


def test_session_from_metadata_user_id() -> None:
    legacy = {"model": "m", "metadata": {"user_id": "user_abc_account_def_session_1234-5678"}}
    assert classify({}, legacy).session_id == "1234-5678"
    json_form = {"model": "m", "metadata": {"user_id": '{"device_id":"d","session_id":"s-42"}'}}
    assert classify({}, json_form).session_id == "s-42"


DEEPAGENTS_SUBAGENT = {
    "system": "# Deep Agents Code (dcode)\n\nYou are a deep agent, an AI assistant.",
    "messages": [
        {"role": "user", "content": "check the repo"},
        {"role": "user", "content": "[The messages above are a prior conversation you are continuing as the subagent"},
    ],
    "tools": [{"name": "task"}, {"name": "ls"}],
}


@given(suffix=st.text(min_size=1, max_size=40))
def test_switch_model_names_other_than_roles_leave_the_role_to_the_request(suffix: str) -> None:
    # Only `switch/<role>` forces a role; any other `switch/...` name (`switch/auto` among them) is
    # classified like a plain model, so a deepagents subagent keeps its subagent role.
    model = "switch/" + suffix
    info = classify({}, {**DEEPAGENTS_SUBAGENT, "model": model})
    assert info.role == (suffix if suffix in ("orchestrator", "subagent", "background") else "subagent")
    assert info.harness == "langchain"


def test_switch_model_names_mark_an_unnamed_caller_as_langchain_only() -> None:
    plain = {"model": CLASSIFYING_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    assert classify({"user-agent": "OpenAI/Python 2.3.0"}, plain).harness == "langchain"
    assert classify({"user-agent": "OpenAI/Python 2.3.0"}, {**plain, "model": "gpt-5.5"}).harness == "other"
    assert classify({"originator": "codex_exec"}, plain).harness == "codex"


CODEX_HEADERS = {"originator": "codex_exec", "session-id": "s1", "thread-id": "s1"}


def _metadata(**fields: object) -> str:
    return json.dumps({"session_id": "s1", "thread_id": "s1", "agent_name": "/root", **fields})


def test_codex_request_kind_and_parent_thread_come_from_its_turn_metadata() -> None:
    ordinary = classify({**CODEX_HEADERS, "x-codex-turn-metadata": _metadata(request_kind="turn")}, {"model": "m"})
    assert (ordinary.kind, ordinary.parent_agent_id, ordinary.role) == (None, None, "orchestrator")
    compaction = classify(
        {**CODEX_HEADERS, "x-codex-turn-metadata": _metadata(request_kind="compaction")}, {"model": "m"}
    )
    assert (compaction.kind, compaction.role) == ("compaction", "orchestrator")
    # The body's client_metadata carries the same JSON when a header is lost on the way.
    body = {"model": "m", "client_metadata": {"x-codex-turn-metadata": _metadata(request_kind="review")}}
    assert classify(CODEX_HEADERS, body).kind == "review"
    spawned = {
        **CODEX_HEADERS,
        "thread-id": "t2",
        "x-openai-subagent": "collab_spawn",
        "x-codex-turn-metadata": _metadata(thread_id="t2", parent_thread_id="s1", thread_source="subagent"),
    }
    child = classify(spawned, {"model": "m"})
    assert (child.role, child.agent_id, child.parent_agent_id, child.kind) == ("subagent", "t2", "s1", None)
    header_only = classify({**CODEX_HEADERS, "x-codex-parent-thread-id": "p9"}, {"model": "m"})
    assert header_only.parent_agent_id == "p9"
    # Only Codex's requests are read this way.
    other = classify({"x-codex-turn-metadata": _metadata(request_kind="compaction")}, {"model": "m", "messages": []})
    assert other.harness == "other" and other.kind is None


@given(
    metadata=st.one_of(
        st.text(max_size=60),
        st.dictionaries(
            st.sampled_from(["request_kind", "parent_thread_id", "thread_source"]),
            st.one_of(st.text(max_size=100), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=3)),
        ).map(json.dumps),
    ),
    client=st.one_of(st.none(), st.text(max_size=10), st.dictionaries(st.text(max_size=30), st.text(max_size=30))),
)
def test_codex_metadata_of_any_shape_never_breaks_classification(metadata: str, client: object) -> None:
    info = classify({**CODEX_HEADERS, "x-codex-turn-metadata": metadata}, {"model": "m", "client_metadata": client})
    assert info.harness == "codex"
    for recorded in (info.kind, info.parent_agent_id):
        assert recorded is None or (isinstance(recorded, str) and 0 < len(recorded) <= 80 and "\n" not in recorded)
