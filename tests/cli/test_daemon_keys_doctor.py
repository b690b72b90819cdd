"""`switch up|status|down`, `switch run`, `switch keys`, `switch doctor` as a user runs them."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from switch.cli import app
from tests.commands import run_switch, stand_in
from tests.conftest import FAKE_BASETEN_KEY
from tests.servers import free_port


def test_up_status_down_sequence(isolated_home: Path) -> None:
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    try:
        first = run_switch("up")
        assert first.returncode == 0 and f"started on 127.0.0.1:{port}" in first.stdout
        again = run_switch("up")
        assert again.returncode == 0 and "already running" in again.stdout
        status = json.loads(run_switch("status", "--json").stdout)
        assert status["running"] and status["port"] == port
        assert stat.S_IMODE((isolated_home / "run").stat().st_mode) == 0o700
    finally:
        down = run_switch("down")
    assert "stopped" in down.stdout
    assert "not running" in run_switch("status").stdout


def test_busy_port_is_explained(isolated_home: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run_switch("up", "--port", str(port))
    assert result.returncode == 2
    assert f"port {port}" in result.stderr and "already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_stale_record_is_explained(isolated_home: Path) -> None:
    (isolated_home / "run").mkdir()
    (isolated_home / "run" / "proxy.json").write_text(json.dumps({"pid": 999999, "port": 1, "started_at": 0}))
    assert "stale" in run_switch("status").stdout
    assert "stale record" in run_switch("down").stdout
    assert not (isolated_home / "run" / "proxy.json").exists()


def test_run_claude_passes_settings_and_returns_its_exit_code(isolated_home: Path, tmp_path: Path) -> None:
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    record = tmp_path / "argv.json"
    path = stand_in(
        tmp_path,
        "claude",
        "import json, sys, urllib.request\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "settings = json.loads(sys.argv[sys.argv.index('--settings') + 1])\n"
        "urllib.request.urlopen(settings['env']['ANTHROPIC_BASE_URL'] + '/healthz').read()\n"
        "sys.exit(7)\n",
    )
    result = run_switch("run", "claude", "--", "-p", "hello", env={"PATH": path})
    assert result.returncode == 7, result.stderr
    argv = json.loads(record.read_text())
    settings = json.loads(argv[argv.index("--settings") + 1])
    assert settings["env"]["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}"
    assert argv[-2:] == ["-p", "hello"]
    assert "not running" in run_switch("status").stdout  # it stopped the proxy it started


def test_keys_use_the_announced_file_store_and_never_print_a_key(isolated_home: Path) -> None:
    secret = "sk-fake-stored-key-42"
    stored = run_switch("keys", "set", "baseten", stdin=secret + "\n")
    assert stored.returncode == 0 and "mode 0600" in stored.stdout and secret not in stored.stdout
    key_file = isolated_home / "keys.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    listing = run_switch("keys", "list")
    assert "baseten      file" in listing.stdout and secret not in listing.stdout + listing.stderr
    assert json.loads(run_switch("keys", "list", "--json").stdout)["providers"]["baseten"] == "file"
    assert "Removed" in run_switch("keys", "rm", "baseten").stdout
    assert "no key" in run_switch("keys", "list").stdout


def test_doctor_reports_each_injected_problem_with_its_fix(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    (isolated_home / "active-preset").write_text("kimi-k3\n")
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-opus-5-5")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BASETEN_API_KEY", "")
    (isolated_home / "wiring").mkdir()
    (isolated_home / "wiring" / "claude.json").write_text(
        json.dumps({"path": str(tmp_path / "gone.json"), "values": {"ANTHROPIC_BASE_URL": "x"}})
    )
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 1
    report = {check["check"]: check for check in json.loads(result.output)["checks"]}
    assert not report["key:baseten"]["ok"] and "switch keys set baseten" in report["key:baseten"]["fix"]
    assert not report["proxy"]["ok"] and report["proxy"]["fix"] == "switch up"
    assert not report["wiring:claude"]["ok"] and "switch claude" in report["wiring:claude"]["fix"]
    assert not report["env:ANTHROPIC_MODEL"]["ok"] and report["env:ANTHROPIC_MODEL"]["fix"] == "unset ANTHROPIC_MODEL"
    assert report["config"]["ok"] and report["preset"]["ok"]
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    fixed = CliRunner().invoke(app, ["doctor", "--json"])
    assert json.loads(fixed.output)["checks"][2]["ok"]
    assert FAKE_BASETEN_KEY not in fixed.output


def doctor_checks() -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    return {check["check"]: check for check in json.loads(result.output)["checks"]}


def test_doctor_warns_about_role_forcing_model_names_while_the_preset_splits_roles(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    # What a user of the old hint has: dcode's default model, a Codex profile and Claude Code each forcing a role.
    (tmp_path / ".deepagents").mkdir()
    dcode_config = tmp_path / ".deepagents" / "config.toml"
    dcode_config.write_text('[models]\ndefault = "switch:switch/orchestrator"\n')
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('[profiles.switch]\nmodel = "switch/subagent"\n')
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text('{"model": "claude-switch-orchestrator"}')

    (isolated_home / "active-preset").write_text("kimi-k3\n")  # one target for every role: nothing to lose
    assert not [name for name in doctor_checks() if name.startswith("model:")]

    (isolated_home / "active-preset").write_text("hybrid\n")  # native orchestrator, Kimi subagents
    report = doctor_checks()
    langchain = report["model:langchain"]
    assert not langchain["ok"] and '[models] default = "switch:switch/orchestrator"' in langchain["detail"]
    assert "subagent and background calls elsewhere" in langchain["detail"]
    assert "dcode -M switch:switch/auto" in langchain["fix"]
    assert not report["model:codex"]["ok"] and "[profiles.switch] model" in report["model:codex"]["fix"]
    assert not report["model:claude"]["ok"] and "sonnet" in report["model:claude"]["fix"]

    # Following the fix clears the finding.
    dcode_config.write_text('[models]\ndefault = "switch:switch/auto"\n')
    assert "model:langchain" not in doctor_checks()


@pytest.mark.parametrize("user_key", ["sk-user-own-openai-key-123", None])
def test_run_dcode_keeps_the_users_key_and_only_fills_a_missing_one(
    isolated_home: Path, tmp_path: Path, user_key: str | None
) -> None:
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    record = tmp_path / "env.json"
    path = stand_in(
        tmp_path,
        "dcode",
        "import json, os, urllib.request\n"
        "names = ('OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_BASE_URL')\n"
        f"open({str(record)!r}, 'w').write(json.dumps({{n: os.environ.get(n) for n in names}}))\n"
        "urllib.request.urlopen(os.environ['OPENAI_BASE_URL'].removesuffix('/v1') + '/healthz').read()\n",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PATH"] = path
    if user_key is not None:
        env["OPENAI_API_KEY"] = user_key
    result = subprocess.run(
        [sys.executable, "-m", "switch", "run", "dcode", "--", "-n", "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(record.read_text())
    assert seen["OPENAI_BASE_URL"] == f"http://127.0.0.1:{port}/v1"
    if user_key is not None:
        assert seen["OPENAI_API_KEY"] == user_key
    else:
        # The clients refuse to start without some key: a stand-in, never shown to the user.
        assert seen["OPENAI_API_KEY"] and seen["OPENAI_API_KEY"] not in result.stdout + result.stderr
    assert seen["ANTHROPIC_API_KEY"] and seen["ANTHROPIC_API_KEY"] not in result.stdout + result.stderr
    assert "not running" in run_switch("status").stdout


@pytest.mark.parametrize(
    "legacy", ['[profiles.switch]\nmodel_provider = "switch"\n', 'profile = "switch"\n'], ids=["table", "selector"]
)
def test_doctor_reports_a_legacy_switch_profile_codex_refuses(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, legacy: str
) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    (tmp_path / ".codex").mkdir()
    config = tmp_path / ".codex" / "config.toml"
    config.write_text(legacy)
    finding = doctor_checks()["codex:profile"]
    assert not finding["ok"] and "refuses to start `codex --profile switch`" in finding["detail"]
    assert finding["fix"].startswith("switch codex on") and "switch.config.toml" in finding["fix"]
    # Following the fix clears it.
    assert CliRunner().invoke(app, ["codex", "on"]).exit_code == 0
    assert doctor_checks()["codex:profile"]["ok"]


@pytest.mark.parametrize(("auth", "ok"), [('{"auth_mode": "chatgpt"}', False), ('{"auth_mode": "apikey"}', True)])
def test_doctor_says_when_codexs_login_cannot_use_the_native_route(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auth: str, ok: bool
) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "auth.json").write_text(auth)
    assert CliRunner().invoke(app, ["codex", "on"]).exit_code == 0
    (isolated_home / "active-preset").write_text("kimi-k3\n")  # no native Codex route: nothing to say
    assert "codex:login" not in doctor_checks()
    (isolated_home / "active-preset").write_text("hybrid\n")  # native orchestrator
    finding = doctor_checks()["codex:login"]
    assert finding["ok"] is ok
    if not ok:
        assert "ChatGPT" in finding["detail"] and "codex login --with-api-key" in finding["fix"]
