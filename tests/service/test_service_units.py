"""`switch service install | status | uninstall`: unit files systemd accepts, a launchd plist, exact removal."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from switch.service.spec import unit_name
from tests.commands import run_switch
from tests.servers import free_port

NEIGHBOUR = b"[Unit]\nDescription=the user's own unit, which switch must never touch\n"


@pytest.fixture
def user_env(tmp_path: Path, isolated_home: Path) -> dict[str, str]:
    """A user with their own HOME and XDG_CONFIG_HOME, and no systemd user manager reachable (the real
    systemctl finds no bus: there is none on this machine, and none is pointed at)."""
    config = tmp_path / "xdg"
    return {
        "HOME": str(tmp_path / "user"),
        "XDG_CONFIG_HOME": str(config),
        "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime"),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'no-bus'}",
        "SWITCH_HOME": str(isolated_home),
    }


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    # Never skipped: .ci/run installs the systemd package where this is missing.
    assert found, "systemd-analyze is missing: install the systemd package (apt-get install systemd), as .ci/run does"
    return found


def test_install_writes_units_systemd_verifies_and_uninstall_removes_exactly_them(
    user_env: dict[str, str], isolated_home: Path
) -> None:
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    units = Path(user_env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "mine.service").write_bytes(NEIGHBOUR)
    name = unit_name(isolated_home)

    result = run_switch("service", "install", env=user_env)
    assert result.returncode == 0, result.stderr
    socket_file, service_file = units / f"{name}.socket", units / f"{name}.service"
    assert sorted(p.name for p in units.iterdir()) == sorted(["mine.service", socket_file.name, service_file.name])
    socket_text, service_text = socket_file.read_text(), service_file.read_text()
    assert f"ListenStream=127.0.0.1:{port}\n" in socket_text
    assert f'ExecStart="{sys.executable}" "-P" "-m" "switch" "serve" "--fail-open"' in service_text
    assert f'Environment="SWITCH_HOME={isolated_home.resolve()}"' in service_text
    assert "Restart=on-failure\n" in service_text and f"Requires={name}.socket\n" in service_text
    # No user manager here: it says exactly what to run instead of pretending it started anything.
    assert "not started" in result.stdout
    assert f"systemctl --user enable --now {name}.socket" in result.stdout

    verify = subprocess.run(
        [systemd_analyze(), "verify", str(socket_file), str(service_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **user_env},
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr

    status = run_switch("service", "status", env=user_env)
    assert status.returncode == 0 and "intact" in status.stdout and "does not answer" in status.stdout
    doctor = json.loads(run_switch("doctor", "--json", env=user_env).stdout)
    (service,) = [entry for entry in doctor["checks"] if entry["check"] == "service"]
    assert not service["ok"] and "no service manager runs here" in service["detail"]
    assert f"systemctl --user enable --now {name}.socket" in service["fix"] and "switch up" in service["fix"]

    service_file.write_text(service_text + "# edited\n")
    doctor = json.loads(run_switch("doctor", "--json", env=user_env).stdout)
    (service,) = [entry for entry in doctor["checks"] if entry["check"] == "service"]
    assert "changed or are gone" in service["detail"] and service["fix"] == "switch service install"
    service_file.write_text(service_text)
    removed = run_switch("service", "uninstall", env=user_env)
    assert removed.returncode == 0, removed.stderr
    assert sorted(p.name for p in units.iterdir()) == ["mine.service"]
    assert (units / "mine.service").read_bytes() == NEIGHBOUR
    assert not (isolated_home / "service.json").exists()
    again = run_switch("service", "uninstall", env=user_env)
    assert again.returncode == 1 and "not installed" in again.stdout


def test_a_unit_file_switch_did_not_write_is_never_overwritten(user_env: dict[str, str], isolated_home: Path) -> None:
    units = Path(user_env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    units.mkdir(parents=True)
    theirs = units / f"{unit_name(isolated_home)}.service"
    theirs.write_bytes(NEIGHBOUR)
    result = run_switch("service", "install", env=user_env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"switch: {theirs} exists and switch did not write it")
    assert theirs.read_bytes() == NEIGHBOUR and not (isolated_home / "service.json").exists()


def test_a_unit_changed_after_install_is_kept_by_uninstall(user_env: dict[str, str], isolated_home: Path) -> None:
    assert run_switch("service", "install", env=user_env).returncode == 0
    units = Path(user_env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    edited = units / f"{unit_name(isolated_home)}.service"
    edited.write_text(edited.read_text() + "# my edit\n")
    result = run_switch("service", "uninstall", env=user_env)
    assert result.returncode == 0 and f"kept {edited}" in result.stdout
    assert edited.exists() and not (units / f"{unit_name(isolated_home)}.socket").exists()


def test_a_home_path_with_spaces_and_percent_signs_still_verifies(tmp_path: Path, user_env: dict[str, str]) -> None:
    home = tmp_path / "my 100% home"
    home.mkdir()
    env = {**user_env, "SWITCH_HOME": str(home)}
    assert run_switch("service", "install", env=env).returncode == 0
    units = sorted((Path(user_env["XDG_CONFIG_HOME"]) / "systemd" / "user").iterdir())
    verify = subprocess.run([systemd_analyze(), "verify", *map(str, units)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert 'Environment="SWITCH_HOME=' + str(home.resolve()).replace("%", "%%") + '"' in units[0].read_text()


def test_the_launchd_agent_plist_parses_and_runs_this_python_at_login(
    user_env: dict[str, str], isolated_home: Path
) -> None:
    result = run_switch("service", "install", "--manager", "launchd", env=user_env)
    assert result.returncode == 0, result.stderr
    agents = Path(user_env["HOME"]) / "Library" / "LaunchAgents"
    (plist_file,) = agents.iterdir()
    agent = plistlib.loads(plist_file.read_bytes())
    assert agent["Label"] == plist_file.stem and agent["Label"].startswith("dev.switch.proxy")
    assert agent["ProgramArguments"] == [sys.executable, "-P", "-m", "switch", "serve", "--fail-open"] + [
        "--log-level",
        "info",
    ]
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] is True
    assert agent["EnvironmentVariables"] == {"SWITCH_HOME": str(isolated_home.resolve()), "SWITCH_SERVICE": "launchd"}
    assert agent["StandardOutPath"] == str(isolated_home.resolve() / "logs" / "proxy.log")
    assert "launchctl bootstrap gui/" in result.stdout  # no launchd here: it says what to run
    assert run_switch("service", "uninstall", env=user_env).returncode == 0
    assert list(agents.iterdir()) == []


def test_where_a_user_manager_runs_install_starts_the_service_and_up_down_and_uninstall_follow_it(
    user_env: dict[str, str], isolated_home: Path, tmp_path: Path
) -> None:
    """The manager's side is the stand-in in fake_systemctl.py (no user manager can run here); switch's side,
    the unit files and the proxy the service starts, are real."""
    from tests.commands import stand_in
    from tests.servers import answers_health, wait_until

    log = tmp_path / "systemctl.log"
    script = Path(__file__).with_name("fake_systemctl.py").read_text()
    env = {
        **user_env,
        "PATH": stand_in(tmp_path, "systemctl", script),
        "FAKE_SYSTEMCTL_LOG": str(log),
        "FAKE_SYSTEMCTL_STATE": str(tmp_path / "holder.pid"),
    }
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    name = unit_name(isolated_home)
    try:
        assert run_switch("up", env=env).returncode == 0  # a `switch up` proxy on the port, which the socket needs
        result = run_switch("service", "install", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "service: started" in result.stdout and "stopped this home's background proxy" in result.stdout
        assert not (isolated_home / "run" / "proxy.json").exists()
        asked = [line for line in log.read_text().splitlines() if line.split()[1] not in ("hold", "show-environment")]
        assert asked == [
            "--user daemon-reload",
            f"--user enable --now {name}.socket",
            f"--user start {name}.service",
        ]
        assert "under the login service (systemd" in run_switch("status", env=env).stdout
        assert run_switch("down", env=env).returncode == 1 and answers_health(port)
        assert "already running" in run_switch("up", env=env).stdout
        removed = run_switch("service", "uninstall", env=env)
        assert removed.returncode == 0 and f"--user disable --now {name}.socket {name}.service" in log.read_text()
        wait_until(lambda: not answers_health(port), what="the service's proxy to stop")
    finally:
        holder = tmp_path / "holder.pid"
        if holder.exists():
            os.kill(int(holder.read_text()), 15)
