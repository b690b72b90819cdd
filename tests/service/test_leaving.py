"""Wiring that warns, doctor on a dead port, `switch off`, and a status line that stays quiet once switch is gone."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from switch import wiring
from tests.commands import run_switch
from tests.servers import free_port, serve_process

CLAUDE = '{\n    "env": {"FOO": "bar"},\n    "model": "opus"\n}\n'
CODEX = '# mine\nmodel = "gpt-5.5"\n\n[profiles.fast]\nmodel = "gpt-5.5-mini"\n'
DEEPAGENTS = '[models]\ndefault = "anthropic:claude-opus-5-5"\n'


@pytest.fixture
def user(tmp_path: Path, isolated_home: Path) -> dict[str, str]:
    """A user with all three harnesses configured, a configured proxy port, and no service manager reachable."""
    home = tmp_path / "user"
    for folder, name, text in ((".claude", "settings.json", CLAUDE), (".codex", "config.toml", CODEX)) + (
        (".deepagents", "config.toml", DEEPAGENTS),
    ):
        (home / folder).mkdir(parents=True)
        (home / folder / name).write_text(text)
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    return {
        "HOME": str(home),
        "SWITCH_HOME": str(isolated_home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime"),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'no-bus'}",
        "CLAUDE_CONFIG_DIR": "",
        "CODEX_HOME": "",
    }


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def port_of(isolated_home: Path) -> int:
    return int((isolated_home / "config.toml").read_text().split("=")[1].split()[0])


def test_on_warns_when_nothing_answers_on_the_wired_port_and_not_when_a_proxy_does(
    user: dict[str, str], isolated_home: Path
) -> None:
    port = port_of(isolated_home)
    for harness in ("claude", "codex", "langchain"):
        result = run_switch(harness, "on", env=user)
        assert result.returncode == 0, result.stderr
        assert f"warning: {harness} is wired to 127.0.0.1:{port}, where nothing answers" in result.stdout
        assert "switch up" in result.stdout and "switch service install" in result.stdout
    assert "Claude Code hangs on every call" in run_switch("claude", "on", env=user).stdout
    with serve_process(port, {"SWITCH_HOME": str(isolated_home)}):
        assert "warning" not in run_switch("claude", "on", env=user).stdout


def test_doctor_fails_each_wired_harness_whose_port_has_nothing_answering(
    user: dict[str, str], isolated_home: Path
) -> None:
    port = port_of(isolated_home)
    assert run_switch("claude", "on", env=user).returncode == 0
    assert run_switch("codex", "on", env=user).returncode == 0
    result = run_switch("doctor", "--json", env=user)
    assert result.returncode == 1
    checks = {entry["check"]: entry for entry in json.loads(result.stdout)["checks"]}
    for harness in ("claude", "codex"):
        found = checks[f"wiring:{harness}"]
        assert not found["ok"]
        assert found["detail"].startswith(f"{harness} is wired to 127.0.0.1:{port}, where nothing answers")
        assert "switch up" in found["fix"] and f"switch {harness} off" in found["fix"]
    assert checks["wiring:langchain"]["ok"]  # not wired: nothing to warn about
    with serve_process(port, {"SWITCH_HOME": str(isolated_home)}):
        checks = {e["check"]: e for e in json.loads(run_switch("doctor", "--json", env=user).stdout)["checks"]}
        assert checks["wiring:claude"]["ok"] and checks["wiring:codex"]["ok"]


def test_doctor_names_the_wired_harnesses_even_when_config_toml_is_broken(
    user: dict[str, str], isolated_home: Path
) -> None:
    port = port_of(isolated_home)
    assert run_switch("claude", "on", env=user).returncode == 0
    (isolated_home / "config.toml").write_text(f'[server]\nport = {port}\n[routing]\nttft_timeout = "soon"\n')
    result = run_switch("doctor", env=user)
    assert result.returncode == 1 and f"claude is wired to 127.0.0.1:{port}, where nothing answers" in result.stdout


def test_off_restores_every_harness_file_byte_for_byte_and_removes_the_service(
    user: dict[str, str], isolated_home: Path
) -> None:
    home = Path(user["HOME"])
    before = snapshot(home)
    for command in (("claude", "on"), ("codex", "on"), ("langchain", "on"), ("service", "install")):
        assert run_switch(*command, env=user).returncode == 0, command
    assert snapshot(home) != before
    assert list((home / ".config" / "systemd" / "user").iterdir())
    result = run_switch("off", env=user)
    assert result.returncode == 0, result.stderr
    assert snapshot(home) == before
    assert not (isolated_home / "service.json").exists()
    assert "claude: off" in result.stdout and "service: removed" in result.stdout
    # Nothing left to undo: it says so for each, and still succeeds.
    again = run_switch("off", env=user)
    assert again.returncode == 0 and "claude: was not on" in again.stdout and "not installed" in again.stdout


def hook_command(argv: list[str]) -> str:
    return "2>/dev/null " + shlex.join(argv)


def run_in_shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, input='{"session_id": "s"}', capture_output=True, text=True, timeout=60)


def test_the_status_line_command_is_quiet_once_switch_is_gone(tmp_path: Path) -> None:
    written = wiring.claude_statusline()["command"]
    argv = wiring.hook_argv("statusline")
    assert written == hook_command(argv)
    assert run_in_shell(written).stdout.startswith("switch")  # installed: the line
    # `pip uninstall` removed the package, the interpreter is still there.
    root = str(Path(wiring.__file__).resolve().parent.parent.parent)
    gone_package = [*argv[:4], argv[4].replace(repr(root), repr(str(tmp_path / "gone"))), *argv[5:]]
    result = run_in_shell(hook_command(gone_package))
    assert (result.stdout, result.stderr, result.returncode) == ("", "", 0)
    # The whole virtual environment was deleted: the interpreter itself is gone.
    result = run_in_shell(hook_command([str(tmp_path / "venv" / "bin" / "python"), *argv[1:]]))
    assert (result.stdout, result.stderr) == ("", "")
    assert sys.executable in written
