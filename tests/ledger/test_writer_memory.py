"""The ledger writer's SQLite page cache stays small: under load the default 2 MB filled and stayed."""

from __future__ import annotations

from pathlib import Path

from switch.config import load_settings
from switch.ledger.recorder import WRITER_CACHE_KIB, Recorder
from tests.ledger.test_recorder_resilience import record, running
from tests.ledger_seed import pricer_for
from tests.servers import wait_until


def test_the_writer_connection_keeps_a_small_page_cache(isolated_home: Path) -> None:
    recorder = Recorder(pricer_for(load_settings()), batch_window=0)
    with running(recorder):
        recorder.submit(record(1))
        wait_until(lambda: recorder.written == 1)
        connection = recorder._connection
        assert connection is not None
        assert connection.execute("PRAGMA cache_size").fetchone()[0] == -WRITER_CACHE_KIB
    assert WRITER_CACHE_KIB <= 1024
