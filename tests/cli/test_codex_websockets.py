"""Codex's Responses WebSocket from the command line: `switch codex on` and `switch run codex` turn it on for
the `switch` provider exactly when the proxy serves it (`[server] websockets`), and `doctor` checks the
running proxy answers the upgrade as the config says (`[server]` applies at start-up)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from switch.cli import app
from tests.commands import run_switch, stand_in
from tests.servers import free_port

# A stand-in `codex`: records its argv, then opens the Responses WebSocket the way Codex would (to the
# provider's base_url) and exits with the HTTP status of the upgrade's answer (101 accepted) minus 100.
STAND_IN = """
import json, re, sys
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
open({record!r}, "w").write(json.dumps(sys.argv[1:]))
wanted = "model_providers.switch.base_url="
base = next(re.search(r'"(http[^"]+)"', a).group(1) for a in sys.argv if a.startswith(wanted))
try:
    with connect(base.replace("http://", "ws://") + "/responses", additional_headers={{"OpenAI-Beta": "x"}}):
        sys.exit(1)
except InvalidStatus as exc:
    sys.exit(exc.response.status_code - 400)
"""


def _config(home: Path, websockets: bool, port: int | None = None) -> None:
    server = f"port = {port}\n" if port else ""
    (home / "config.toml").write_text(f"[server]\n{server}websockets = {str(websockets).lower()}\n")


def _provider(user_home: Path) -> dict[str, Any]:
    return dict(tomllib.loads((user_home / ".codex" / "config.toml").read_text())["model_providers"]["switch"])


def test_codex_on_turns_websockets_on_for_the_switch_provider_only_when_the_proxy_serves_them(
    isolated_home: Path, user_home: Path
) -> None:
    config = user_home / ".codex" / "config.toml"
    config.write_text('model = "o4"\n')
    _config(isolated_home, True)
    on = CliRunner().invoke(app, ["codex", "on"])
    assert on.exit_code == 0, on.output
    assert _provider(user_home)["supports_websockets"] is True
    _config(isolated_home, False)
    again = CliRunner().invoke(app, ["codex", "on"])
    assert again.exit_code == 0, again.output
    assert "supports_websockets" not in _provider(user_home)
    assert CliRunner().invoke(app, ["codex", "off"]).exit_code == 0
    assert config.read_text() == 'model = "o4"\n'


@pytest.mark.parametrize("websockets", [True, False])
def test_switch_run_codex_passes_websockets_and_the_proxy_answers_the_upgrade_to_match(
    isolated_home: Path, user_home: Path, tmp_path: Path, websockets: bool
) -> None:
    _config(isolated_home, websockets, free_port())
    record = tmp_path / "argv.json"
    path = stand_in(tmp_path, "codex", STAND_IN.format(record=str(record)))
    result = run_switch("run", "codex", "--", "exec", "hi", env={"PATH": path})
    argv = json.loads(record.read_text())
    assert ("model_providers.switch.supports_websockets=true" in argv) is websockets
    # The upgrade reached the proxy `run` started: accepted (exit 1) when on, 426 (exit 26) when off.
    assert result.returncode == (1 if websockets else 26), result.stderr


def _doctor() -> dict[str, Any]:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    return {check["check"]: check for check in json.loads(result.output)["checks"]}


def test_doctor_checks_the_running_proxy_answers_the_upgrade_as_configured(isolated_home: Path) -> None:
    port = free_port()
    _config(isolated_home, True, port)
    assert "websocket" not in _doctor()  # no proxy running: nothing to check
    started = run_switch("up")
    assert started.returncode == 0, started.stderr
    try:
        on = _doctor()["websocket"]
        assert on["ok"] and "accepts Codex's WebSocket upgrade" in on["detail"]
        # [server] applies at start-up: the running proxy still accepts, which doctor reports with the fix.
        _config(isolated_home, False, port)
        stale = _doctor()["websocket"]
        assert not stale["ok"] and "got 101, not 426" in stale["detail"] and "switch up" in stale["fix"]
        assert run_switch("down").returncode == 0 and run_switch("up").returncode == 0
        off = _doctor()["websocket"]
        assert off["ok"] and "websockets = false" in off["detail"]
    finally:
        run_switch("down")
