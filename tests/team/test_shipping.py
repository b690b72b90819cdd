"""Shipping to a real PostgreSQL server: two homes, an outage mid-run, re-sent batches, and the team's figures
equal to the members' local figures to the micro-dollar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from switch.team import local
from switch.team.shipper import Shipper
from tests.ledger_seed import FROZEN_NOW
from tests.team.helpers import MONEY, add_rows, connect, iso, make_home, spend_json, switch
from tests.team.pg import Cluster, wait_for


def _ship_all(home: Path, monkeypatch: pytest.MonkeyPatch, batch_size: int = 700) -> None:
    """Ship everything `home` holds, from that home, as its proxy's shipper would."""
    from switch.config import load_settings

    monkeypatch.setenv("SWITCH_HOME", str(home))
    team = load_settings().team
    assert team is not None
    shipper = Shipper(team, batch_size=batch_size)
    try:
        while not shipper.ship_some(max_batches=3):
            pass
    finally:
        shipper.stop()


def _server_sums(url: str) -> tuple[int, int, int]:
    with connect(url) as connection:
        row = connection.execute(
            "SELECT COUNT(*), COUNT(DISTINCT (origin, local_id)), COALESCE(SUM(cost_micros), 0) FROM team_calls"
        ).fetchone()
        daily = connection.execute("SELECT SUM(calls), SUM(spend_micros) FROM team_daily").fetchone()
    assert row is not None and daily is not None
    # The rollup holds exactly the rows: nothing counted twice by a re-sent batch.
    assert (daily[0] or 0, daily[1] or 0) == (row[0], row[2])
    return int(row[0]), int(row[1]), int(row[2])


def test_two_homes_ship_to_one_database_and_team_spend_equals_their_local_spend(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ana = make_home(tmp_path, "ana", team_url, "ana")
    ben = make_home(tmp_path, "ben", team_url, "ben")
    add_rows(ana, 0, 2300, 2300)
    add_rows(ben, 0, 1500, 1500, span=3 * 86400)
    init = switch(ana, "team", "init", "--yes")
    assert init.returncode == 0, init.stderr
    _ship_all(ana, monkeypatch)
    _ship_all(ben, monkeypatch)
    assert _server_sums(team_url)[:2] == (3800, 3800)

    # Whole range, and a range cutting days (and quarter hours) at both ends: the rollup + edge paths.
    for window in ((), ("--since", iso(FROZEN_NOW - 2.3 * 86400 + 17), "--until", iso(FROZEN_NOW - 0.6 * 86400))):
        mine = {member: spend_json(home, *window)[0] for member, home in (("ana", ana), ("ben", ben))}
        by_member = {row["grp"]: row for row in spend_json(ana, "--team", "--by", "member", *window)}
        (total,) = spend_json(ben, "--team", *window)
        for name in MONEY:
            for member in ("ana", "ben"):
                assert by_member[member][name] == mine[member][name], (window, member, name)
            assert total[name] == mine["ana"][name] + mine["ben"][name], (window, name)
    everything = spend_json(ana, "--team")[0]
    by_role = spend_json(ana, "--team", "--by", "role")
    assert sum(row["spend_micros"] for row in by_role) == everything["spend_micros"]


def test_server_stopped_mid_run_loses_nothing_and_doubles_nothing(
    team_url: str, cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    monkeypatch.setenv("SWITCH_HOME", str(home))
    assert switch(home, "team", "init", "--yes").returncode == 0
    add_rows(home, 0, 3000, 6000)
    from switch.config import load_settings

    team = load_settings().team
    assert team is not None
    shipper = Shipper(team, batch_size=200, poll_seconds=0.05, min_backoff=0.05, max_backoff=0.4)
    shipper.start()
    try:
        wait_for(lambda: local.cursor(team) > 0)
        cluster.stop()
        try:
            add_rows(home, 3000, 3000, 6000)  # calls keep coming while the server is down
            wait_for(lambda: local.read_status().get("last_error") is not None)
            down = switch(home, "status")
            assert "calls not shipped yet" in down.stdout and "last error" in down.stdout, down.stdout
            doctor = json.loads(switch(home, "doctor", "--json").stdout)
            (finding,) = [c for c in doctor["checks"] if c["check"] == "team"]
            assert not finding["ok"] and "reachable" in finding["fix"]
        finally:
            cluster.start()
        wait_for(lambda: local.cursor(team) == 6000 and local.read_status().get("last_error") is None, timeout=60)
    finally:
        shipper.stop()
    assert _server_sums(team_url)[:2] == (6000, 6000)
    # A crash after the commit but before the cursor moved re-sends the batches: still nothing doubled.
    local.advance(team, 2500)
    _ship_all(home, monkeypatch, batch_size=333)
    count, distinct, spent = _server_sums(team_url)
    assert (count, distinct) == (6000, 6000)
    assert spent == spend_json(home)[0]["spend_micros"]
    assert "every call shipped" in switch(home, "status").stdout


def test_a_replaced_local_ledger_ships_its_rows_under_a_new_origin(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    assert switch(home, "team", "init", "--yes").returncode == 0
    add_rows(home, 0, 500, 500)
    _ship_all(home, monkeypatch)
    first = local.origin()
    (home / "ledger.db").unlink()
    add_rows(home, 0, 200, 500)  # ids 1..200 again: taken for re-sent rows, they would be dropped
    _ship_all(home, monkeypatch)
    _ship_all(home, monkeypatch)
    assert local.origin() != first
    assert _server_sums(team_url)[:2] == (700, 700)
