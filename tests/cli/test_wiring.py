"""Turning harnesses on and off never damages the user's files, and `off` restores them exactly."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from switch import files, wiring
from switch.cli import app
from switch.wiring import CLASSIFYING_MODEL, windows

SETTINGS = """{
    "permissions": {
        "allow": ["Bash(npm test:*)", "Read(~/.zshrc)"],
        "deny": ["Read(./.env)"]
    },
    "env": {
        "FOO": "bar",
        "ANTHROPIC_BASE_URL": "https://my-gateway.example.com"
    },
    "model": "opus"
}
"""
CODEX = """# my codex config
model = "gpt-5.5"  # the default model

[profiles.fast]
model = "gpt-5.5-mini"

# keep this comment
[mcp_servers.docs]
command = "docs-mcp"
"""
DEEPAGENTS = """[models]
default = "anthropic:claude-opus-5-5"

[models.providers.mine]
base_url = "http://localhost:9999/v1"
"""


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".deepagents").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    paths = {
        "claude": home / ".claude" / "settings.json",
        "codex": home / ".codex" / "config.toml",
        "langchain": home / ".deepagents" / "config.toml",
    }
    paths["claude"].write_text(SETTINGS)
    paths["codex"].write_text(CODEX)
    paths["langchain"].write_text(DEEPAGENTS)
    os.chmod(paths["claude"], 0o640)
    return paths


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("harness", ["claude", "codex", "langchain"])
def test_on_off_round_trip_is_byte_identical(homes: dict[str, Path], harness: str) -> None:
    path = homes[harness]
    original = path.read_bytes()
    invoke(harness, "on")
    changed = path.read_bytes()
    assert changed != original
    invoke(harness, "on")  # twice is the same as once
    assert path.read_bytes() == changed
    invoke(harness, "off")
    assert path.read_bytes() == original


def test_claude_on_sets_base_url_and_keeps_everything_else(homes: dict[str, Path]) -> None:
    invoke("claude", "on")
    settings = json.loads(homes["claude"].read_text())
    assert settings["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8742"
    assert settings["env"]["FOO"] == "bar"
    assert settings["permissions"]["deny"] == ["Read(./.env)"]
    assert stat.S_IMODE(homes["claude"].stat().st_mode) == 0o640


def test_off_keeps_changes_the_user_made_meanwhile(homes: dict[str, Path]) -> None:
    invoke("claude", "on")
    settings = json.loads(homes["claude"].read_text())
    settings["env"]["NEW_USER_KEY"] = "mine"
    settings["theme"] = "dark"
    homes["claude"].write_text(json.dumps(settings, indent=4))
    invoke("claude", "off")
    restored = json.loads(homes["claude"].read_text())
    assert restored["env"] == {
        "FOO": "bar",
        "ANTHROPIC_BASE_URL": "https://my-gateway.example.com",
        "NEW_USER_KEY": "mine",
    }
    assert restored["theme"] == "dark"


def test_codex_off_keeps_comments_and_user_edits(homes: dict[str, Path]) -> None:
    invoke("codex", "on")
    text = homes["codex"].read_text()
    assert "[model_providers.switch]" in text and "# keep this comment" in text
    homes["codex"].write_text(text + '\n[profiles.later]\nmodel = "x"\n')
    invoke("codex", "off")
    after = homes["codex"].read_text()
    assert "switch" not in after and "[profiles.later]" in after and "# my codex config" in after


def test_malformed_settings_are_reported_and_never_overwritten(homes: dict[str, Path]) -> None:
    homes["claude"].write_text('{"env": {"FOO": "bar",}')
    before = homes["claude"].read_bytes()
    result = CliRunner().invoke(app, ["claude", "on"])
    assert result.exit_code == 2
    assert "not valid JSON" in result.output
    assert homes["claude"].read_bytes() == before


def test_crash_between_backup_and_write_leaves_the_original(
    homes: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = homes["claude"].read_bytes()
    real_replace = os.replace

    def crash(source: str, target: str) -> None:
        if str(target).endswith("settings.json"):
            raise OSError("disk full")
        real_replace(source, target)

    monkeypatch.setattr(files.os, "replace", crash)
    result = CliRunner().invoke(app, ["claude", "on"])
    assert result.exit_code != 0
    assert homes["claude"].read_bytes() == original
    assert not [p for p in homes["claude"].parent.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.setattr(files.os, "replace", real_replace)
    invoke("claude", "on")
    invoke("claude", "off")
    assert homes["claude"].read_bytes() == original


def test_claude_on_creates_and_off_removes_a_missing_settings_file(homes: dict[str, Path]) -> None:
    homes["claude"].unlink()
    invoke("claude", "on")
    assert json.loads(homes["claude"].read_text())["env"]["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1")
    invoke("claude", "off")
    assert not homes["claude"].exists()


def test_langchain_env_prints_exports(homes: dict[str, Path]) -> None:
    output = invoke("langchain", "env")
    assert "export OPENAI_BASE_URL=http://127.0.0.1:8742/v1" in output
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8742" in output


@pytest.mark.parametrize("user_key", ["sk-user-own-openai-key-123", None])
def test_langchain_env_never_prints_or_clobbers_a_key(homes: dict[str, Path], user_key: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    if user_key is not None:
        env["OPENAI_API_KEY"] = user_key
    switch = f"{shlex.quote(sys.executable)} -m switch langchain env"
    # What the user does with the output: eval it in their shell, then use their clients.
    shell = subprocess.run(
        [
            "bash",
            "-c",
            f'out="$({switch})" && eval "$out" && '
            'printf "%s\\n---\\n%s|%s" "$out" "$OPENAI_API_KEY" "$OPENAI_BASE_URL"',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.returncode == 0, shell.stderr
    printed, after = shell.stdout.split("\n---\n")
    assert after == f"{user_key or ''}|http://127.0.0.1:8742/v1"
    exported = [line.split("=", 1)[0] for line in printed.splitlines() if line.startswith("export ")]
    assert exported == ["export OPENAI_BASE_URL", "export ANTHROPIC_BASE_URL"]
    assert "KEY=" not in printed and (user_key is None or user_key not in printed)
    assert all(line.startswith(("export ", "# ")) for line in printed.splitlines())
    assert CLASSIFYING_MODEL in printed


def test_langchain_on_offers_the_classifying_model_and_needs_no_extra_variable(homes: dict[str, Path]) -> None:
    output = invoke("langchain", "on")
    assert f"`dcode -M switch:{CLASSIFYING_MODEL}`" in output
    provider = tomllib.loads(homes["langchain"].read_text())["models"]["providers"]["switch"]
    assert provider["models"] == [CLASSIFYING_MODEL, "switch/orchestrator", "switch/subagent", "switch/background"]
    # dcode asks for the variable named here before it starts; none should be needed.
    assert "api_key_env" not in provider


def codex_files(homes: dict[str, Path]) -> tuple[dict[str, object], dict[str, object]]:
    config = homes["codex"]
    return tomllib.loads(config.read_text()), tomllib.loads((config.parent / "switch.config.toml").read_text())


def test_codex_on_writes_the_provider_in_config_and_the_profile_in_its_own_file(homes: dict[str, Path]) -> None:
    output = invoke("codex", "on")
    config, profile = codex_files(homes)
    # Codex 0.171 refuses `--profile switch` with a [profiles.switch] table in config.toml.
    assert "switch" not in config.get("profiles", {}) and config.get("profile") is None
    provider = config["model_providers"]["switch"]  # type: ignore[index]
    assert provider == {
        "name": "switch",
        "base_url": "http://127.0.0.1:8742/v1",
        "wire_api": "responses",
        "requires_openai_auth": True,  # Codex sends its login's bearer token, for the native route
        "supports_websockets": True,  # [server] websockets is on by default: one Responses WebSocket per session
    }
    assert profile["model_provider"] == "switch" and profile["model"] == "gpt-5.5"
    assert "switch.config.toml" in output and "codex --profile switch" in output


LEGACY = CODEX + '\n[profiles.switch]\nmodel_provider = "switch"\nmodel = "gpt-5.4"\nmodel_reasoning_effort = "high"\n'


@pytest.mark.parametrize("selector", [False, True], ids=["table", "table-and-selector"])
def test_codex_on_migrates_a_legacy_profile_and_off_restores_it(homes: dict[str, Path], selector: bool) -> None:
    original = ('profile = "switch"\n' if selector else "") + LEGACY
    homes["codex"].write_text(original)
    output = invoke("codex", "on")
    config, profile = codex_files(homes)
    assert "switch" not in config.get("profiles", {}) and "profile" not in config
    assert config["profiles"] == {"fast": {"model": "gpt-5.5-mini"}}
    # The user's own settings in the old table move into the profile file with it.
    assert profile == {
        "model_provider": "switch",
        "model": "gpt-5.4",
        "model_reasoning_effort": "high",
        **{"notify": wiring.codex_notify_argv()},
        # What the model serving Codex's orchestrator in the active preset can hold.
        **windows.codex_window_keys(windows.active_window("codex")),
    }
    assert "Moved [profiles.switch]" in output and ('profile = "switch"' in output) == selector
    invoke("codex", "off")
    assert homes["codex"].read_text() == original
    assert not (homes["codex"].parent / "switch.config.toml").exists()


def test_codex_off_restores_a_profile_file_the_user_had(homes: dict[str, Path]) -> None:
    mine = homes["codex"].parent / "switch.config.toml"
    mine.write_text('# my profile\nmodel_verbosity = "low"\n')
    invoke("codex", "on")
    assert tomllib.loads(mine.read_text())["model_provider"] == "switch"
    invoke("codex", "off")
    assert mine.read_text() == '# my profile\nmodel_verbosity = "low"\n'


def test_profile_keys_take_extra_keys_and_run_passes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from switch.wiring import codex

    monkeypatch.setitem(codex.PROFILE_EXTRA_KEYS, "model_context_window", 262144)
    assert codex.codex_profile_keys()["model_context_window"] == 262144
    assert "model_context_window=262144" in codex.codex_launch_overrides(8742)
    assert 'model_provider="switch"' in codex.codex_launch_overrides(8742)


def test_codex_on_refuses_a_profile_file_that_names_another_provider(homes: dict[str, Path]) -> None:
    mine = homes["codex"].parent / "switch.config.toml"
    mine.write_text('model_provider = "openai"\n')
    before = homes["codex"].read_bytes()
    result = CliRunner().invoke(app, ["codex", "on"])
    assert result.exit_code != 0 and "switch.config.toml sets model_provider" in result.output
    assert "Traceback" not in result.output
    assert mine.read_text() == 'model_provider = "openai"\n' and homes["codex"].read_bytes() == before
