"""The stream of committed rows: what budgets, metrics and any other reader of calls consume.

The writer publishes the rows of each transaction right after its commit, and never before, with
their ids: a row that waits in the spill file, or whose insert fails and is retried, reaches the
consumers once, when it is stored. A consumer that started from the ledger as of some row id takes
over the stream with `catch_up`, which hands it the rows published since, then swaps it in, with no
publish in between: nothing missed, nothing counted twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from switch.ledger.columns import COLUMNS
from switch.ledger.give_way import STRAIGHT, Pace

log = logging.getLogger("switch.recorder")

Consumer = Callable[[list[dict[str, Any]]], None]
"""Takes committed rows: each has every column, its `id` and the `budget_hold` its call held (0: none)."""

_SINCE = f"SELECT id, {', '.join(COLUMNS)} FROM calls WHERE id > ? AND id <= ? ORDER BY id"


class CommittedRows:
    """The consumers of a ledger's committed rows, and the last id handed to them."""

    def __init__(self, database: Path, failed: Callable[[str, BaseException, str], None]) -> None:
        self.database = database
        self.consumers: list[Consumer] = []
        self.published_through = 0
        """The id of the last row published (0: none yet in this process)."""
        self._failed = failed
        # Held while rows are published, and while `catch_up` hands the stream to a new consumer.
        self._lock = threading.Lock()

    def publish(self, rows: list[dict[str, Any]], pace: Pace = STRAIGHT) -> None:
        """Hand just-committed rows (ids set) to every consumer, in pieces at `pace`; a consumer's failure is
        reported, not raised."""
        with self._lock:
            self.published_through = rows[-1]["id"]
            for consumer in self.consumers:
                try:
                    for piece in pace.pieces(rows):
                        consumer(list(piece))
                except Exception as exc:  # budgets and metrics are best effort: the rows are stored all the same
                    self._failed("consumer", exc, "budgets or metrics may miss these calls")

    def catch_up(self, after_id: int, consumer: Consumer, then: Callable[[], None]) -> None:
        """Feed `consumer` the rows published after `after_id` (read back from the ledger), then run `then`."""
        with self._lock:
            if self.published_through > after_id:
                from switch.ledger.db import open_read_only

                connection = open_read_only(self.database)
                if connection is not None:
                    try:
                        found = connection.execute(_SINCE, (after_id, self.published_through)).fetchall()
                    finally:
                        connection.close()
                    names = ("id", *COLUMNS)
                    rows = [{**dict(zip(names, values, strict=True)), "budget_hold": 0} for values in found]
                    if rows:
                        consumer(rows)
            then()
