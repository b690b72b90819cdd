"""`switch config path|show|edit|example`, run as a user runs them: their own process, a real home."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from switch.cli.configure import example_text
from switch.config import Defaults, Pricing, Routing, Server, Settings, load_settings
from switch.config_schema import field_names, to_dict, validate
from tests.commands import run_switch, stand_in

SETTING_LINE = re.compile(r"^# (\[.*\]|[A-Za-z_]+ = .*)$")


def uncommented(example: str) -> str:
    """The example with every setting line switched on (its `##` prose stays a comment)."""
    return "\n".join(line[2:] if SETTING_LINE.match(line) else line for line in example.splitlines())


def test_config_path_names_the_file_and_says_when_it_is_missing(isolated_home: Path) -> None:
    result = run_switch("config", "path")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(isolated_home / "config.toml")
    assert "no such file yet" in result.stderr
    (isolated_home / "config.toml").write_text("")
    again = run_switch("config", "path")
    assert again.stdout.strip() == str(isolated_home / "config.toml") and again.stderr == ""


def test_config_show_prints_the_defaults_when_there_is_no_file(isolated_home: Path) -> None:
    result = run_switch("config", "show")
    assert result.returncode == 0, result.stderr
    assert "does not exist" in result.stdout
    shown = tomllib.loads(result.stdout)
    assert shown == to_dict(load_settings(), exclude_none=True)
    assert shown["server"]["port"] == 8742 and shown["providers"]["baseten"]["api_key_env"] == "BASETEN_API_KEY"


def test_config_show_is_the_file_over_the_defaults_and_never_shows_the_access_token(isolated_home: Path) -> None:
    token = "tok-7f3a9c2e-never-shown"
    (isolated_home / "config.toml").write_text(
        f'[server]\nport = 9100\naccess_token = "{token}"\n[providers.baseten]\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    for args in (("config", "show"), ("config", "show", "--json")):
        result = run_switch(*args)
        assert result.returncode == 0, result.stderr
        assert token not in result.stdout + result.stderr
        shown = json.loads(result.stdout) if "--json" in args else tomllib.loads(result.stdout)
        assert shown["server"]["port"] == 9100
        assert shown["server"]["access_token"] == "<set, not shown>"
        assert shown["server"]["read_timeout"] == 300.0  # a default beside the file's keys
        assert shown["providers"]["baseten"]["base_url"] == "http://127.0.0.1:9/v1"
        assert shown["providers"]["baseten"]["api_key_env"] == "BASETEN_API_KEY"  # the built-in field kept


def test_config_show_on_a_broken_file_is_one_switch_line(isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text("[server]\nprot = 1\n")
    result = run_switch("config", "show")
    assert result.returncode == 2
    assert result.stderr.startswith("switch: ") and result.stderr.count("\n") == 1
    assert "server.prot" in result.stderr and "Traceback" not in result.stderr


def test_config_example_sets_nothing_as_shipped(isolated_home: Path) -> None:
    result = run_switch("config", "example")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == example_text().strip()
    (isolated_home / "config.toml").write_text(result.stdout)
    assert load_settings() == validate(Settings, {"providers": load_settings(Path("/nonexistent")).providers})


def test_every_setting_in_the_example_is_valid_once_uncommented(isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text(uncommented(example_text()))
    settings = load_settings()
    assert settings.server.access_token is not None and settings.team is not None
    assert settings.budgets and "gemini" in settings.providers
    assert "baseten/moonshotai/Kimi-K3" in settings.prices and "baseten/moonshotai/Kimi-K3" in settings.models


@pytest.mark.parametrize("table", [Server, Defaults, Routing, Pricing])
def test_the_example_shows_every_key_of_each_fixed_table_at_its_default(table: type) -> None:
    name = {Server: "server", Defaults: "defaults", Routing: "routing", Pricing: "pricing"}[table]
    shown = tomllib.loads(uncommented(example_text()))[name]
    assert set(shown) == set(field_names(table))
    defaults = to_dict(table())
    for key, value in shown.items():
        if key != "access_token":
            assert value == defaults[key], f"{name}.{key}"


def test_config_edit_starts_a_missing_file_as_the_example_and_checks_the_edit(
    isolated_home: Path, tmp_path: Path
) -> None:
    # A stand-in editor that does what a user would: switch on the [server] port line.
    path = stand_in(
        tmp_path,
        "fake-editor",
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[-1])\n"
        "p.write_text(p.read_text().replace('# [server]', '[server]').replace('# port = 8742', 'port = 9200'))\n",
    )
    result = run_switch("config", "edit", env={"PATH": path, "VISUAL": "", "EDITOR": "fake-editor --wait"})
    assert result.returncode == 0, result.stderr
    assert "Created" in result.stdout and "is valid" in result.stdout
    config = isolated_home / "config.toml"
    assert (config.stat().st_mode & 0o777) == 0o600
    assert load_settings().server.port == 9200
    assert "## switch's config.toml" in config.read_text()


def test_config_edit_reports_a_broken_edit_and_leaves_the_file(isolated_home: Path, tmp_path: Path) -> None:
    path = stand_in(tmp_path, "bad-editor", "import sys\nopen(sys.argv[-1], 'a').write('[server]\\nport = \\n')\n")
    (isolated_home / "config.toml").write_text("# mine\n")
    result = run_switch("config", "edit", env={"PATH": path, "VISUAL": "bad-editor"})
    assert result.returncode == 2
    assert result.stderr.startswith("switch: ") and "config.toml" in result.stderr and "Traceback" not in result.stderr
    assert (isolated_home / "config.toml").read_text() == "# mine\n[server]\nport = \n"


def test_config_edit_without_an_editor_says_how_to_set_one(isolated_home: Path) -> None:
    result = run_switch("config", "edit", env={"VISUAL": "", "EDITOR": ""})
    assert result.returncode == 2
    assert result.stderr.startswith("switch: no editor") and "$EDITOR" in result.stderr
    assert not (isolated_home / "config.toml").exists()


def test_config_edit_with_a_missing_editor_program_is_one_line(isolated_home: Path) -> None:
    result = run_switch("config", "edit", env={"VISUAL": "", "EDITOR": "no-such-editor-7c1"})
    assert result.returncode == 2
    assert result.stderr.startswith("switch: cannot start the editor") and "Traceback" not in result.stderr


def test_the_example_ships_in_the_built_package(tmp_path: Path) -> None:
    from tests.test_packaging import build_lib

    lib = build_lib(tmp_path)
    assert (lib / "switch" / "config_example.toml").read_text(encoding="utf-8") == example_text()
