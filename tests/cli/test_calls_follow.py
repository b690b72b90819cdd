"""`switch calls --follow` prints every row that lands, however many land at once.

It asked for the newest 1,000 rows after the last one printed: of 2,500 rows landing in one second it
printed 1,000 and skipped the rest. It now pages forward by row id until none are left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from switch.ledger.db import open_for_writing
from tests.ledger_seed import FROZEN_NOW, seeded_rows, write_rows
from tests.servers import end_process, wait_until

BURST = 2_500  # more than any page `calls --follow` reads


def test_follow_prints_every_row_of_a_burst_bigger_than_a_page(isolated_home: Path) -> None:
    connection = open_for_writing(isolated_home / "ledger.db")
    write_rows(connection, seeded_rows(1, FROZEN_NOW))
    follower = subprocess.Popen(
        [sys.executable, "-m", "switch", "calls", "--follow", "--json", "--limit", "1"],
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(follower.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: len(lines) == 1, timeout=30, what="the first row")
        # One transaction, as the writer commits a batch: all of them land between two polls.
        write_rows(connection, seeded_rows(BURST, FROZEN_NOW, first=1, total=BURST + 1))
        wait_until(lambda: len(lines) >= 1 + BURST, timeout=60, what=f"all {BURST} rows of the burst")
    finally:
        end_process(follower)
        reader.join(timeout=30)
        follower.stdout.close()  # type: ignore[union-attr]
        connection.close()
    ids = [json.loads(line)["id"] for line in lines]
    assert ids == list(range(1, BURST + 2))
