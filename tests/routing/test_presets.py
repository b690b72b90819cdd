"""Preset files: the shipped ones are valid; errors name the file, the key and what is allowed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from switch.config import BUILTIN_PROVIDERS
from switch.errors import PresetError
from switch.routing.presets import load_preset, preset_files

PROVIDERS = set(BUILTIN_PROVIDERS)
DEFAULT_MODEL = "baseten/moonshotai/Kimi-K3"


@pytest.mark.parametrize("name", ["kimi-k3", "hybrid", "open", "native"])
def test_shipped_presets_load(name: str) -> None:
    preset = load_preset(name, PROVIDERS, DEFAULT_MODEL)
    assert preset.description
    for harness in ("claude-code", "codex", "langchain", "other"):
        for role in ("orchestrator", "subagent", "background"):
            assert preset.chain(harness, role)


def test_hybrid_sends_orchestrator_native_and_subagents_to_kimi() -> None:
    preset = load_preset("hybrid", PROVIDERS, DEFAULT_MODEL)
    assert preset.chain("claude-code", "orchestrator") == ("native",)
    assert preset.chain("codex", "subagent") == ("baseten/moonshotai/Kimi-K3", "native")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[default]\norchestrator = 3\n", "'default.orchestrator'"),
        ('[default]\norchestrator = "nowhere/x"\n', "unknown provider 'nowhere'"),
        ('[default]\norchestrator = "native"\nsubagnet = "native"\n', "unknown key 'default.subagnet'"),
        (
            '[default]\norchestrator = "native"\n[default.families]\ngpt = "native"\n',
            "allowed: opus, sonnet, haiku, fable",
        ),
        (
            '[default]\norchestrator = "native"\n[targets."native"]\nreasoning = "extreme"\n',
            "'targets.native.reasoning'",
        ),
        ("[default\n", "not valid TOML"),
        ('[default]\norchestrator = "native"\nfork = 3\n', "'default.fork'"),
        (
            '[default]\norchestrator = "native"\ncompaction = "nowhere/x"\n',
            "key 'default.compaction': unknown provider",
        ),
    ],
)
def test_invalid_preset_error_names_file_and_key(isolated_home: Path, text: str, expected: str) -> None:
    directory = isolated_home / "presets"
    directory.mkdir()
    (directory / "broken.toml").write_text(text, encoding="utf-8")
    with pytest.raises(PresetError) as caught:
        load_preset("broken", PROVIDERS, DEFAULT_MODEL)
    assert str(directory / "broken.toml") in caught.value.message
    assert expected in caught.value.message


def test_user_preset_overrides_shipped_one(isolated_home: Path) -> None:
    directory = isolated_home / "presets"
    directory.mkdir()
    (directory / "hybrid.toml").write_text('description = "mine"\n[default]\norchestrator = "native"\n')
    assert preset_files()["hybrid"] == directory / "hybrid.toml"
    assert load_preset("hybrid", PROVIDERS, DEFAULT_MODEL).description == "mine"


def test_a_litellm_provider_without_its_litellm_name_is_refused_at_start_with_a_clear_error(
    isolated_home: Path,
) -> None:
    (isolated_home / "config.toml").write_text(
        '[providers.gemini]\napi = "litellm"\nbase_url = "https://generativelanguage.googleapis.com"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "switch", "serve", "--port", "0"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "key 'providers.gemini': api = \"litellm\" needs litellm_provider" in result.stderr
    assert 'litellm_provider = "gemini"' in result.stderr


def test_a_preset_may_name_only_some_harnesses(isolated_home: Path) -> None:
    """Harnesses the preset does not name keep config.toml's [defaults] model, for every role."""
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "codex-only.toml").write_text(
        'description = "Codex on native"\n[codex]\norchestrator = "native"\nsubagent = "openai/gpt-5.5"\n'
    )
    (isolated_home / "config.toml").write_text('[defaults]\nmodel = "openrouter/z-ai/glm-5"\n')
    preset = load_preset("codex-only", PROVIDERS, "openrouter/z-ai/glm-5")
    assert preset.chain("codex", "subagent") == ("openai/gpt-5.5",)
    for harness in ("claude-code", "langchain", "other"):
        for role in ("orchestrator", "subagent", "background"):
            assert preset.chain(harness, role) == ("openrouter/z-ai/glm-5",)
    shown = subprocess.run(
        [sys.executable, "-m", "switch", "presets", "show", "codex-only"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "claude-code, langchain: not named by this preset, [defaults] model" in shown.stdout
    assert "orchestrator  openrouter/z-ai/glm-5" in shown.stdout
    used = subprocess.run(
        [sys.executable, "-m", "switch", "use", "codex-only"], env=dict(os.environ), capture_output=True, text=True
    )
    assert used.returncode == 0, used.stderr


def test_forks_and_compaction_follow_the_orchestrator_unless_the_section_routes_them() -> None:
    from switch.routing.presets import parse_preset

    raw = {
        "default": {"orchestrator": "baseten/main", "subagent": "baseten/helper", "background": "baseten/small"},
        "claude-code": {"orchestrator": "native", "subagent": "baseten/helper", "fork": "baseten/forks"},
        "codex": {"orchestrator": "openai/big", "background": "baseten/small", "compaction": ["baseten/compact"]},
    }
    preset = parse_preset("p", None, raw, PROVIDERS, DEFAULT_MODEL)
    # [default] names neither kind: both go where the orchestrator goes, whatever role the call has.
    assert preset.chain("langchain", "subagent", kind="fork") == ("baseten/main",)
    assert preset.chain("langchain", "orchestrator", kind="compaction") == ("baseten/main",)
    assert preset.chain("langchain", "background", kind="compaction") == ("baseten/main",)
    # A subagent compacting its own context stays on the subagent's target, where its history is cached.
    assert preset.chain("langchain", "subagent", kind="compaction") == ("baseten/helper",)
    # An explicit key wins, for that kind only.
    assert preset.chain("claude-code", "subagent", kind="fork") == ("baseten/forks",)
    assert preset.chain("claude-code", "orchestrator", kind="compaction") == ("native",)
    # Codex's compaction (kind set by its own classifier, role background) uses the same mechanism.
    assert preset.chain("codex", "background", kind="compaction") == ("baseten/compact",)
    assert preset.chain("codex", "background") == ("baseten/small",)
    # An ordinary subagent call still goes to the subagent route; a family route applies to a fork too.
    assert preset.chain("claude-code", "subagent") == ("baseten/helper",)
    with_family = parse_preset(
        "f", None, {"default": {"orchestrator": "native", "families": {"opus": "baseten/opus"}}}, PROVIDERS, "x/y"
    )
    assert with_family.chain("claude-code", "subagent", "opus", kind="fork") == ("baseten/opus",)


def test_presets_show_names_where_forks_and_compaction_go(isolated_home: Path) -> None:
    directory = isolated_home / "presets"
    directory.mkdir()
    (directory / "kinds.toml").write_text(
        'description = "k"\n[default]\norchestrator = "baseten/main"\nsubagent = "baseten/helper"\n'
        'compaction = "baseten/compact"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "SWITCH_HOME": str(isolated_home)}
    shown = subprocess.run(
        [sys.executable, "-m", "switch", "presets", "show", "kinds"], capture_output=True, text=True, env=env
    )
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line for line in shown.stdout.splitlines()[2:]}
    assert "baseten/main" in lines["fork"] and "as the orchestrator" in lines["fork"]
    assert "baseten/compact" in lines["compaction"] and "as the orchestrator" not in lines["compaction"]
    as_json = subprocess.run(
        [sys.executable, "-m", "switch", "presets", "show", "kinds", "--json"], capture_output=True, text=True, env=env
    )
    import json

    routes = json.loads(as_json.stdout)["routes"]["default"]
    assert routes["kinds"] == {"fork": ["baseten/main"], "compaction": ["baseten/compact"]}
