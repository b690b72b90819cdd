"""Budget state survives a restart (it comes from the ledger), and parallel calls overshoot a cap by at most
the documented bound (in-flight calls count by their estimate)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from switch.budgets.book import BYTES_PER_TOKEN, TYPICAL_OUTPUT_TOKENS
from tests.budgets.conftest import PRICE, BudgetProxy, claude_code_call
from tests.fake_upstream import FakeChatUpstream, Reply
from tests.servers import serve, wait_until

CAP = """
[[budgets]]
scope = "total"
period = "month"
limit_usd = {limit}
"""


def _ledger_spend(home: Path) -> int:
    connection = sqlite3.connect(home / "ledger.db")
    try:
        return int(connection.execute("SELECT SUM(cost_micros) FROM calls").fetchone()[0])
    finally:
        connection.close()


def _settled(proxy: BudgetProxy, home: Path) -> None:
    """Wait until every call is priced: no in-flight estimate is held against the budget any more."""
    proxy.rows()

    def spent() -> int:
        (state,) = httpx.get(proxy.url + "/healthz", timeout=5).json()["budgets"]
        return int(state["spent_micros"])

    wait_until(lambda: spent() == _ledger_spend(home), what="the in-flight estimates to be released")


def test_a_restarted_proxy_starts_from_the_periods_spend_in_the_ledger(
    budget_proxy: Callable[..., BudgetProxy], isolated_home: Path
) -> None:
    first = budget_proxy(CAP.format(limit=4.0))
    for _ in range(2):
        # One at a time: an unpriced call's estimate (its prompt at the listed price) counts against the cap.
        claude_code_call(first.url)
        _settled(first, isolated_home)
    assert [row["cost_micros"] for row in first.rows()] == [1_500_000, 1_500_000]
    first.recorder.close()

    second = budget_proxy(CAP.format(limit=4.0))
    (state,) = httpx.get(second.url + "/healthz", timeout=5).json()["budgets"]
    assert state["spent_micros"] == _ledger_spend(isolated_home) == 3_000_000
    claude_code_call(second.url)  # $3.00 of $4.00: still allowed; this one makes it $4.50
    _settled(second, isolated_home)
    with pytest.raises(anthropic.PermissionDeniedError) as caught:
        claude_code_call(second.url)
    second.proxy.extra["blocked"] = 1
    assert "$4.50 of $4.00" in caught.value.message
    assert [row["budget_action"] for row in second.rows()] == [None, None, None, "block"]


class HeldUpstream(FakeChatUpstream):
    """Answers nothing until released, so every admitted call is in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    async def _play(self, reply: Reply, send: Any, gone: asyncio.Event | None = None) -> None:
        while not self.release.is_set():  # held by the test, which releases it once every call arrived
            await asyncio.sleep(0.005)
        await super()._play(reply, send, gone)


@pytest.mark.parametrize("seed_usd", [0.01, 0.0], ids=["prices-learned-from-the-ledger", "fresh-ledger"])
def test_parallel_calls_overshoot_a_cap_by_at_most_the_documented_bound(
    budget_proxy: Callable[..., BudgetProxy], isolated_home: Path, seed_usd: float
) -> None:
    held = HeldUpstream()
    with serve(held) as url:
        # A cent of earlier spend: its rows' prices are what estimates start from. A fresh ledger has no
        # rows: the estimates come from the configured price of the target (before: 0, all 20 let through).
        running = budget_proxy(CAP.format(limit=5.0), seed_usd=seed_usd, upstream=(held, url + "/v1"))
        blocked = 0
        lock = threading.Lock()

        def call(number: int) -> str:
            nonlocal blocked
            client = anthropic.Anthropic(base_url=running.url, api_key="sk-ant-fake", max_retries=0)
            try:
                message = client.messages.create(
                    model="claude-opus-5-5", max_tokens=50, messages=[{"role": "user", "content": f"call {number}"}]
                )
            except anthropic.PermissionDeniedError:
                with lock:
                    blocked += 1
                return "blocked"
            return "served" if message.content else "empty"

        calls = 20
        with ThreadPoolExecutor(calls) as pool:
            futures = [pool.submit(call, number) for number in range(calls)]
            wait_until(lambda: len(held.received) + blocked == calls, what="every call to arrive or be blocked")
            held.release.set()
            outcomes = [future.result(timeout=30) for future in futures]
        running.proxy.extra["blocked"] = blocked
        rows = running.rows()[1 if seed_usd else 0 :]
    served = [row for row in rows if row["budget_action"] is None]
    limit = 5_000_000
    estimates = [
        round(row["request_bytes"] / BYTES_PER_TOKEN * PRICE + min(50, TYPICAL_OUTPUT_TOKENS) * PRICE) for row in served
    ]
    beyond = sum(max(0, row["cost_micros"] - estimate) for row, estimate in zip(served, estimates, strict=True))
    total = _ledger_spend(isolated_home)
    # The README's bound: the last admitted call's estimate plus what the calls in flight cost beyond theirs.
    assert total <= limit + max(estimates) + beyond, (total, estimates, beyond)
    assert total > limit  # the cap was crossed, by parallel calls, not avoided
    assert outcomes.count("served") == len(served) and 0 < len(served) < calls


def test_raising_the_limit_in_config_toml_unblocks_the_running_proxy(
    fake_chat: tuple[FakeChatUpstream, str], isolated_home: Path
) -> None:
    from switch.config import load_settings
    from tests.budgets.conftest import CONFIG, seed_spend
    from tests.conftest import FAKE_BASETEN_KEY
    from tests.servers import free_port, serve_process

    _fake, url = fake_chat
    port = free_port()
    config = isolated_home / "config.toml"

    def configure(limit: float) -> None:
        text = CONFIG.format(url=url, price=PRICE, budgets=CAP.format(limit=limit))
        config.write_text(f"[server]\nport = {port}\n" + text, encoding="utf-8")

    configure(1.0)
    seed_spend(isolated_home, load_settings(), 1.5)
    ask = {"model": "claude-opus-5-5", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="sk-ant-fake", max_retries=0)
    with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}):
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            client.messages.create(**ask)  # type: ignore[call-overload]
        assert "$1.50 of $1.00" in caught.value.message
        configure(5.0)  # what the block message tells the user to do

        def served() -> bool:
            try:
                client.messages.create(**ask)  # type: ignore[call-overload]
            except anthropic.PermissionDeniedError:
                return False
            return True

        wait_until(served, what="the running proxy to apply the raised limit")
