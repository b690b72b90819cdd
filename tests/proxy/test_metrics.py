"""`GET /metrics`: Prometheus text that prometheus_client's own parser reads, matching the ledger's numbers."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from switch.config import load_settings
from switch.ledger.recorder import Recorder
from tests.conftest import FAKE_BASETEN_KEY, Proxy, write_config
from tests.fake_upstream import FakeChatUpstream, Reply, Turn
from tests.ledger_seed import pricer_for
from tests.servers import wait_until

CONFIG = """
[providers.baseten]
base_url = "{url}"
[prices."baseten/moonshotai/Kimi-K3"]
input = 3.0
cached_input = 0.3
output = 15.0
[[budgets]]
name = "all"
scope = "total"
period = "month"
limit_usd = 100.0
actions = [{{ at = 0.5, do = "warn" }}]
"""
FALLBACK_PRESET = """
[default]
orchestrator = ["baseten/first-choice", "baseten/moonshotai/Kimi-K3"]
"""


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name].append((dict(sample.labels), sample.value))
    return found


def _ledger(home: Path) -> list[dict[str, Any]]:
    connection = sqlite3.connect(home / "ledger.db")
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute("SELECT * FROM calls")]
    finally:
        connection.close()


def test_metrics_agree_with_the_ledger(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    presets = isolated_home / "presets"
    presets.mkdir()
    (presets / "fb.toml").write_text(FALLBACK_PRESET, encoding="utf-8")
    (isolated_home / "active-preset").write_text("fb\n", encoding="utf-8")
    config = CONFIG.format(url=url)
    write_config(isolated_home, config)
    recorder = Recorder(pricer_for(load_settings()))
    recorder.start()
    try:
        proxy = start_proxy(config, sink=recorder, read_timeout=5.0)
        fake.script(
            Reply(503, [orjson.dumps({"error": {"message": "overloaded"}})], "application/json"),
            Turn(text="after a fallback", prompt_tokens=200, cached_tokens=50, completion_tokens=40),
            Turn(text="plain"),
            Turn(text="streamed", prompt_tokens=90, completion_tokens=12),
        )
        client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
        ask = {"model": "claude-opus-5-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        client.messages.create(**ask)  # type: ignore[call-overload]
        client.messages.create(**ask, extra_headers={"x-switch-role": "subagent"})  # type: ignore[call-overload]
        with client.messages.stream(**ask) as stream:  # type: ignore[arg-type]
            stream.get_final_message()
        wait_until(lambda: recorder.written == 4, what="four attempts in the ledger")
        rows = _ledger(isolated_home)
        scraped = httpx.get(proxy.url + "/metrics", timeout=5)
    finally:
        recorder.close()
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    samples = _samples(scraped.text)

    by_outcome: dict[tuple[str, ...], float] = defaultdict(float)
    for row in rows:
        by_outcome[(row["harness"], row["role"], f"{row['provider']}/{row['served_model']}", row["outcome"])] += 1
    calls = {
        tuple(labels[k] for k in ("harness", "role", "served_model", "outcome")): v
        for labels, v in samples["switch_calls_total"]
    }
    assert calls == by_outcome and sum(calls.values()) == 4
    errors = {labels["outcome"]: v for labels, v in samples["switch_errors_total"]}
    assert errors == {"upstream_error": 1.0}
    assert [(labels["trigger"], v) for labels, v in samples["switch_fallbacks_total"]] == [("5xx", 1.0)]

    tokens: dict[str, float] = defaultdict(float)
    for labels, value in samples["switch_tokens_total"]:
        tokens[labels["kind"]] += value
    for kind in ("input", "output", "cache_read"):
        assert tokens[kind] == sum(row[f"{kind}_tokens"] for row in rows) > 0, kind

    spend = sum(row["cost_micros"] or 0 for row in rows)
    assert sum(value for _labels, value in samples["switch_cost_micros_total"]) == spend > 0
    native = sum(row["native_cost_micros"] or 0 for row in rows)
    assert sum(value for _labels, value in samples["switch_native_cost_micros_total"]) == native > 0
    assert sum(v for _l, v in samples["switch_ttft_seconds_count"]) == sum(row["ttft_ms"] is not None for row in rows)
    assert sum(v for _l, v in samples["switch_duration_seconds_count"]) == 4
    duration = sum(v for _l, v in samples["switch_duration_seconds_sum"])
    assert duration == pytest.approx(sum(row["duration_ms"] for row in rows) / 1000)

    assert samples["switch_budget_spent_micros"] == [({"budget": "all"}, float(spend))]
    assert samples["switch_budget_limit_micros"] == [({"budget": "all"}, 100_000_000.0)]
    assert samples["switch_ledger_queue_depth"] == [({}, 0.0)]
    assert samples["switch_ledger_spill_bytes"] == [({}, 0.0)]


def test_metrics_sit_behind_the_same_guard(start_proxy: Callable[..., Proxy]) -> None:
    proxy = start_proxy("")
    assert httpx.get(proxy.url + "/metrics", timeout=5).status_code == 200
    assert httpx.get(proxy.url + "/metrics", headers={"Origin": "https://example.com"}, timeout=5).status_code == 403
    port = proxy.url.rsplit(":", 1)[1]
    rebound = httpx.get(f"{proxy.url}/metrics", headers={"Host": f"attacker.example:{port}"}, timeout=5)
    assert rebound.status_code == 403


def test_each_app_has_its_own_registry(start_proxy: Callable[..., Proxy]) -> None:
    first, second = start_proxy(""), start_proxy("")
    assert "switch_calls_total" in httpx.get(first.url + "/metrics", timeout=5).text
    assert "switch_calls_total" in httpx.get(second.url + "/metrics", timeout=5).text
