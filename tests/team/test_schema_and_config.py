"""The server schema and its migrations, the [team] table, and the password kept out of files and output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.config import load_settings
from switch.errors import ConfigError
from switch.ledger.columns import COLUMNS
from switch.team import local
from switch.team.migrations import LATEST, MIGRATIONS, current_version, migrate
from switch.team.server import TeamServerError
from switch.team.shipper import Shipper
from tests.ledger_seed import seeded_rows
from tests.team.helpers import add_rows, connect, make_home, spend_json, switch
from tests.team.pg import PASSWORD

# The local columns a version-1 team server was created with (migration 1 as it shipped).
VERSION_1_COLUMNS = COLUMNS[: COLUMNS.index("budget_action") + 1]


def test_team_init_migrates_a_version_1_server_and_fills_the_rollup_from_its_rows(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    monkeypatch.setenv("SWITCH_HOME", str(home))
    with connect(team_url) as connection:
        migrate(connection, target=1)
        assert current_version(connection) == 1
        # Rows an older switch shipped before the rollup existed.
        # Only the columns version 1 has: later local columns arrive with later server migrations.
        names = ("origin", "local_id", "member", "project", *COLUMNS[: len(VERSION_1_COLUMNS)])
        assert COLUMNS[: len(VERSION_1_COLUMNS)] == VERSION_1_COLUMNS
        rows = [
            ("old-origin", index + 1, "zoe", "", *row[: len(VERSION_1_COLUMNS)])
            for index, row in enumerate(seeded_rows(900))
        ]
        with connection.cursor().copy(f"COPY team_calls ({', '.join(names)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    add_rows(home, 0, 300, 300)
    from switch.config import load_settings as settings_now

    team = settings_now().team
    assert team is not None
    shipper = Shipper(team)
    try:
        with pytest.raises(Exception, match="switch team init"):
            shipper.ship_some()
    finally:
        shipper.stop()

    declined = switch(home, "team", "init", stdin_text="n\n")
    assert declined.returncode == 1 and "2: create team_daily" in declined.stdout
    with connect(team_url) as connection:
        assert current_version(connection) == 1
    applied = switch(home, "team", "init", stdin_text="y\n")
    assert applied.returncode == 0, applied.stderr
    assert "schema at version 1" in applied.stdout and f"schema at version {LATEST}" in applied.stdout
    with connect(team_url) as connection:
        assert current_version(connection) == LATEST
        raw = connection.execute("SELECT COUNT(*), SUM(cost_micros) FROM team_calls").fetchone()
        daily = connection.execute("SELECT SUM(calls), SUM(spend_micros) FROM team_daily").fetchone()
    assert raw is not None and daily is not None and tuple(daily) == tuple(raw)
    assert "up to date" in switch(home, "team", "init").stdout

    shipper = Shipper(team)
    try:
        assert shipper.ship_some()
    finally:
        shipper.stop()
    by_member = {row["grp"]: row for row in spend_json(home, "--team", "--by", "member")}
    assert by_member["ana"]["spend_micros"] == spend_json(home)[0]["spend_micros"]
    assert by_member["zoe"]["calls"] == 900


def _settings_error(tmp_path: Path, body: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    return caught.value.message


@given(
    password=st.text(
        alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters="-_.~!$*"), min_size=1
    )
)
def test_a_password_in_ledger_url_is_refused_without_repeating_it(tmp_path_factory: Any, password: str) -> None:
    tmp_path = tmp_path_factory.mktemp("config")
    message = _settings_error(
        tmp_path, f'[team]\nledger_url = "postgresql://switch:{password}@db.internal:5432/switch"\n'
    )
    assert "SWITCH_TEAM_PASSWORD" in message and "switch keys set team" in message
    assert f":{password}@" not in message and "db.internal" not in message


def test_the_team_table_is_checked_and_member_defaults_to_the_os_user(tmp_path: Path) -> None:
    import getpass

    assert "unknown key 'team.membr'" in _settings_error(
        tmp_path, '[team]\nledger_url = "postgresql://u@h/db"\nmembr = "x"\n'
    )
    assert "team.ledger_url" in _settings_error(tmp_path, '[team]\nledger_url = "mysql://u@h/db"\n')
    (tmp_path / "config.toml").write_text('[team]\nledger_url = "postgresql://u@h/db"\n')
    team = load_settings(tmp_path / "config.toml").team
    assert team is not None and team.member == getpass.getuser() and team.project == ""
    (tmp_path / "config.toml").write_text("")
    assert load_settings(tmp_path / "config.toml").team is None


def test_a_wrong_password_never_shows_and_the_right_one_never_reaches_a_file(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    wrong = "wrong-Pw-4f1a9c-secret"
    failed = switch(home, "team", "init", "--yes", password=wrong)
    assert failed.returncode == 2
    assert "password authentication failed" in failed.stderr and "SWITCH_TEAM_PASSWORD" in failed.stderr
    assert wrong not in failed.stdout + failed.stderr
    assert switch(home, "team", "init", "--yes").returncode == 0
    add_rows(home, 0, 50, 50)
    monkeypatch.setenv("SWITCH_HOME", str(home))
    monkeypatch.setenv("SWITCH_TEAM_PASSWORD", wrong)
    team = load_settings().team
    assert team is not None
    shipper = Shipper(team)
    try:
        with pytest.raises(TeamServerError, match="password authentication failed") as caught:
            shipper.ship_some()
        assert wrong not in caught.value.message and PASSWORD not in caught.value.message
    finally:
        shipper.stop()
    monkeypatch.setenv("SWITCH_TEAM_PASSWORD", PASSWORD)
    shipper = Shipper(team, poll_seconds=0.05, min_backoff=0.05)
    shipper.start()
    try:
        from tests.team.pg import wait_for

        wait_for(lambda: local.cursor(team) == 50)
    finally:
        shipper.stop()
    for path in home.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert PASSWORD.encode() not in content and wrong.encode() not in content, path


def test_without_a_team_table_psycopg_is_never_imported(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from switch.cli import app\n"
        "from switch.config import load_settings\n"
        "from switch.cli.serve import startup_checks\n"
        "startup_checks()\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
        "assert CliRunner().invoke(app, ['status']).exit_code == 1\n"
        "print(sorted(m for m in sys.modules if m.startswith(('psycopg', 'switch.team.s', 'switch.team.r'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_password_stored_with_keys_set_team_is_used(
    team_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_home(tmp_path, "ana", team_url, "ana")
    env = {"SWITCH_HOME": str(home), "SWITCH_TEAM_PASSWORD": ""}
    from tests.commands import run_switch

    stored = run_switch("keys", "set", "team", env=env, stdin=PASSWORD + "\n")
    assert stored.returncode == 0, stored.stderr
    assert PASSWORD not in stored.stdout + stored.stderr
    done = run_switch("team", "init", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    # Counted, not LATEST: reserved migration numbers can leave gaps until the lead renumbers them.
    assert f"applied {len(MIGRATIONS)} migration(s)" in done.stdout


# The texts of the migrations that have shipped, as digests: a shipped migration never changes, because a
# server already at that version would never run the new text (append a migration instead).
SHIPPED_MIGRATION_DIGESTS = {
    1: "69191f8bbf7e10bd22d210c99125d76093ccb2ddaa4fad8b921f7e7f3b819220",
    2: "8e2a5cc2775af2688cded3b3e0eeadc3328becfd7b7b8b55794f4ae31bfe798d",
    3: "dc5f29e5a706f454728ef5914377560ec5c2c4b1f6e9f870892283cc769276fd",
    5: "cbb4961c283f696e34a6034ed78f20420649131fc2be8730df4292962e967c76",
}


def _digest(statements: tuple[str, ...]) -> str:
    import hashlib

    return hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()


def test_a_shipped_team_migration_never_changes() -> None:
    from switch.team.migrations import MIGRATIONS

    shipped = {migration.version: _digest(migration.statements) for migration in MIGRATIONS}
    for version, digest in SHIPPED_MIGRATION_DIGESTS.items():
        assert shipped[version] == digest, f"team migration {version} changed: add a new migration instead"


def test_a_migrated_team_server_has_every_local_column_the_shipper_sends(team_url: str) -> None:
    from switch.team.sql import SHIPPED_COLUMNS

    with connect(team_url) as connection:
        migrate(connection)
        found = [
            row[0]
            for row in connection.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'team_calls' "
                "ORDER BY ordinal_position"
            ).fetchall()
        ]
    assert found == ["id", *SHIPPED_COLUMNS]
