"""A ledger.db deleted, replaced, or turned into something else under a running proxy loses no call: the
writer notices before its next batch that the path holds another file (or none), reopens it, and every
later row lands in the file at the path; while it cannot, rows spill and /healthz and doctor say so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx

from switch.ledger.db import open_for_writing
from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream
from tests.ledger.test_ledger_proxy import rows
from tests.servers import free_port, serve, serve_process, wait_until


def _health(port: int) -> dict[str, Any]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json())


def _doctor_ledger(env: dict[str, str]) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, "-m", "switch", "doctor", "--json"], env=env, capture_output=True, timeout=60
    ).stdout
    return next(check for check in json.loads(output)["checks"] if check["check"] == "ledger")


def _calls(client: anthropic.Anthropic, first: int, count: int) -> None:
    for index in range(first, first + count):
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": str(index)}])


def test_every_call_lands_in_the_file_at_the_path_after_it_is_deleted_or_replaced(isolated_home: Path) -> None:
    ledger = isolated_home / "ledger.db"
    with serve(FakeChatUpstream()) as url:
        (isolated_home / "config.toml").write_text(f'[providers.baseten]\nbase_url = "{url}/v1"\n')
        env = {**os.environ, "BASETEN_API_KEY": FAKE_BASETEN_KEY}
        port = free_port()
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}) as process:
            # Where `doctor` finds the proxy (`switch up` writes this; a bare `serve --port` does not).
            (isolated_home / "run").mkdir(exist_ok=True)
            record = {"pid": process.pid, "port": port, "started_at": time.time(), "log": "proxy.log"}
            (isolated_home / "run" / "proxy.json").write_text(json.dumps(record))
            client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="k", max_retries=0)
            _calls(client, 0, 10)
            wait_until(lambda: len(rows(isolated_home)) == 10, what="the first 10 rows")

            # Deleted (as `rm ledger.db` leaves it: the WAL files stay until the writer lets go).
            ledger.unlink()
            _calls(client, 10, 20)
            wait_until(lambda: len(rows(isolated_home)) == 20, what="20 rows in the new file at the path")
            assert _health(port)["ledger"]["reopened"] == 1

            # Replaced: the file moved aside and another ledger (from a backup, say) put in its place.
            ledger.rename(isolated_home / "ledger.moved.db")
            open_for_writing(isolated_home / "backup.db").close()
            shutil.move(isolated_home / "backup.db", ledger)
            _calls(client, 30, 30)
            wait_until(lambda: len(rows(isolated_home)) == 30, what="30 rows in the replacement")
            health = _health(port)
            assert (health["status"], health["ledger"]["reopened"], health["ledger"]["file_changed"]) == ("ok", 2, None)

            # Something no writer can open in its place: rows wait in the spill file, degraded until it is gone.
            ledger.unlink()
            for leftover in (isolated_home / "ledger.db-wal", isolated_home / "ledger.db-shm"):
                leftover.unlink(missing_ok=True)
            ledger.mkdir()
            _calls(client, 60, 5)
            wait_until(lambda: _health(port)["ledger"]["spilled_rows"] == 5, what="5 rows spilled")
            degraded = _health(port)
            assert degraded["status"] == "degraded"
            assert "was replaced by another file" in degraded["ledger"]["file_changed"]
            check = _doctor_ledger(env)
            assert not check["ok"] and str(ledger) in check["detail"] and check["fix"], check
            ledger.rmdir()
            wait_until(lambda: len(rows(isolated_home)) == 5, what="the 5 spilled rows in a fresh ledger")
            wait_until(lambda: _health(port)["status"] == "ok", what="the proxy to report it recovered")
            assert _doctor_ledger(env)["ok"]
