"""What the dashboard shows can be believed: a side of a session that made no call is `none`, not unpriced;
calls refused before any provider are a count of their own, never a blank model in a table, chart or legend."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
from switch.ui.app import make_app
from textual.widgets import DataTable, Static

from switch.config import Settings, load_settings
from switch.ledger import queries
from switch.ledger.recorder import Recorder
from tests.conftest import FAKE_CLIENT_KEY, Proxy, drain
from tests.fake_upstream import Turn
from tests.ledger_seed import FROZEN_NOW, kimi_call, pricer_for
from tests.ui.test_dashboard import column, open_table, settle


def record(path: Path, *records: Any) -> None:
    """Write `records` with the real recorder (prices, rollups and all)."""
    recorder = Recorder(pricer_for(Settings()), database=path, spill=path.with_suffix(".spill.jsonl"))
    recorder.start()
    for item in records:
        recorder.submit(item)
    recorder.close(timeout=60)
    assert recorder.written == len(records)


async def test_a_session_without_subagents_shows_none_and_only_unpriced_calls_show_unpriced(
    isolated_home: Path,
) -> None:
    ledger = isolated_home / "ledger.db"
    record(
        ledger,
        # Main thread only, priced.
        kimi_call(FROZEN_NOW, session_id="solo", role="orchestrator", input_tokens=1000, output_tokens=100),
        # Main thread priced; a subagent on a model no price table knows.
        kimi_call(FROZEN_NOW + 1, session_id="split", role="orchestrator", input_tokens=1000, output_tokens=100),
        kimi_call(FROZEN_NOW + 2, session_id="split", served_model="nobody/Unknown-1", output_tokens=10),
        # Subagents only: the main thread of this session never called through switch.
        kimi_call(FROZEN_NOW + 3, session_id="helpers", input_tokens=2000, output_tokens=200),
    )
    connection = sqlite3.connect(ledger)
    try:
        by_session = {row["session_id"]: row for row in queries.sessions(connection)}
    finally:
        connection.close()
    assert (by_session["solo"]["subagent_calls"], by_session["solo"]["subagent_micros"]) == (0, 0)
    assert by_session["split"]["subagent_micros"] is None and by_session["split"]["subagent_unpriced"] == 1
    assert by_session["helpers"]["orchestrator_calls"] == 0

    app = make_app(ledger, clock=lambda: FROZEN_NOW + 60, poll=60)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        table = await open_table(app, pilot, "s", "sessions-table")
        sessions = column(table, 0)
        orchestrator, subagents = column(table, 5), column(table, 6)
    solo, split, helpers = (sessions.index(name) for name in ("solo", "split", "helpers"))
    assert subagents[solo] == "none"
    assert orchestrator[solo] == "$0.0045 / 1,100 tok"  # 1000 × $3 + 100 × $15 per million
    assert subagents[split].startswith("unpriced")
    assert orchestrator[split] == "$0.0045 / 1,100 tok"
    assert orchestrator[helpers] == "none"
    assert subagents[helpers] == "$0.0090 / 2,200 tok"
    assert "unpriced" not in subagents[solo] + orchestrator[helpers]


def refuse_two_calls(proxy: Proxy) -> None:
    """One completed Kimi call, then a 400 (bad body) and a 413 (too big): both refused before any provider."""
    assert proxy.upstream is not None
    proxy.upstream.script(Turn(text="ok", prompt_tokens=100, cached_tokens=0, completion_tokens=10))
    claude = anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    claude.messages.create(model="claude-opus-5-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    bad = {"model": "claude-opus-5-5", "max_tokens": 10, "messages": "not a list"}
    too_big = b"x" * (load_settings().server.max_body_bytes + 1)
    statuses = [
        httpx.post(proxy.url + "/v1/messages", json=bad, timeout=30).status_code,
        httpx.post(proxy.url + "/v1/messages", content=too_big, timeout=30).status_code,
    ]
    assert statuses == [400, 413]


async def test_refused_calls_are_no_model_in_the_overview_chart_legend_or_trends(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    proxy, recorder = ledger_proxy
    refuse_two_calls(proxy)
    drain(recorder, 3)
    app = make_app(isolated_home / "ledger.db", clock=lambda: time.time() + 1, poll=60)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        models = column(app.query_one("#by-model", DataTable), 0)
        mappings = column(app.query_one("#by-mapping", DataTable), 0)
        legend = str(app.query_one("#chart", Static).render()).splitlines()[-1]
        spend_card = str(app.query_one("#card-spend", Static).render())
        calls_card = str(app.query_one("#card-calls", Static).render())
        note = str(app.query_one("#range", Static).render())
        trends = await open_table(app, pilot, "t", "latency-table")
        timed = column(trends, 0)
    assert models == ["moonshotai/Kimi-K3"]
    assert mappings == ["claude-opus-5-5 → moonshotai/Kimi-K3"]
    assert [entry.strip() for entry in legend.split("■") if entry.strip()] == ["moonshotai/Kimi-K3"]
    assert spend_card.startswith("Spend\n")  # no asterisk: nothing is unpriced
    assert "Calls 3" in calls_card  # refused calls are still calls (and errors)
    assert "rejected: 2" in note and "unpriced" not in note
    assert timed == ["moonshotai/Kimi-K3"]
