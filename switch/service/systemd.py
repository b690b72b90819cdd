"""The systemd user units of the login service: a socket unit holding the port, and the service it starts.

The socket unit listens from login on and hands the socket to `switch serve` (see
`switch.service.activation`), so a call that arrives while the proxy starts or restarts waits instead of
failing; the service restarts on failure and fails open on a config it cannot use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from switch.errors import SwitchError
from switch.service.spec import ServiceSpec


def unit_directory() -> Path:
    """Where systemd looks for the user's own units."""
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else Path.home() / ".config") / "systemd" / "user"


def _quoted(word: str) -> str:
    """One word of an ExecStart= or Environment= line: specifiers (%) and variables ($) kept literal."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def _path(path: Path) -> str:
    """A path setting (WorkingDirectory=, StandardOutput=append:), which takes no quotes: specifiers kept literal."""
    return str(path).replace("%", "%%")


def _listen_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def render(spec: ServiceSpec) -> dict[str, str]:
    """Each unit file's name and text."""
    for value in (str(spec.home), spec.python):
        if any(ord(character) < 32 for character in value):
            raise SwitchError(f"{value!r} holds a control character, which a unit file cannot carry; use another path")
    socket_unit = f"{spec.name}.socket"
    service_unit = f"{spec.name}.service"
    where = f"SWITCH_HOME={spec.home}"
    socket_text = (
        "# Written by `switch service install`; `switch service uninstall` removes it.\n"
        "[Unit]\n"
        f"Description=switch proxy socket ({where})\n"
        "\n"
        "[Socket]\n"
        f"ListenStream={_listen_address(spec.host, spec.port)}\n"
        "NoDelay=true\n"
        "Backlog=2048\n"
        f"Service={service_unit}\n"
        "\n"
        "[Install]\n"
        "WantedBy=sockets.target\n"
    )
    command = " ".join(_quoted(word) for word in spec.command)
    service_text = (
        "# Written by `switch service install`; `switch service uninstall` removes it.\n"
        "[Unit]\n"
        f"Description=switch routing proxy ({where})\n"
        f"Requires={socket_unit}\n"
        f"After={socket_unit}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"Environment={_quoted(where)}\n"
        f"Environment={_quoted('SWITCH_SERVICE=systemd')}\n"
        f"WorkingDirectory={_path(spec.home)}\n"
        f"ExecStart={command}\n"
        f"StandardOutput=append:{_path(spec.log)}\n"
        "StandardError=inherit\n"
        "Restart=on-failure\n"
        "RestartSec=1\n"
        f"TimeoutStopSec={spec.stop_timeout}\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )
    return {socket_unit: socket_text, service_unit: service_text}


def manager_runs() -> bool:
    """Whether a systemd user manager answers for this user (it does not in most containers)."""
    if shutil.which("systemctl") is None:
        return False
    try:
        result = subprocess.run(
            ["systemctl", "--user", "show-environment"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def start_commands(name: str) -> list[list[str]]:
    """What makes systemd take the new units up: the socket from now on and at every login, the proxy now."""
    return [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", f"{name}.socket"],
        ["systemctl", "--user", "start", f"{name}.service"],
    ]


def stop_commands(name: str) -> list[list[str]]:
    """What stops and disables the units before their files go."""
    return [["systemctl", "--user", "disable", "--now", f"{name}.socket", f"{name}.service"]]


def after_removal_commands() -> list[list[str]]:
    """What makes systemd forget the removed files."""
    return [["systemctl", "--user", "daemon-reload"]]


def state_command(name: str) -> list[str]:
    """The command that prints whether the units are active."""
    return ["systemctl", "--user", "is-active", f"{name}.socket", f"{name}.service"]
