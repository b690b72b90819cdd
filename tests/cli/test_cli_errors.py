"""Every command, run as a user runs it, against every kind of broken configuration: one `switch: …` line
naming the file and the fix, a documented exit code, never a traceback.

The commands are enumerated from the typer app, so a new command fails `test_every_command_has_safe_arguments`
until it is given arguments here, and from then on runs against every broken configuration.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from switch.cli import app
from switch.config import load_settings
from switch.errors import ConfigError
from tests.servers import free_port

TRACEBACK = "Traceback (most recent call last)"
PRESET = "{preset}"  # replaced by the preset the broken configuration is about
OUTPUT = "{output}"
PORT = "{port}"

# Arguments that are safe to run: nothing reaches the real HOME (see `user_env`), nothing runs for long.
SAFE_ARGUMENTS: dict[str, list[list[str]]] = {
    "": [[], ["--version"]],
    "serve": [["serve", "--port", "0"]],
    "up": [["up", "--port", PORT]],
    "down": [["down"]],
    "status": [["status"], ["status", "--json"]],
    "use": [["use", PRESET], ["use", "--none"]],
    "presets": [["presets"], ["presets", "--json"]],
    "presets show": [["presets", "show", PRESET]],
    "spend": [["spend"]],
    "calls": [["calls"]],
    "export": [["export", "--output", OUTPUT]],
    "prices": [["prices"]],
    "dash": [["dash"]],
    # The demo runs under a throwaway home of its own, never this one (test_demo.py runs it with a broken config).
    "demo": [],
    "claude": [["claude", "on"], ["claude", "off"]],
    "codex": [["codex", "on"], ["codex", "off"]],
    "langchain": [["langchain", "on"], ["langchain", "off"], ["langchain", "env"]],
    "run": [["run", "claude"], ["run", "codex"], ["run", "dcode"]],
    "keys": [["keys"]],
    "keys set": [["keys", "set", "baseten"]],
    "keys list": [["keys", "list"]],
    "keys rm": [["keys", "rm", "baseten"]],
    "team": [["team"]],
    "team init": [["team", "init", "--yes"]],
    "team status": [["team", "status"]],
    "doctor": [["doctor"]],
    "budgets": [["budgets"], ["budgets", "--json"]],
    "statusline": [["statusline"]],
    "codex-notify": [["codex-notify", "{}"]],
    # `--print` only: an install would ask the user's real service manager to reload.
    "service": [["service"]],
    "service install": [["service", "install", "--print"]],
    "service status": [["service", "status"]],
    "service uninstall": [["service", "uninstall"]],
    "off": [["off"]],
    "completion": [["completion", "bash"]],
    "config": [["config"]],
    "config path": [["config", "path"]],
    "config show": [["config", "show"]],
    "config example": [["config", "example"]],
    # It opens the user's editor: tests/cli/test_config_command.py runs it with a stand-in editor.
    "config edit": [],
}

# Invocations that do not read config.toml, so a broken one is not theirs to report: the harness hooks must
# never fail a harness, the ledger reports read only the ledger, `off` restores a harness's own file.
CONFIG_FREE = {
    "",
    "--version",
    "keys",
    "keys rm baseten",
    "team",
    "spend",
    "calls",
    f"export --output {OUTPUT}",
    "claude off",
    "codex off",
    "langchain off",
    "statusline",
    "codex-notify {}",
    # The service fails open on a broken config by design, so installing it does not need a valid one.
    "service",
    "service install --print",
    "service status",
    "service uninstall",
    "off",
    "completion bash",
    # Where the file is and the shipped example: neither reads it.
    "config",
    "config path",
    "config example",
}
# Invocations that must refuse a missing or invalid active preset: those that start the proxy or act on presets.
PRESET_USERS = {
    "serve --port 0",
    "claude on",  # the active preset's orchestrator decides the window Claude Code is told
    "codex on",
    f"up --port {PORT}",
    "run claude",
    "run codex",
    "run dcode",
    "presets",
    "presets --json",
    f"presets show {PRESET}",
    f"use {PRESET}",
    "doctor",
}
# Invocations that must refuse a damaged key file: those that start the proxy or touch keys.
KEY_FILE_USERS = {
    "serve --port 0",
    f"up --port {PORT}",
    "run claude",
    "run codex",
    "run dcode",
    "keys set baseten",
    "keys list",
    "keys rm baseten",
    "doctor",
}


@dataclass(frozen=True)
class Broken:
    """One way the configuration can be broken, and the file the error must name."""

    kind: str  # config, preset or keys
    names: str  # what the error line must contain (the file)
    preset: str  # the preset the commands that take one are given
    make: Callable[[Path], None]


def _write(relative: str, text: str) -> Callable[[Path], None]:
    def make(home: Path) -> None:
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    return make


def _preset(text: str) -> Callable[[Path], None]:
    def make(home: Path) -> None:
        _write("presets/mine.toml", text)(home)
        _write("active-preset", "mine\n")(home)

    return make


BROKEN: dict[str, Broken] = {
    "malformed toml": Broken("config", "config.toml", "kimi-k3", _write("config.toml", "[server\nport = 1\n")),
    "bad type": Broken("config", "config.toml", "kimi-k3", _write("config.toml", '[server]\nport = "high"\n')),
    "port out of range": Broken("config", "config.toml", "kimi-k3", _write("config.toml", "[server]\nport = 99999\n")),
    "unknown key": Broken("config", "config.toml", "kimi-k3", _write("config.toml", "[server]\nprot = 1\n")),
    "not UTF-8": Broken(
        "config", "config.toml", "kimi-k3", lambda home: (home / "config.toml").write_bytes(b"host = '\xff'\n")
    ),
    "unreadable": Broken("config", "config.toml", "kimi-k3", lambda home: (home / "config.toml").mkdir(exist_ok=True)),
    "unknown provider in [defaults]": Broken(
        "config", "config.toml", "kimi-k3", _write("config.toml", '[defaults]\nmodel = "nosuch/xyz"\n')
    ),
    "unknown active preset": Broken("preset", "'nosuch'", "nosuch", _write("active-preset", "nosuch\n")),
    "damaged preset file": Broken("preset", "mine.toml", "mine", _preset("[default\n")),
    "preset names an unknown provider": Broken(
        "preset", "mine.toml", "mine", _preset('[default]\norchestrator = "nosuch/x"\n')
    ),
    "damaged key file": Broken("keys", "keys.json", "kimi-k3", _write("keys.json", "{not json")),
}


def _invocations(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    """Every command path of the app (groups included: bare `switch`, `switch keys`)."""
    yield " ".join(prefix)
    # typer carries its own copy of click, so groups are told by their sub-commands, not by class.
    for name, sub in getattr(command, "commands", {}).items():
        yield from _invocations(sub, (*prefix, name))


def test_every_command_has_safe_arguments() -> None:
    commands = set(_invocations(typer.main.get_command(app)))
    assert commands == set(SAFE_ARGUMENTS), "give every command safe arguments in SAFE_ARGUMENTS"


@pytest.fixture
def user_env(isolated_home: Path, tmp_path: Path) -> dict[str, str]:
    """An environment with every home a command could touch in tmp_path, and stand-in harnesses on PATH."""
    user = tmp_path / "user"
    bin_dir = tmp_path / "bin"
    for directory in (user, bin_dir):
        directory.mkdir()
    for harness in ("claude", "codex", "dcode"):
        program = bin_dir / harness
        program.write_text(f"#!/bin/sh\necho launched > {tmp_path / ('launched-' + harness)}\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return {
        **os.environ,
        "HOME": str(user),
        "SWITCH_HOME": str(isolated_home),
        "CLAUDE_CONFIG_DIR": str(user / ".claude"),
        "CODEX_HOME": str(user / ".codex"),
        "XDG_CONFIG_HOME": str(user / ".config"),
        "SWITCH_NO_DESKTOP_NOTIFY": "1",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }


def _switch(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switch", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,  # a command that should have refused and started serving instead fails here
    )


def _stop_strays(home: Path) -> None:
    """Stop a background proxy an `up` or `run` that should have refused started anyway."""
    record = home / "run" / "proxy.json"
    if record.exists():
        try:
            os.kill(int(json.loads(record.read_text())["pid"]), signal.SIGKILL)
        except (ProcessLookupError, ValueError, KeyError):
            pass


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_every_command_reports_a_broken_config_in_one_line(
    case: str, isolated_home: Path, user_env: dict[str, str], tmp_path: Path
) -> None:
    broken = BROKEN[case]
    must_report = {
        "config": lambda label: label not in CONFIG_FREE,
        "preset": lambda label: label in PRESET_USERS,
        "keys": lambda label: label in KEY_FILE_USERS,
    }[broken.kind]
    failures: list[str] = []
    try:
        for invocations in SAFE_ARGUMENTS.values():
            for template in invocations:
                label = " ".join(template)
                values = {PRESET: broken.preset, OUTPUT: str(tmp_path / "out.csv"), PORT: str(free_port())}
                args = [values.get(part, part) for part in template]
                broken.make(isolated_home)  # again: `use --none` or `use kimi-k3` is a fix
                result = _switch(args, user_env, stdin="sk-test-key\n")
                shown = f"`switch {' '.join(args)}` -> {result.returncode}\n{result.stdout}{result.stderr}"
                if TRACEBACK in result.stdout + result.stderr:
                    failures.append(f"traceback from {shown}")
                elif must_report(label):
                    failures.extend(_misreported(label, result, broken.names, shown))
    finally:
        _stop_strays(isolated_home)
    launched = sorted(path.name for path in tmp_path.glob("launched-*"))
    assert not launched, f"a harness was launched despite the broken config: {launched}"
    assert not failures, "\n\n".join(failures)


def _misreported(label: str, result: subprocess.CompletedProcess[str], names: str, shown: str) -> list[str]:
    if label == "doctor":  # doctor lists every finding; one of them names the file
        return [] if result.returncode == 1 and names in result.stdout else [f"doctor missed it: {shown}"]
    lines = result.stderr.strip().splitlines()
    if result.returncode != 2 or len(lines) != 1 or not lines[0].startswith("switch: ") or names not in lines[0]:
        return [f"expected exit 2 and one `switch: …` line naming {names}: {shown}"]
    return []


# Any TOML a user may write: the names switch knows (so documents get past parsing into validation) and others.
NAMES = st.sampled_from(
    ["server", "port", "host", "defaults", "model", "providers", "baseten", "mine", "api", "base_url", "models",
     "prices", "input", "routing", "fallback_on", "pricing", "max_output_tokens", "shutdown_grace", "x"]
)  # fmt: skip
SCALARS = (
    st.text(max_size=12)
    | st.sampled_from(["native", "nosuch/x", "baseten/m", "anthropic", "openai-chat", "litellm", "connect"])
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3))
DOCUMENTS = st.dictionaries(NAMES, VALUES, max_size=5)
SECRET = "tok-never-shown-0123"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string (escapes included) is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return "{" + ", ".join(f"{json.dumps(key)} = {_toml(item)}" for key, item in value.items()) + "}"


@given(document=DOCUMENTS)
def test_any_config_is_loaded_or_refused_with_a_message_naming_the_file(document: dict[str, Any]) -> None:
    home = Path(os.environ["SWITCH_HOME"])
    path = home / "config.toml"
    server = document.get("server")
    if isinstance(server, dict):
        server["access_token"] = SECRET  # wherever the error is, the token must not be quoted in it
    path.write_text("\n".join(f"{json.dumps(key)} = {_toml(value)}" for key, value in document.items()))
    try:
        load_settings()
    except ConfigError as exc:
        assert exc.message.startswith(f"{path}: ")
        assert SECRET not in exc.message
