"""A proxy with budgets over a real ledger, priced so that one fake call costs about $1.50."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from switch.config import load_settings
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from tests.conftest import FAKE_BASETEN_KEY, Proxy, load_capture, write_config
from tests.fake_upstream import FakeChatUpstream
from tests.ledger_seed import pricer_for
from tests.servers import wait_until

# USD per million tokens: each token costs a cent, so the fake upstream's 150-token answers cost $1.50.
PRICE = 10_000.0
TOKENS_PER_USD = 1_000_000 / PRICE
CONFIG = """
[providers.baseten]
base_url = "{url}"
[prices."baseten/moonshotai/Kimi-K3"]
input = {price}
cached_input = {price}
cache_write = {price}
output = {price}
[prices."baseten/cheap-model"]
input = 1.0
output = 1.0
{budgets}
"""
CHEAP_PRESET = '[default]\norchestrator = "baseten/cheap-model"\n'
SDK_FIELDS = {"model", "max_tokens", "messages", "system", "tools", "thinking", "metadata", "stream", "tool_choice"}
DROPPED_HEADERS = {"host", "content-length", "connection", "accept-encoding", "authorization", "x-api-key"}


@dataclass
class BudgetProxy:
    """A running proxy with budgets, its recorder and the fake upstream behind it."""

    proxy: Proxy
    recorder: Recorder
    upstream: FakeChatUpstream
    home: Path
    earlier: int = 0
    """Upstream requests made before this proxy started (by an earlier one)."""

    @property
    def url(self) -> str:
        return self.proxy.url

    def rows(self) -> list[dict[str, Any]]:
        """Every call in the ledger once the recorder wrote what it was given."""
        recorder = self.recorder
        wait_until(lambda: recorder._queue.qsize() == 0 and not recorder._taken and not recorder._unsaved)
        wait_until(lambda: recorder.written >= self.submitted(), what="the ledger to hold every call")
        connection = sqlite3.connect(self.home / "ledger.db")
        connection.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in connection.execute("SELECT * FROM calls ORDER BY id")]
        finally:
            connection.close()

    def submitted(self) -> int:
        """Calls this proxy handed its recorder: one per upstream request, one per blocked call."""
        return len(self.upstream.received) - self.earlier + int(self.proxy.extra.get("blocked", 0))


def seed_spend(
    home: Path,
    settings: Any,
    usd: float,
    harness: str = "claude-code",
    role: str = "subagent",
    session_id: str | None = None,
) -> None:
    """Put `usd` of spend this month in the ledger, as calls a proxy recorded earlier."""
    recorder = Recorder(pricer_for(settings), database=home / "ledger.db")
    recorder.start()
    recorder.submit(
        CallRecord(
            started_at=time.time() - 1,
            harness=harness,
            role=role,
            preset="earlier",
            requested_model="claude-opus-5-5",
            provider="baseten",
            served_model="moonshotai/Kimi-K3",
            inbound_api="anthropic",
            upstream_api="openai-chat",
            streamed=False,
            outcome="completed",
            http_status=200,
            input_tokens=round(usd * TOKENS_PER_USD),
            usage_reported=True,
            session_id=session_id,
        )
    )
    recorder.close()


@pytest.fixture
def budget_proxy(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., BudgetProxy]]:
    """Start a proxy with these `[[budgets]]` over a ledger already holding `seed_usd` of spend."""
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    presets = isolated_home / "presets"
    presets.mkdir(exist_ok=True)
    (presets / "cheap.toml").write_text(CHEAP_PRESET, encoding="utf-8")
    recorders: list[Recorder] = []

    def start(
        budgets: str, seed_usd: float = 0.0, upstream: tuple[FakeChatUpstream, str] | None = None, **seed: str
    ) -> BudgetProxy:
        serving, base = upstream or (fake, url)
        text = CONFIG.format(url=base, price=PRICE, budgets=budgets)
        write_config(isolated_home, text)
        if seed_usd:
            seed_spend(isolated_home, load_settings(), seed_usd, **seed)
        recorder = Recorder(pricer_for(load_settings()), database=isolated_home / "ledger.db")
        recorder.start()
        recorders.append(recorder)
        proxy = start_proxy(text, sink=recorder, read_timeout=10.0)
        proxy.extra["blocked"] = 0
        return BudgetProxy(proxy, recorder, serving, isolated_home, len(serving.received))

    yield start
    for recorder in recorders:
        recorder.close()


def claude_code_call(url: str, capture: str = "claude_code_subagent/03_POST_v1_messages.json", **client: Any) -> str:
    """Send a captured Claude Code request with the anthropic SDK; the streamed answer's text."""
    recorded = load_capture(capture)
    body = dict(recorded["body"])
    headers = {
        k: v
        for k, v in recorded["headers"]
        if k.lower() not in DROPPED_HEADERS and not k.lower().startswith("x-stainless")
    }
    known = {key: body.pop(key) for key in list(body) if key in SDK_FIELDS}
    sdk = anthropic.Anthropic(base_url=url, api_key="sk-ant-fake", **client)
    stream = sdk.messages.create(**known, extra_body=body, extra_headers=headers)
    text = ""
    for event in stream:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text += event.delta.text
    return text


def codex_call(url: str, capture: str = "codex_subagent/01_POST_v1_responses.json", **client: Any) -> Any:
    """Send a captured Codex request with the openai SDK (not streamed); the response."""
    recorded = load_capture(capture)
    body = dict(recorded["body"])
    headers = {
        k: v
        for k, v in recorded["headers"]
        if k.lower() not in DROPPED_HEADERS and not k.lower().startswith("x-stainless")
    }
    body.pop("stream", None)
    sdk = openai.OpenAI(base_url=url + "/v1", api_key="sk-fake", **client)
    return sdk.responses.create(
        model=body.pop("model"), input=body.pop("input"), extra_body=body, extra_headers=headers
    )
