"""The shipper against a real PostgreSQL server when something is wrong: a value PostgreSQL refuses, a new
server, a thread that fails while reporting a failure, a damaged local ledger. It ships what it can, sets
aside what the server refuses, and says which side failed."""

from __future__ import annotations

import errno
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import psycopg
import pytest

from switch.config import load_settings
from switch.config_team import Team
from switch.ledger.recorder import Recorder
from switch.team import local
from switch.team.shipper import Shipper
from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream
from tests.ledger_seed import pricer_for
from tests.team.helpers import add_rows, connect, make_home, switch
from tests.team.pg import Cluster, wait_for


def _team(home: Path, monkeypatch: pytest.MonkeyPatch) -> Team:
    monkeypatch.setenv("SWITCH_HOME", str(home))
    team = load_settings().team
    assert team is not None
    return team


def _ship_all(team: Team, **options: Any) -> Shipper:
    shipper = Shipper(team, batch_size=options.pop("batch_size", 100), **options)
    try:
        while not shipper.ship_some(max_batches=5):
            pass
    finally:
        shipper.stop()
    return shipper


def _server_ids(url: str) -> list[int]:
    with connect(url) as connection:
        return [int(row[0]) for row in connection.execute("SELECT local_id FROM team_calls ORDER BY local_id")]


def test_a_model_name_with_nul_is_stored_and_shipped_as_every_store_accepts_it(
    team_url: str,
    isolated_home: Path,
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    config = f'[providers.baseten]\nbase_url = "{url}"\n\n[team]\nledger_url = "{team_url}"\nmember = "ana"\n'
    (isolated_home / "config.toml").write_text(config)
    assert switch(isolated_home, "team", "init", "--yes").returncode == 0
    recorder = Recorder(pricer_for(load_settings()), database=isolated_home / "ledger.db", batch_window=0)
    recorder.start()
    try:
        proxy = start_proxy(config, sink=recorder)
        client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
        for model in ("claude\x00opus", "x" * 5000):
            client.messages.create(model=model, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        client.close()
        wait_for(lambda: recorder.written == 2)
    finally:
        recorder.close()
    team = _team(isolated_home, monkeypatch)
    _ship_all(team)
    with connect(team_url) as connection:
        shipped = [row[0] for row in connection.execute("SELECT requested_model FROM team_calls ORDER BY local_id")]
    assert shipped == ["claude\ufffdopus", "x" * 512]
    assert local.refused(team) == {}


def test_a_row_the_server_refuses_is_set_aside_and_the_rows_after_it_still_ship(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    assert switch(home, "team", "init", "--yes").returncode == 0
    add_rows(home, 0, 300, 300)
    # As an older switch stored it: the upstream's error text as sent, NUL and all.
    connection = sqlite3.connect(home / "ledger.db")
    with connection:
        connection.execute("UPDATE calls SET error = 'bad' || char(0) || 'text' WHERE id = 137")
    connection.close()
    team = _team(home, monkeypatch)
    _ship_all(team, batch_size=64)
    assert _server_ids(team_url) == [i for i in range(1, 301) if i != 137]
    (reason,) = local.refused(team).values()
    assert list(local.refused(team)) == [137] and ("0x00" in reason.lower() or "nul" in reason.lower()), reason
    status = switch(home, "team", "status")
    assert status.returncode == 1 and "refused 1 call" in status.stdout, status.stdout
    doctor = json.loads(switch(home, "doctor", "--json").stdout)
    (finding,) = [c for c in doctor["checks"] if c["check"] == "team"]
    assert not finding["ok"] and "refused.jsonl" in finding["fix"]
    # More calls later: they ship, the refused one is not tried again.
    add_rows(home, 300, 50, 350)
    _ship_all(team, batch_size=64)
    assert len(_server_ids(team_url)) == 349 and list(local.refused(team)) == [137]


def test_a_new_team_server_gets_the_whole_history(
    team_url: str, cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    assert switch(home, "team", "init", "--yes").returncode == 0
    add_rows(home, 0, 400, 400)
    _ship_all(_team(home, monkeypatch))
    assert len(_server_ids(team_url)) == 400
    assert "every call shipped" in switch(home, "team", "status").stdout

    second = cluster.new_database()
    (home / "config.toml").write_text(f'[team]\nledger_url = "{second}"\nmember = "ana"\n')
    assert switch(home, "team", "init", "--yes").returncode == 0
    status = switch(home, "team", "status")
    assert "400 calls not shipped yet" in status.stdout, status.stdout
    _ship_all(_team(home, monkeypatch))
    assert _server_ids(second) == list(range(1, 401))
    assert "every call shipped" in switch(home, "team", "status").stdout
    # Restored from an older backup: at the next call, the server's own figure is the cursor.
    with connect(second) as connection:
        connection.execute("DELETE FROM team_calls WHERE local_id > 250")
    add_rows(home, 400, 10, 410)
    _ship_all(_team(home, monkeypatch))
    assert _server_ids(second) == list(range(1, 411))
    assert _server_ids(team_url) == list(range(1, 401))  # the first server is untouched, nothing doubled


def test_the_shipper_outlives_failures_while_it_reports_failures(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    assert switch(home, "team", "init", "--yes").returncode == 0
    add_rows(home, 0, 120, 120)
    team = _team(home, monkeypatch)
    from switch.team.server import connect as real_connect

    attempts = {"connect": 0, "status": 0}
    write_status = local.write_status

    def flaky_connect(value: Team) -> psycopg.Connection[tuple[Any, ...]]:
        attempts["connect"] += 1
        if attempts["connect"] <= 3:
            raise psycopg.OperationalError("connection refused")
        return real_connect(value)

    def full_disk(status: dict[str, Any]) -> None:
        attempts["status"] += 1
        if attempts["status"] <= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_status(status)

    monkeypatch.setattr(local, "write_status", full_disk)
    shipper = Shipper(team, poll_seconds=0.05, min_backoff=0.05, max_backoff=0.1, connect=flaky_connect)
    shipper.start()
    try:
        wait_for(lambda: attempts["connect"] > 3)
        assert shipper.alive()
        wait_for(lambda: local.cursor(team) == 120, timeout=30)
    finally:
        shipper.stop()
    assert len(_server_ids(team_url)) == 120


def test_a_damaged_local_ledger_is_reported_as_a_local_problem(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    assert switch(home, "team", "init", "--yes").returncode == 0
    (home / "ledger.db").write_bytes(b"this is not a database" * 100)
    team = _team(home, monkeypatch)
    shipper = Shipper(team, poll_seconds=0.05, min_backoff=0.05, max_backoff=0.1)
    shipper.start()
    try:
        wait_for(lambda: shipper.last_error is not None)
    finally:
        shipper.stop()
    assert shipper.last_error is not None
    assert "local ledger" in shipper.last_error and str(home / "ledger.db") in shipper.last_error
    assert "ledger_url" not in shipper.last_error and "password" not in shipper.last_error
    assert local.read_status()["last_error"] == shipper.last_error
