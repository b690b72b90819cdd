"""Each budget action at its threshold, with real SDK clients sending captured harness requests."""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import httpx
import openai
import pytest

from tests.budgets.conftest import BudgetProxy, claude_code_call, codex_call

LADDER = """
[[budgets]]
name = "subagents"
scope = "role:subagent"
period = "month"
limit_usd = 10.0
actions = [{ at = 0.5, do = "warn" }, { at = 0.7, do = "effort", effort = "low" },
           { at = 0.9, do = "preset", preset = "cheap" }, { at = 1.0, do = "block" }]
"""


@pytest.mark.parametrize(
    ("spent", "action"),
    [(3.0, None), (5.5, "warn"), (7.5, "effort"), (9.5, "preset"), (10.5, "block")],
)
def test_claude_code_subagent_meets_each_action_at_its_threshold(
    budget_proxy: Callable[..., BudgetProxy], spent: float, action: str | None
) -> None:
    running = budget_proxy(LADDER, seed_usd=spent)
    if action == "block":
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            claude_code_call(running.url, max_retries=3)
        running.proxy.extra["blocked"] = 1
        message = caught.value.message
        # The harness shows this text: which budget, what was spent, how to raise it.
        assert "switch budget 'subagents'" in message and "$10.50 of $10.00 spent this month" in message, message
        assert "limit_usd" in message and "config.toml" in message
        assert caught.value.response.headers["x-should-retry"] == "false"
        assert running.upstream.received == []  # blocked before any upstream, and the SDK did not retry
    else:
        assert claude_code_call(running.url) == "Hello from the fake upstream."
        sent = running.upstream.received[-1].json
        assert sent["reasoning_effort"] == ("low" if action in ("effort", "preset") else "high")
        assert sent["model"] == ("cheap-model" if action == "preset" else "moonshotai/Kimi-K3")
    rows = running.rows()
    assert len(rows) == 2
    call = rows[-1]
    assert (call["role"], call["budget_action"]) == ("subagent", action)
    assert call["budget"] == ("subagents" if action else None)
    assert call["outcome"] == ("rejected" if action == "block" else "completed")
    assert call["preset"] == ("cheap" if action == "preset" else "defaults")


def test_a_budget_on_another_role_leaves_the_call_alone(budget_proxy: Callable[..., BudgetProxy]) -> None:
    running = budget_proxy(LADDER, seed_usd=20.0, role="orchestrator")
    assert claude_code_call(running.url) == "Hello from the fake upstream."
    assert running.rows()[-1]["budget_action"] is None


CODEX_BLOCK = """
[[budgets]]
scope = "harness:codex"
period = "month"
limit_usd = 2.0
actions = [{ at = 0.5, do = "warn" }, { at = 1.0, do = "block" }]
"""


def test_codex_block_reaches_the_openai_sdk_as_a_final_error(budget_proxy: Callable[..., BudgetProxy]) -> None:
    running = budget_proxy(CODEX_BLOCK, seed_usd=1.2, harness="codex", role="orchestrator")
    answer = codex_call(running.url)
    assert answer.output_text == "Hello from the fake upstream."
    assert running.rows()[-1]["budget_action"] == "warn"
    # That call cost $1.50: $2.70 of $2.00 now, so the next one is refused, in the Responses error format.
    with pytest.raises(openai.PermissionDeniedError) as caught:
        codex_call(running.url, max_retries=3)
    running.proxy.extra["blocked"] = 1
    assert "switch budget 'harness:codex/month'" in caught.value.message
    assert "$2.70 of $2.00 spent this month" in caught.value.message
    assert isinstance(caught.value.body, dict) and caught.value.body.get("type") == "permission_error"
    rows = running.rows()
    assert [row["budget_action"] for row in rows[1:]] == ["warn", "block"]
    assert len(running.upstream.received) == 1


TOTAL = """
[[budgets]]
scope = "total"
period = "month"
limit_usd = 1.0
"""


def test_chat_completions_block_names_the_budget_in_the_chat_error_body(
    budget_proxy: Callable[..., BudgetProxy],
) -> None:
    running = budget_proxy(TOTAL, seed_usd=1.0)
    response = httpx.post(
        running.url + "/v1/chat/completions",
        json={"model": "x", "messages": [{"role": "user", "content": "hi"}]},
        timeout=10,
    )
    running.proxy.extra["blocked"] = 1
    assert response.status_code == 403
    error = response.json()["error"]
    assert "switch budget 'total/month'" in error["message"] and "$1.00 of $1.00" in error["message"]
    assert running.rows()[-1]["budget_action"] == "block"


@pytest.mark.parametrize(("model", "blocked"), [("baseten/moonshotai/Kimi-K3", True), ("baseten/cheap-model", False)])
def test_a_model_budget_acts_on_calls_routed_to_that_model(
    budget_proxy: Callable[..., BudgetProxy], model: str, blocked: bool
) -> None:
    budgets = f'[[budgets]]\nscope = "model:{model}"\nperiod = "month"\nlimit_usd = 1.0\n'
    running = budget_proxy(budgets, seed_usd=1.5)
    if blocked:
        with pytest.raises(anthropic.PermissionDeniedError):
            claude_code_call(running.url)
        running.proxy.extra["blocked"] = 1
    else:
        assert claude_code_call(running.url) == "Hello from the fake upstream."
    assert running.rows()[-1]["budget_action"] == ("block" if blocked else None)


def test_a_session_budget_caps_each_session_on_its_own(budget_proxy: Callable[..., BudgetProxy]) -> None:
    budgets = '[[budgets]]\nscope = "session"\nperiod = "month"\nlimit_usd = 1.0\n'
    spent_session = "ce03c1ea-a4d1-4c5e-be14-5cdb7fb58fb3"  # the session of the subagent capture
    running = budget_proxy(budgets, seed_usd=1.5, session_id=spent_session)
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        claude_code_call(running.url)
    running.proxy.extra["blocked"] = 1
    assert "switch budget 'session/month'" in caught.value.message and "$1.50 of $1.00" in caught.value.message
    # Another session of the same harness has spent nothing: served.
    assert (
        claude_code_call(running.url, "claude_code_plain/01_POST_v1_messages.json") == "Hello from the fake upstream."
    )
    rows = running.rows()
    assert [(row["session_id"], row["budget_action"]) for row in rows[1:]] == [
        (spent_session, "block"),
        ("b92b615c-8b6c-43de-9583-f9649bf7ba82", None),
    ]
