"""The ledger writer cannot die silently: a pricing error, a full disk, a locked database, a killed
thread or a flood of calls never lose a call, and `health()` says what is going on."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from switch.config import load_settings
from switch.ledger.pricer import Pricer
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from tests.ledger.test_ledger_proxy import DatabaseLock, rows
from tests.ledger_seed import kimi_call, pricer_for
from tests.servers import wait_until


def record(index: int, **changes: Any) -> CallRecord:
    """A priced Kimi call; `request_bytes` carries `index` so each row can be told apart."""
    fields: dict[str, Any] = {"input_tokens": 1000, "output_tokens": 100, "request_bytes": index, **changes}
    return kimi_call(1_780_000_000.0 + index, **fields)


class TroublePricer(Pricer):
    """The real pricer, with `trouble` run first for every record (it may raise or wait)."""

    def __init__(self, trouble: Callable[[CallRecord], None]) -> None:
        settings = load_settings()
        super().__init__(
            settings.prices,
            baseline_anthropic=settings.pricing.baseline_anthropic,
            baseline_openai=settings.pricing.baseline_openai,
        )
        self.trouble = trouble

    def row(self, record: CallRecord) -> dict[str, Any]:
        self.trouble(record)
        return super().row(record)


class WriterKilled(BaseException):
    """Stands for whatever ends a thread outright (it is not an Exception)."""


@contextmanager
def running(recorder: Recorder) -> Iterator[Recorder]:
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.close()


def indexes(home: Path) -> list[int]:
    return sorted(row["request_bytes"] for row in rows(home))


def warnings_about(caplog: pytest.LogCaptureFixture, words: str) -> int:
    return sum(1 for entry in caplog.records if entry.levelno >= logging.WARNING and words in entry.getMessage())


def test_a_call_that_cannot_be_priced_is_recorded_unpriced_and_the_writer_goes_on(
    isolated_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def trouble(record: CallRecord) -> None:
        if record.served_model == "damaged/entry":
            raise KeyError("input_cost_per_token")

    caplog.set_level(logging.INFO, logger="switch.recorder")
    with running(Recorder(TroublePricer(trouble), batch_window=0)) as recorder:
        for index in range(3):
            recorder.submit(record(index, served_model="damaged/entry"))
        wait_until(lambda: len(rows(isolated_home)) == 3)
        recorder.submit(record(3, served_model="damaged/entry"))
        recorder.submit(record(4))
        wait_until(lambda: len(rows(isolated_home)) == 5)
        health = recorder.health()
    recorded = {row["request_bytes"]: row for row in rows(isolated_home)}
    assert sorted(recorded) == [0, 1, 2, 3, 4]
    assert [recorded[index]["cost_micros"] for index in range(4)] == [None] * 4  # unpriced, never $0
    assert recorded[4]["cost_micros"] == 1000 * 3 + 100 * 15
    assert health["writer_alive"] and health["ok"] and health["restarts"] == 0
    assert health["last_error"] == "pricing:KeyError"
    assert warnings_about(caplog, "pricing failed") == 1  # once per kind, not once per call


@pytest.mark.parametrize("revived_by", ["submit", "health"])
def test_a_writer_thread_that_dies_is_restarted_and_loses_no_call(
    isolated_home: Path, caplog: pytest.LogCaptureFixture, revived_by: str
) -> None:
    victims: list[threading.Thread] = []

    def trouble(_record: CallRecord) -> None:
        if not victims:
            victims.append(threading.current_thread())
            raise WriterKilled

    with running(Recorder(TroublePricer(trouble), batch_window=0)) as recorder:
        recorder.submit(record(0))
        wait_until(lambda: bool(victims))
        victims[0].join(10)
        assert not victims[0].is_alive()
        if revived_by == "health":
            seen = recorder.health()
            assert not seen["writer_alive"] and not seen["ok"] and seen["last_error"] == "writer:WriterKilled"
        recorder.submit(record(1))
        wait_until(lambda: len(rows(isolated_home)) == 2)
        health = recorder.health()
    assert indexes(isolated_home) == [0, 1]  # the call in the dead thread's hands too, once
    assert health["writer_alive"] and health["restarts"] == 1
    assert any("started a new one" in entry.getMessage() for entry in caplog.records)


def test_rows_neither_a_locked_database_nor_a_full_disk_takes_are_kept_until_one_does(
    isolated_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spill = isolated_home / "ledger.spill.jsonl"
    with running(Recorder(pricer_for(load_settings()), batch_window=0)) as recorder:
        recorder.submit(record(0))
        wait_until(lambda: len(rows(isolated_home)) == 1)
        spill.symlink_to("/dev/full")  # every write to it fails with ENOSPC, as on a full disk
        with DatabaseLock(isolated_home / "ledger.db") as lock:
            for index in range(1, 11):
                recorder.submit(record(index))
            wait_until(lambda: recorder.health()["unsaved"] == 10)
            for index in range(11, 21):  # a second attempt at both the database and the disk
                recorder.submit(record(index))
            wait_until(lambda: recorder.health()["unsaved"] == 20)
            held = recorder.health()
            assert held["writer_alive"] and not held["ok"] and held["last_error"] == "spill:OSError(ENOSPC)"
            spill.unlink()  # space again; the database is still locked
            wait_until(lambda: recorder.health()["unsaved"] == 0)
            assert spill.read_bytes().count(b"\n") == 20
            spilled = recorder.health()
            assert spilled["spilled_rows"] == 20 and spilled["spill_bytes"] == spill.stat().st_size
            lock.release()
            wait_until(lambda: len(rows(isolated_home)) == 21)
        assert recorder.health()["ok"]
    assert indexes(isolated_home) == list(range(21))
    assert not spill.exists()
    assert warnings_about(caplog, "ledger spill failed") == 1


def test_past_the_queue_bound_calls_go_to_the_spill_file_and_none_is_lost(isolated_home: Path) -> None:
    flowing = threading.Event()
    flowing.set()

    def trouble(_record: CallRecord) -> None:
        flowing.wait(30)  # closed: the writer is stuck, as behind a slow disk

    pricer = TroublePricer(trouble)
    recorder = Recorder(pricer, batch_size=10, max_queued=50, batch_window=0)
    try:
        with running(recorder):
            recorder.submit(record(0))
            wait_until(lambda: len(rows(isolated_home)) == 1)
            flowing.clear()
            with DatabaseLock(isolated_home / "ledger.db") as lock:
                for index in range(1, 501):
                    recorder.submit(record(index))
                held = recorder.health()
                # Memory holds at most the queue's bound and the batch in the writer's hands.
                assert held["queued"] <= 50 + 10
                assert held["unsaved"] == 0
                assert recorder.spill.read_bytes().count(b"\n") == 500 - held["queued"]
                flowing.set()
                wait_until(lambda: recorder.spilled == 500)
                lock.release()
                wait_until(lambda: len(rows(isolated_home)) == 501)
    finally:
        flowing.set()
    assert indexes(isolated_home) == list(range(501))
    assert all(row["cost_micros"] == 1000 * 3 + 100 * 15 for row in rows(isolated_home))  # priced on replay
    connection = sqlite3.connect(isolated_home / "ledger.db")
    try:
        (calls,) = connection.execute("SELECT SUM(calls) FROM rollup").fetchone()
    finally:
        connection.close()
    assert calls == 501


def test_calls_spilled_while_the_spill_file_is_replayed_stay_for_the_next_replay(isolated_home: Path) -> None:
    submitted_during_replay: list[int] = []

    def trouble(being_priced: CallRecord) -> None:
        # Spilled records are priced during their replay: submit more just then.
        if being_priced.request_bytes == 0 and not submitted_during_replay:
            for index in range(100, 105):
                submitted_during_replay.append(index)
                recorder.submit(record(index))

    # With no room in the queue, every call goes straight to the spill file.
    recorder = Recorder(TroublePricer(trouble), batch_window=0, max_queued=0)
    for index in range(10):
        recorder.submit(record(index))
    with running(recorder):
        wait_until(lambda: len(rows(isolated_home)) == 15)
    assert submitted_during_replay == list(range(100, 105))
    assert indexes(isolated_home) == [*range(10), *range(100, 105)]
    assert not recorder.spill.exists()


def test_close_replays_what_was_spilled_past_the_queue_bound(isolated_home: Path) -> None:
    recorder = Recorder(pricer_for(load_settings()), batch_window=0, max_queued=0)
    recorder.start()
    for index in range(3):
        recorder.submit(record(index))
    recorder.close()
    assert indexes(isolated_home) == [0, 1, 2]
    assert not recorder.spill.exists()


def test_two_writers_on_one_spill_file_cannot_share_it_and_lose_no_call(isolated_home: Path) -> None:
    # As two proxies of one home once did (10 of 35 rows lost): both spill while ledger.db is locked. The
    # first holds the spill file's lock; the second keeps its rows in memory until it can write them itself.
    database, spill = isolated_home / "ledger.db", isolated_home / "ledger.spill.jsonl"
    first = Recorder(pricer_for(load_settings()), database=database, spill=spill, batch_window=0)
    second = Recorder(pricer_for(load_settings()), database=database, spill=spill, batch_window=0)
    with running(first), running(second):
        first.submit(record(0))
        wait_until(lambda: len(rows(isolated_home)) == 1)
        with DatabaseLock(database) as lock:
            for index in range(1, 21):
                first.submit(record(index))
            wait_until(lambda: first.health()["spilled_rows"] == 20, what="the first writer to spill 20 rows")
            for index in range(21, 36):
                second.submit(record(index))
            wait_until(lambda: second.last_error is not None, what="the second writer to fail to write")
            wait_until(lambda: second.health()["unsaved"] == 15, what="the second writer to hold its 15 rows")
            assert second.last_error.startswith(("spill:", "replay:")), second.last_error
            assert spill.read_bytes().count(b"\n") == 20  # only the holder's rows are in the file
            lock.release()
        wait_until(lambda: len(rows(isolated_home)) == 36, what="all 36 calls in the ledger")
    assert indexes(isolated_home) == list(range(36))
    assert not spill.exists()


def _has_calls_table(database: Path) -> bool:
    if not database.exists():
        return False
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'calls'").fetchone() is not None
    finally:
        connection.close()


def test_the_writer_creates_the_ledger_at_start_not_in_the_first_calls_batch(isolated_home: Path) -> None:
    # Creating and migrating a ledger is SQLite work with no point to give way at: in the first batch it
    # held up the calls of the proxy's first moments (bench/tail_cause.py).
    with running(Recorder(pricer_for(load_settings()), batch_window=0)):
        wait_until(lambda: _has_calls_table(isolated_home / "ledger.db"), what="the ledger to be created")
        assert rows(isolated_home) == []  # before any call was submitted


def test_a_ledger_locked_at_start_still_takes_the_calls_once_it_is_free(isolated_home: Path) -> None:
    database = isolated_home / "ledger.db"
    sqlite3.connect(database).close()
    with DatabaseLock(database) as lock, running(Recorder(pricer_for(load_settings()), batch_window=0)) as recorder:
        wait_until(lambda: recorder.last_error is not None, what="the writer to find the ledger locked")
        recorder.submit(record(1))
        wait_until(lambda: recorder.spilled == 1, what="the call to go to the spill file")
        lock.release()
        wait_until(lambda: indexes(isolated_home) == [1], what="the call to reach the ledger")
