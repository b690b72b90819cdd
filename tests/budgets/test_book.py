"""The in-memory book: periods roll over at local midnight (and week and month starts); holds are released once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.budgets.book import BudgetBook, cap_effort
from switch.budgets.periods import period_bounds
from switch.config_budgets import EFFORT_ORDER, Budget
from switch.config_schema import validate
from switch.protocols.ir import Reasoning

BLOCK_AT_ONE_DOLLAR = validate(Budget, {"scope": "total", "period": "day", "limit_usd": 1.0})


def _row(started_at: float, cost: int, **fields: Any) -> dict[str, Any]:
    return {
        "started_at": started_at,
        "harness": "claude-code",
        "role": "subagent",
        "session_id": None,
        "provider": "baseten",
        "served_model": "moonshotai/Kimi-K3",
        "cost_micros": cost,
        "price_input": 1.0,
        "price_output": 2.0,
        **fields,
    }


def test_a_day_budget_starts_again_at_local_midnight() -> None:
    midnight = period_bounds("day", time.time())[1]
    now = [midnight - 60.0]
    book = BudgetBook([BLOCK_AT_ONE_DOLLAR], clock=lambda: now[0])
    book.observe_row(_row(midnight - 90, 1_200_000, budget_hold=0))
    assert book.check("claude-code", "subagent", None, "baseten/moonshotai/Kimi-K3") is not None
    now[0] = midnight + 1
    assert book.check("claude-code", "subagent", None, "baseten/moonshotai/Kimi-K3") is None
    book.observe_row(_row(midnight - 30, 5_000_000, budget_hold=0))  # recorded late: it belongs to yesterday
    assert book.report()[0]["spent_micros"] == 0
    book.observe_row(_row(midnight + 2, 1_000_000, budget_hold=0))
    assert book.report()[0]["spent_micros"] == 1_000_000


@pytest.mark.parametrize("period", ["day", "week", "month"])
def test_periods_start_at_local_midnight_and_follow_each_other(period: str) -> None:
    start, end = period_bounds(period, time.time())
    assert time.localtime(start)[3:6] == (0, 0, 0) and time.localtime(end)[3:6] == (0, 0, 0)
    assert period_bounds(period, end)[0] == end and period_bounds(period, end - 1) == (start, end)
    if period == "week":
        assert time.localtime(start).tm_wday == 0
    if period == "month":
        assert time.localtime(start).tm_mday == 1


def test_a_hold_counts_until_its_record_is_priced_and_only_once() -> None:
    book = BudgetBook([BLOCK_AT_ONE_DOLLAR])
    book.observe_row(_row(time.time(), 100, budget_hold=0))  # learns the price: 1 and 2 micro-USD per token
    amount = book.estimate("baseten/moonshotai/Kimi-K3", 4000, 100)
    assert amount == 1000 * 1 + 100 * 2
    hold = book.hold("claude-code", "subagent", None, "baseten/moonshotai/Kimi-K3", 999_900)
    assert book.check("claude-code", "subagent", None, "baseten/moonshotai/Kimi-K3") is not None
    for _ in range(2):
        book.observe_row(_row(time.time(), 0, budget_hold=hold))
    assert book.report()[0]["spent_micros"] == 100


@given(st.sampled_from(EFFORT_ORDER), st.sampled_from(EFFORT_ORDER), st.none() | st.integers(1, 10_000))
def test_the_effort_cap_never_raises_effort(asked: str, cap: str, budget_tokens: int | None) -> None:
    capped = cap_effort(Reasoning(True, asked, budget_tokens), cap)  # type: ignore[arg-type]
    assert EFFORT_ORDER.index(capped.effort) == min(EFFORT_ORDER.index(asked), EFFORT_ORDER.index(cap))
    assert cap_effort(Reasoning(False), cap) == Reasoning(False) and cap_effort(None, cap) is None


class _DeletionsBy(dict[str, int]):
    """A dict that remembers which thread deleted from it."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted_by: list[int] = []

    def __delitem__(self, key: str) -> None:
        self.deleted_by.append(threading.get_ident())
        super().__delitem__(key)


def test_a_rollover_seen_by_the_writer_leaves_the_holds_to_the_event_loop() -> None:
    midnight = period_bounds("day", time.time())[1]
    now = [midnight - 60.0]
    per_session = validate(Budget, {"scope": "session", "period": "day", "limit_usd": 1.0})
    book = BudgetBook([per_session], clock=lambda: now[0])
    (tally,) = book.tallies
    tally.session_reserved = reserved = _DeletionsBy()
    hold = book.hold("claude-code", "subagent", "s1", "baseten/moonshotai/Kimi-K3", 500)

    def writer() -> None:
        # The hold is released, then a row of the next day rolls the period over, all on the writer thread.
        book.observe_row(_row(midnight - 30, 100, session_id="s1", budget_hold=hold))
        book.observe_row(_row(midnight + 5, 100, session_id="s2"))

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    assert reserved.deleted_by == [] and "s1" in reserved  # the writer never touches what the loop writes
    now[0] = midnight + 10
    book.check("claude-code", "subagent", "s3", "baseten/moonshotai/Kimi-K3")
    assert reserved.deleted_by == [threading.get_ident()] and "s1" not in reserved
    assert book.report()[0]["spent_micros"] == 100


def test_on_a_fresh_ledger_a_model_with_no_listed_price_is_estimated_at_the_highest_known_never_zero() -> None:
    from switch.config import load_settings
    from switch.proxy.budget_gate import BudgetGate
    from switch.routing.resolve import resolve_target
    from tests.ledger_seed import pricer_for

    settings = load_settings()
    settings.budgets = [BLOCK_AT_ONE_DOLLAR]
    settings.prices = {"baseten/dear-model": {"input": 50.0, "output": 200.0}}
    pricer = pricer_for(settings)
    gate = BudgetGate.build(settings, "config.toml", None, pricer=pricer)
    assert gate is not None
    book = gate.book
    # The dearest configured price is the floor for any model the book knows no price of.
    assert book.estimate("somewhere/unlisted", 4000, 100) == round(1000 * 50.0 + 100 * 200.0)
    from switch.protocols.ir import Message, Request, TextPart

    request = Request(model="m", system=(), messages=(Message("user", (TextPart("hi"),)),), max_output_tokens=100)
    target = resolve_target(settings, "baseten/moonshotai/Kimi-K3", "anthropic")
    from switch.routing.classify import CallInfo

    info = CallInfo(harness="claude-code", role="subagent", session_id=None, agent_id=None, family=None)
    hold = gate.hold(info, target, request, 4000)
    listed = pricer.table.lookup("baseten", "moonshotai/Kimi-K3")
    assert listed is not None and hold
    prices = listed.per_million()
    assert book.report()[0]["spent_micros"] == round(1000 * prices["input"] + 100 * prices["output"]) > 0
