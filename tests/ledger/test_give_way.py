"""The writer gives the proxy's core back between rows while it keeps up, and a batch written in pieces
stores every row once, with the ids, rollups and committed stream a batch written whole had."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from switch.config import load_settings
from switch.ledger import give_way
from switch.ledger.give_way import PIECE_ROWS, Pace
from switch.ledger.recorder import Recorder
from tests.ledger.test_recorder_resilience import record, running
from tests.ledger_seed import pricer_for
from tests.servers import wait_until

ROWS = 5 * PIECE_ROWS + 3  # several pieces and a short last one


class Yields:
    """Counts the writer's yields (each still yields for real)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = give_way._yield

        def counted() -> None:
            self.count += 1
            if real is not None:
                real()

        monkeypatch.setattr(give_way, "_yield", counted)


def _recorder_with_one_batch(home: Path) -> tuple[Recorder, list[dict[str, Any]]]:
    """A recorder whose first batch holds all ROWS calls (queued before its writer starts), and what it published."""
    recorder = Recorder(pricer_for(load_settings()), database=home / "ledger.db", batch_window=0)
    published: list[dict[str, Any]] = []
    recorder.consumers.append(published.extend)
    for index in range(ROWS):
        # Two sessions and two models: the rollups hold several keys, each spread over several pieces.
        served = "moonshotai/Kimi-K3" if index % 3 else "moonshotai/Kimi-K2"
        recorder.submit(record(index, session_id=f"s{index % 2}", served_model=served))
    return recorder, published


def test_a_batch_written_in_pieces_keeps_every_row_with_its_id_and_its_rollups(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    yields = Yields(monkeypatch)
    recorder, published = _recorder_with_one_batch(isolated_home)
    with running(recorder):
        wait_until(lambda: recorder.written == ROWS)
    assert yields.count >= ROWS  # it gave way after each row's pricing at least
    connection = sqlite3.connect(isolated_home / "ledger.db")
    stored = connection.execute("SELECT id, request_bytes, cost_micros, input_tokens FROM calls ORDER BY id").fetchall()
    # Every call once, and the consumers saw each with the id the database gave it.
    assert [index for _, index, _, _ in stored] == list(range(ROWS))
    assert [(row["id"], row["request_bytes"]) for row in published] == [(id_, index) for id_, index, _, _ in stored]
    # The rollups, upserted piece by piece, add up to the calls themselves.
    for table, key in (("rollup", "served_model"), ("rollup_session", "session_id")):
        sums = connection.execute(
            f"SELECT {key}, SUM(calls), SUM(spend_micros), SUM(input_tokens) FROM {table} GROUP BY {key} ORDER BY {key}"
        ).fetchall()
        direct = connection.execute(
            f"SELECT {key}, COUNT(*), COALESCE(SUM(cost_micros), 0), SUM(input_tokens) FROM calls"
            f" GROUP BY {key} ORDER BY {key}"
        ).fetchall()
        assert sums == direct and len(sums) == 2
    connection.close()


def test_a_batch_that_ran_out_of_patience_is_written_straight_through(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A saturated proxy: the event loop always has work, and a writer yielding per row would fall behind.
    monkeypatch.setattr(give_way, "PATIENCE_S", 0.0)
    yields = Yields(monkeypatch)
    recorder, published = _recorder_with_one_batch(isolated_home)
    with running(recorder):
        wait_until(lambda: recorder.written == ROWS)
    assert yields.count == 0
    assert sorted(row["request_bytes"] for row in published) == list(range(ROWS))


def test_pieces_cover_the_items_in_order_and_give_way_between_them(monkeypatch: pytest.MonkeyPatch) -> None:
    yields = Yields(monkeypatch)
    items = list(range(ROWS))
    patient = list(Pace(patience=60.0).pieces(items))
    assert [item for piece in patient for item in piece] == items
    assert max(len(piece) for piece in patient) == PIECE_ROWS
    assert yields.count == len(patient) - 1
    before = yields.count
    assert [item for piece in Pace(patience=0.0).pieces(items) for item in piece] == items
    assert yields.count == before
