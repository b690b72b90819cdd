"""The shipper inside a real `switch serve`, and the dashboard's Team tab and health line, on a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest
from switch.ui import format as fmt
from textual.widgets import DataTable, Static

from switch.config_team import Team
from switch.team import local
from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream
from tests.ledger_seed import FROZEN_NOW
from tests.servers import free_port, serve, serve_process
from tests.team.helpers import add_rows, connect, spend_json, switch
from tests.team.pg import PASSWORD, wait_for
from tests.ui.test_dashboard import column, settle


def test_switch_serve_ships_its_calls_to_the_team_server(team_url: str, isolated_home: Path) -> None:
    fake = FakeChatUpstream()
    with serve(fake) as url:
        (isolated_home / "config.toml").write_text(
            f'[providers.baseten]\nbase_url = "{url}/v1"\n\n[team]\nledger_url = "{team_url}"\nmember = "ana"\n'
        )
        assert switch(isolated_home, "team", "init", "--yes").returncode == 0
        port = free_port()
        env = {"BASETEN_API_KEY": FAKE_BASETEN_KEY, "SWITCH_TEAM_PASSWORD": PASSWORD}
        with serve_process(port, env):
            client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="k", max_retries=0)
            for index in range(3):
                client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": str(index)}])
            client.close()

            def shipped() -> int:
                with connect(team_url) as connection:
                    row = connection.execute("SELECT COUNT(*) FROM team_calls WHERE member = 'ana'").fetchone()
                return int(row[0]) if row else 0

            wait_for(lambda: shipped() == 3, timeout=60)
    assert spend_json(isolated_home, "--team")[0]["calls"] == 3
    assert local.cursor(Team(ledger_url=team_url, member="ana")) == 3


def _team_config(home: Path, url: str) -> None:
    (home / "config.toml").write_text(f'[server]\nport = 9\n\n[team]\nledger_url = "{url}"\nmember = "ana"\n')


async def test_the_team_tab_shows_members_roles_and_models(
    team_url: str, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from switch.ui.app import make_app

    _team_config(isolated_home, team_url)
    assert switch(isolated_home, "team", "init", "--yes").returncode == 0
    add_rows(isolated_home, 0, 400, 400)
    from switch.config import load_settings
    from switch.team.shipper import Shipper

    team = load_settings().team
    assert team is not None
    shipper = Shipper(team)
    try:
        assert shipper.ship_some()
    finally:
        shipper.stop()
    add_rows(isolated_home, 400, 7, 1000)  # not shipped: the health line says so
    app: Any = make_app(isolated_home / "ledger.db", clock=lambda: FROZEN_NOW + 60, poll=3600)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        await pilot.press("r", "r", "r")  # All time
        await pilot.press("m")
        await settle(app, pilot)
        members = app.query_one("#team-members", DataTable)
        assert column(members, 0) == ["ana"]
        team_total = spend_json(isolated_home, "--team")[0]
        assert str(members.get_row_at(0)[1]) == fmt.money(team_total["spend_micros"])
        assert team_total["calls"] == 400
        assert sorted(column(app.query_one("#team-roles", DataTable), 0)) == ["background", "orchestrator", "subagent"]
        models = column(app.query_one("#team-models", DataTable), 0)
        assert "moonshotai/Kimi-K3" in models
        summary = str(app.query_one("#team-summary", Static).render())
        assert "1 members" in summary and "cache hit" in summary
        await pilot.press("p")
        await settle(app, pilot)
        health = str(app.query_one("#health", Static).render())
        assert "7 calls not shipped yet" in health


async def test_without_a_team_table_there_is_no_team_tab(isolated_home: Path) -> None:
    from switch.ui.app import make_app

    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")
    app: Any = make_app(isolated_home / "ledger.db", poll=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        await settle(app, pilot)
        assert not app.query("#team")
        await pilot.press("p")
        await settle(app, pilot)
        assert "Proxy" in str(app.query_one("#health", Static).render())
        assert "Team" not in str(app.query_one("#health", Static).render())
