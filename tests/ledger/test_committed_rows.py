"""One stream of committed rows: budgets and metrics see each stored call exactly once, after its commit,
whatever the spill file and its replays went through, from the first start of the proxy on."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from switch.config import load_settings
from switch.ledger.db import open_for_writing
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from switch.ledger.spill import encode_rows
from switch.proxy.budget_gate import BudgetGate
from tests.conftest import FAKE_BASETEN_KEY
from tests.ledger.test_ledger_proxy import DatabaseLock, rows
from tests.ledger.test_recorder_resilience import TroublePricer, record, running
from tests.ledger_seed import kimi_call, pricer_for
from tests.servers import free_port, serve_process, wait_until

COST = 1000 * 3 + 100 * 15  # micro-USD of one `record(...)` at Kimi's default prices


def _ledger_total(home: Path) -> tuple[int, int]:
    found = rows(home)
    return len(found), sum(row["cost_micros"] or 0 for row in found)


def test_a_spilled_call_is_counted_once_however_often_its_replay_fails(isolated_home: Path) -> None:
    priced: list[int] = []
    # With no room in the queue every call goes to the spill file unpriced, and each replay prices it.
    recorder = Recorder(TroublePricer(lambda being: priced.append(being.request_bytes)), batch_window=0, max_queued=0)
    seen: list[dict[str, Any]] = []
    recorder.consumers.append(seen.extend)
    open_for_writing(isolated_home / "ledger.db").close()
    with DatabaseLock(isolated_home / "ledger.db") as lock:
        with running(recorder):
            for index in range(5):
                recorder.submit(record(index))
            # Three replays failed on the locked database (each priced the five calls again).
            wait_until(lambda: len(priced) >= 15, timeout=30, what="three failed replays")
            assert seen == []  # nothing is counted before it is stored
            lock.release()
            wait_until(lambda: recorder.written == 5)
    assert sorted(row["request_bytes"] for row in seen) == list(range(5))
    stored = rows(isolated_home)
    assert sorted(row["id"] for row in seen) == [row["id"] for row in stored]
    assert sum(row["cost_micros"] for row in seen) == _ledger_total(isolated_home)[1] == 5 * COST


def test_rows_reach_the_consumers_only_once_committed_with_their_ids(isolated_home: Path) -> None:
    database = isolated_home / "ledger.db"
    visible: list[bool] = []

    def consumer(committed: list[dict[str, Any]]) -> None:
        # Another connection sees them already: the transaction that stored them has committed.
        reader = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            for row in committed:
                found = reader.execute("SELECT request_bytes FROM calls WHERE id = ?", (row["id"],)).fetchone()
                visible.append(found is not None and found[0] == row["request_bytes"])
        finally:
            reader.close()

    recorder = Recorder(pricer_for(load_settings()), batch_window=0, batch_size=7)
    recorder.consumers.append(consumer)
    with running(recorder):
        for index in range(40):
            recorder.submit(record(index))
        wait_until(lambda: len(visible) == 40)
    assert all(visible)


def test_a_new_budget_gate_takes_over_the_stream_without_missing_a_row(isolated_home: Path) -> None:
    config = '[[budgets]]\nscope = "total"\nperiod = "day"\nlimit_usd = 100.0\n'
    (isolated_home / "config.toml").write_text(config)
    settings = load_settings()
    recorder = Recorder(pricer_for(settings), batch_window=0)
    old_seen: list[dict[str, Any]] = []
    recorder.consumers.append(old_seen.extend)
    now = time.time()

    def today(index: int) -> CallRecord:
        return kimi_call(now, input_tokens=1000, output_tokens=100, request_bytes=index)

    with running(recorder):
        for index in range(3):
            recorder.submit(today(index))
        wait_until(lambda: recorder.written == 3)
        gate = BudgetGate.build(settings, isolated_home / "config.toml", recorder.database)
        assert gate is not None and gate.book.through_id == 3
        # Calls stored after the new gate read the ledger and before it is swapped in: the old one gets them.
        for index in range(3, 8):
            recorder.submit(today(index))
        wait_until(lambda: recorder.written == 8)
        swapped: list[bool] = []
        recorder.catch_up(gate.book.through_id, gate.book.observe, lambda: swapped.append(True))
        assert swapped == [True]
        recorder.consumers.append(gate.book.observe)
        recorder.submit(today(8))
        wait_until(lambda: recorder.written == 9)
    assert gate.book.report()[0]["spent_micros"] == _ledger_total(isolated_home)[1] == 9 * COST
    assert len(old_seen) == 9


def _metric(text: str, name: str) -> float:
    return sum(float(value) for value in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE))


def test_rows_spilled_by_an_earlier_proxy_reach_the_budgets_and_metrics_when_replayed(
    isolated_home: Path,
) -> None:
    (isolated_home / "config.toml").write_text(
        '[server]\nmetrics = true\n\n[[budgets]]\nscope = "total"\nperiod = "day"\nlimit_usd = 100.0\n'
    )
    pricer = pricer_for(load_settings())
    now = time.time()
    earlier = [pricer.row(kimi_call(now - 60 + i, input_tokens=1000, output_tokens=100)) for i in range(4)]
    (isolated_home / "ledger.spill.jsonl").write_bytes(encode_rows(earlier))
    database = isolated_home / "ledger.db"
    open_for_writing(database).close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # Locked while the proxy starts: the budgets load nothing, the replay waits and succeeds later.
    with DatabaseLock(database) as lock:
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}):
            assert httpx.get(base + "/healthz", timeout=5).json()["budgets"][0]["spent_micros"] == 0
            lock.release()
            wait_until(lambda: _ledger_total(isolated_home)[0] == 4, timeout=30)
            total = _ledger_total(isolated_home)[1]
            assert total == 4 * COST

            def spent() -> int:
                return int(httpx.get(base + "/healthz", timeout=5).json()["budgets"][0]["spent_micros"])

            wait_until(lambda: spent() == total, timeout=10, what="the budget to count the replayed rows")
            metrics = httpx.get(base + "/metrics", timeout=5).text
            assert _metric(metrics, "switch_cost_micros_total") == total
            assert _metric(metrics, "switch_calls_total") == 4
