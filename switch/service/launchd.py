"""The launchd agent of the login service on macOS: started at login (RunAtLoad) and kept alive (KeepAlive).

A plain agent: launchd's own socket hand-over (launch_activate_socket) is not used, so between a crash and
launchd's restart a call is refused rather than held; `KeepAlive` restarts the proxy within seconds.
"""

from __future__ import annotations

import os
import plistlib
import shutil
from pathlib import Path

from switch.service.spec import ServiceSpec


def unit_directory() -> Path:
    """Where launchd loads the user's agents from at login."""
    return Path.home() / "Library" / "LaunchAgents"


def label(name: str) -> str:
    """The agent's launchd label for a unit name (`switch` → `dev.switch.proxy`)."""
    return "dev.switch.proxy" + name.removeprefix("switch")


def render(spec: ServiceSpec) -> dict[str, str]:
    """The agent's plist file name and text."""
    agent = label(spec.name)
    plist = {
        "Label": agent,
        "ProgramArguments": list(spec.command),
        "EnvironmentVariables": {"SWITCH_HOME": str(spec.home), "SWITCH_SERVICE": "launchd"},
        "WorkingDirectory": str(spec.home),
        "RunAtLoad": True,
        "KeepAlive": True,
        "ThrottleInterval": 5,
        "ExitTimeOut": spec.stop_timeout,
        "StandardOutPath": str(spec.log),
        "StandardErrorPath": str(spec.log),
        "ProcessType": "Interactive",
    }
    return {f"{agent}.plist": plistlib.dumps(plist).decode("utf-8")}


def manager_runs() -> bool:
    """Whether launchd can be asked to load agents (macOS with launchctl)."""
    return shutil.which("launchctl") is not None


def _domain() -> str:
    return f"gui/{os.getuid()}"


def start_commands(name: str) -> list[list[str]]:
    """What loads the agent now (it loads by itself at every later login)."""
    path = unit_directory() / f"{label(name)}.plist"
    return [["launchctl", "bootstrap", _domain(), str(path)]]


def stop_commands(name: str) -> list[list[str]]:
    """What unloads the agent (stopping the proxy) before its file goes."""
    return [["launchctl", "bootout", f"{_domain()}/{label(name)}"]]


def after_removal_commands() -> list[list[str]]:
    """Nothing: launchd forgets an unloaded agent on its own."""
    return []


def state_command(name: str) -> list[str]:
    """The command that prints the agent's state."""
    return ["launchctl", "print", f"{_domain()}/{label(name)}"]
