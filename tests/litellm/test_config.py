"""`api = "litellm"` providers in config.toml: accepted with LiteLLM's provider name, refused clearly otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.config import load_settings
from switch.errors import ConfigError
from switch.routing.resolve import resolve_target


def load(path: Path, table: str) -> Any:
    path.write_text(table, encoding="utf-8")
    return load_settings(path)


def test_a_litellm_provider_resolves_to_a_litellm_target_with_its_api_base(tmp_path: Path) -> None:
    settings = load(
        tmp_path / "config.toml",
        '[providers.gem]\napi = "litellm"\nlitellm_provider = "gemini"\napi_key_env = "GEM_KEY"\n'
        '[providers.local]\napi = "litellm"\nlitellm_provider = "ollama_chat"\nbase_url = "http://127.0.0.1:11434/"\n',
    )
    gem = resolve_target(settings, "gem/gemini-2.5-pro")
    assert (gem.api, gem.litellm_provider, gem.model, gem.base_url, gem.api_key_env) == (
        "litellm",
        "gemini",
        "gemini-2.5-pro",
        "",
        "GEM_KEY",
    )
    local = resolve_target(settings, "local/llama3")
    assert (local.litellm_provider, local.base_url) == ("ollama_chat", "http://127.0.0.1:11434")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('api = "litellm"\n', 'api = "litellm" needs litellm_provider'),
        ('api = "litellm"\nlitellm_provider = "gemini"\nregion = "eu"\n', "unknown key 'providers.gem.region'"),
        ('api = "litellm"\nlitellm_provider = 7\n', "invalid value at 'providers.gem.litellm_provider'"),
        ('api = "litellm"\nlitellm_provider = "gemini/x"\n', "one LiteLLM provider name, without '/'"),
        ('api = "openai-chat"\nbase_url = "http://x"\nlitellm_provider = "gemini"\n', "applies only with api"),
        ('api = "openai-chat"\n', 'base_url is required with api = "openai-chat"'),
        ('api = "gemini"\n', "invalid value at 'providers.gem.api'"),
    ],
)
def test_a_wrong_litellm_provider_table_is_refused_naming_the_file_and_the_fix(
    tmp_path: Path, table: str, expected: str
) -> None:
    path = tmp_path / "config.toml"
    with pytest.raises(ConfigError) as raised:
        load(path, "[providers.gem]\n" + table)
    assert str(path) in raised.value.message and expected in raised.value.message


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_the_native_providers_cannot_become_litellm_ones(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path / "config.toml", f'[providers.{name}]\napi = "litellm"\nlitellm_provider = "{name}"\n')
    assert f"[providers.{name}-litellm]" in raised.value.message


_VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(),
    st.booleans(),
    st.sampled_from(["litellm", "openai-chat", "anthropic", "gemini", "ollama_chat", "http://127.0.0.1:1"]),
)
_KEYS = st.sampled_from(["api", "litellm_provider", "base_url", "api_key_env", "reasoning_style", "send_user", "zone"])


@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_any_provider_table_loads_as_a_usable_provider_or_is_refused_cleanly(fields: dict[str, Any]) -> None:
    import json
    import tempfile

    lines = ["[providers.gem]"]
    for key, value in fields.items():
        # JSON's strings, integers and lower-case booleans are TOML's too.
        lines.append(f"{key} = {json.dumps(value)}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        try:
            settings = load_settings(path)
        except ConfigError as exc:
            assert str(path) in exc.message
            return
    provider = settings.providers["gem"]
    if provider.api == "litellm":
        assert provider.litellm_provider and "/" not in provider.litellm_provider
        assert resolve_target(settings, "gem/some-model").litellm_provider == provider.litellm_provider
    else:
        assert provider.base_url and provider.litellm_provider is None


def test_doctor_probe_names_a_litellm_target_without_calling_it(tmp_path: Path) -> None:
    from switch.checks.probes import probe_targets

    settings = load(tmp_path / "config.toml", '[providers.gem]\napi = "litellm"\nlitellm_provider = "gemini"\n')
    (result,) = probe_targets(settings, {"gem/gemini-2.5-pro"})
    assert result["ok"] and "served through LiteLLM (gemini); not probed" in result["detail"]
