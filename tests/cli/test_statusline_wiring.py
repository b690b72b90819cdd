"""`claude on|off` and `codex on|off` install switch's status line and per-turn summary without ever replacing
the user's own, and `off` gives back the files byte for byte; `run` uses them for one launch."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import tomlkit
from typer.testing import CliRunner

from switch import wiring
from switch.cli import app
from tests.cli.test_wiring import CODEX, SETTINGS
from tests.commands import run_switch, stand_in
from tests.servers import free_port, serve_process

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "statusline"
THEIR_STATUSLINE = {"type": "command", "command": "~/.claude/my-statusline.sh", "padding": 1}
THEIR_NOTIFY = ["notify-send", "Codex"]


@pytest.fixture
def homes(user_home: Path) -> dict[str, Path]:
    home = user_home
    return {"claude": home / ".claude" / "settings.json", "codex": home / ".codex" / "config.toml"}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def with_their_statusline() -> str:
    settings = json.loads(SETTINGS)
    settings["statusLine"] = THEIR_STATUSLINE
    return json.dumps(settings, indent=4) + "\n"


@pytest.mark.parametrize("original", [SETTINGS, None], ids=["settings", "no-file"])
def test_claude_on_installs_the_status_line_and_off_restores_bytes(
    homes: dict[str, Path], original: str | None
) -> None:
    path = homes["claude"]
    if original is not None:
        path.write_text(original)
    output = invoke("claude", "on")
    assert json.loads(path.read_text())["statusLine"] == wiring.claude_statusline()
    assert "Status line: switch's" in output and "--no-statusline" in output
    invoke("claude", "on")
    invoke("claude", "off")
    assert (path.read_bytes() if path.exists() else None) == (original.encode() if original else None)


def test_the_installed_status_line_command_runs_in_a_shell(homes: dict[str, Path]) -> None:
    """What Claude Code runs: the `command` string through the shell, its JSON on stdin, from any directory."""
    invoke("claude", "on")
    command = json.loads(homes["claude"].read_text())["statusLine"]["command"]
    (homes["claude"].parent / "json.py").write_text("raise SystemExit('a project file shadowed the stdlib')\n")
    result = subprocess.run(
        command,
        shell=True,
        input=(CAPTURED / "claude_code_start.json").read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=homes["claude"].parent,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "switch · no calls recorded yet\n", "")


def test_claude_on_never_replaces_the_users_status_line(homes: dict[str, Path]) -> None:
    original = with_their_statusline()
    homes["claude"].write_text(original)
    output = invoke("claude", "on")
    settings = json.loads(homes["claude"].read_text())
    assert settings["statusLine"] == THEIR_STATUSLINE
    assert settings["env"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1")
    assert "you have your own" in output and shlex.join(wiring.hook_argv("statusline")) in output
    invoke("claude", "off")
    assert homes["claude"].read_text() == original


def test_claude_on_no_statusline_and_later_edits(homes: dict[str, Path]) -> None:
    homes["claude"].write_text(SETTINGS)
    invoke("claude", "on", "--no-statusline")
    assert "statusLine" not in json.loads(homes["claude"].read_text())
    invoke("claude", "on")  # changing one's mind installs it
    settings = json.loads(homes["claude"].read_text())
    assert settings["statusLine"] == wiring.claude_statusline()
    settings["theme"] = "dark"  # the user edits the file while switch is on
    homes["claude"].write_text(json.dumps(settings, indent=2))
    invoke("claude", "off")
    restored = json.loads(homes["claude"].read_text())
    assert "statusLine" not in restored and restored["theme"] == "dark"
    assert restored["env"]["ANTHROPIC_BASE_URL"] == "https://my-gateway.example.com"


def profile_of(homes: dict[str, Path]) -> tomlkit.TOMLDocument:
    return tomlkit.parse((homes["codex"].parent / "switch.config.toml").read_text())


@pytest.mark.parametrize("original", [CODEX, None], ids=["config", "no-file"])
def test_codex_on_puts_notify_in_the_profile_and_off_restores_bytes(
    homes: dict[str, Path], original: str | None
) -> None:
    path = homes["codex"]
    if original is not None:
        path.write_text(original)
    output = invoke("codex", "on")
    document = tomlkit.parse(path.read_text())
    # Only the `switch` profile runs switch's summary: nothing top-level in config.toml applies to every profile.
    assert "notify" not in document and profile_of(homes)["notify"] == wiring.codex_notify_argv()
    if original:
        assert document["model"] == "gpt-5.5"
    assert "turns.log" in output
    invoke("codex", "on")
    invoke("codex", "off")
    assert (path.read_bytes() if path.exists() else None) == (original.encode() if original else None)
    assert not (path.parent / "switch.config.toml").exists()


def test_codex_on_keeps_the_users_notify_and_chains_it_in_the_profile(homes: dict[str, Path]) -> None:
    original = f"notify = {json.dumps(THEIR_NOTIFY)}\n" + CODEX
    homes["codex"].write_text(original)
    output = invoke("codex", "on")
    assert tomlkit.parse(homes["codex"].read_text())["notify"] == THEIR_NOTIFY
    assert profile_of(homes)["notify"] == wiring.codex_notify_argv(THEIR_NOTIFY)
    assert "Your own `notify` program in config.toml is untouched" in output
    invoke("codex", "off")
    assert homes["codex"].read_text() == original


def test_codex_on_moves_an_earlier_switchs_top_level_notify(homes: dict[str, Path]) -> None:
    """An earlier switch wrote `notify` at the top of config.toml (every profile ran it); `on` moves it."""
    homes["codex"].write_text(CODEX)
    legacy = tomlkit.parse(CODEX)
    legacy["notify"] = wiring.codex_notify_argv()
    legacy.setdefault("profiles", tomlkit.table())["switch"] = {"model_provider": "switch", "model": "gpt-5.5"}
    homes["codex"].write_text(tomlkit.dumps(legacy))
    from switch.wiring.records import save_record

    save_record(
        "codex", {"path": str(homes["codex"]), "original": CODEX, "keys": {"notify": legacy["notify"].unwrap()}}
    )
    invoke("codex", "on")
    document = tomlkit.parse(homes["codex"].read_text())
    assert "notify" not in document and "switch" not in document.get("profiles", {})
    assert profile_of(homes)["notify"] == wiring.codex_notify_argv()
    invoke("codex", "off")
    assert homes["codex"].read_text() == CODEX


def test_codex_off_after_user_edits_removes_only_switchs_keys(homes: dict[str, Path]) -> None:
    homes["codex"].write_text(CODEX)
    invoke("codex", "on")
    homes["codex"].write_text(homes["codex"].read_text() + '\n[profiles.later]\nmodel = "x"\n')
    invoke("codex", "off")
    document = tomlkit.parse(homes["codex"].read_text())
    assert "notify" not in document and document["profiles"]["later"]["model"] == "x"
    assert "model_providers" not in document


def fake_harness(tmp_path: Path, name: str) -> str:
    """PATH with a stand-in for the harness that records the arguments `switch run` launches it with."""
    return stand_in(
        tmp_path,
        name,
        "import json, sys, pathlib\n"
        f"pathlib.Path({str(tmp_path / 'argv.json')!r}).write_text(json.dumps(sys.argv[1:]))\n",
    )


def test_run_claude_uses_the_status_line_for_that_launch_only(homes: dict[str, Path], tmp_path: Path) -> None:
    env = {**os.environ, "PATH": fake_harness(tmp_path, "claude")}
    with serving_proxy(env):
        for theirs in (False, True):
            if theirs:
                homes["claude"].write_text(with_their_statusline())
            before = homes["claude"].read_bytes() if theirs else None
            result = run_switch("run", "claude", "--", "-p", "hi", env=env)
            assert result.returncode == 0, result.stderr
            argv = json.loads((tmp_path / "argv.json").read_text())
            launch = json.loads(argv[argv.index("--settings") + 1])
            assert argv[-2:] == ["-p", "hi"]
            # Switch's line for this launch, unless the user has their own (which --settings would override).
            assert launch.get("statusLine") == (None if theirs else wiring.claude_statusline())
            assert (homes["claude"].read_bytes() if homes["claude"].exists() else None) == before


def test_run_codex_chains_the_users_notify_for_that_launch_only(homes: dict[str, Path], tmp_path: Path) -> None:
    original = f"notify = {json.dumps(THEIR_NOTIFY)}\n"
    homes["codex"].write_text(original)
    env = {**os.environ, "PATH": fake_harness(tmp_path, "codex")}
    with serving_proxy(env):
        result = run_switch("run", "codex", "--", "exec", "hi", env=env)
    assert result.returncode == 0, result.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    notify = [value for value in overrides if value.startswith("notify=")]
    assert notify == ["notify=" + json.dumps(wiring.codex_notify_argv(THEIR_NOTIFY))]
    assert tomlkit.parse(f"x = {notify[0].removeprefix('notify=')}")["x"] == wiring.codex_notify_argv(THEIR_NOTIFY)
    assert homes["codex"].read_text() == original


@contextmanager
def serving_proxy(env: dict[str, str]) -> Iterator[None]:
    """A real `switch serve` for `switch run` to find, stopped (and reaped) whatever happens."""
    port = free_port()
    (Path(env["SWITCH_HOME"]) / "config.toml").write_text(f"[server]\nport = {port}\n")
    with serve_process(port, env):
        yield
