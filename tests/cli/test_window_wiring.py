"""Telling the harness the truth: `claude on` / `run claude` / `codex on` carry the window of the model serving
the orchestrator in the active preset; `off` restores the files exactly; doctor notices a window gone stale."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from switch.cli import app
from switch.ledger.limits import LimitOverride, LimitTable
from switch.routing.presets import parse_preset
from switch.wiring.windows import ServedWindow, claude_window_env, codex_window_keys, served_window
from tests.commands import run_switch, stand_in

SETTINGS = '{\n  "env": {\n    "FOO": "bar"\n  },\n  "model": "opus"\n}\n'
SMALL = '[default]\norchestrator = "zai/glm-4.5"\nsubagent = "baseten/moonshotai/Kimi-K3"\n'
CONFIG = '[providers.zai]\nbase_url = "http://127.0.0.1:9/v1"\n'


@pytest.fixture
def user(user_home: Path, isolated_home: Path) -> dict[str, Path]:
    home = user_home
    (isolated_home / "config.toml").write_text(CONFIG, encoding="utf-8")
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "small.toml").write_text(SMALL, encoding="utf-8")
    settings = home / ".claude" / "settings.json"
    settings.write_text(SETTINGS)
    return {"claude": settings, "codex": home / ".codex" / "config.toml", "home": isolated_home}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def env_of(path: Path) -> dict[str, str]:
    return dict(json.loads(path.read_text())["env"])


def doctor() -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    return {check["check"]: check for check in json.loads(result.stdout)["checks"]}


def test_claude_on_tells_claude_code_the_small_window_and_off_restores_exactly(user: dict[str, Path]) -> None:
    invoke("use", "small")
    output = invoke("claude", "on")
    env = env_of(user["claude"])
    # LiteLLM's table: zai/glm-4.5 has a 128000-token window and gives at most 32000 output tokens.
    assert env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "128000"
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "32000"
    assert env["FOO"] == "bar"
    assert "128000 tokens (zai/glm-4.5)" in output
    invoke("claude", "off")
    assert user["claude"].read_text() == SETTINGS


def test_a_native_orchestrator_sets_no_window(user: dict[str, Path]) -> None:
    invoke("use", "hybrid")
    output = invoke("claude", "on")
    env = env_of(user["claude"])
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in env and "CLAUDE_CODE_MAX_OUTPUT_TOKENS" not in env
    assert "orchestrator is native" in output


def test_config_window_overrides_the_table(user: dict[str, Path]) -> None:
    (user["home"] / "config.toml").write_text(
        CONFIG + '[models."zai/glm-4.5"]\ncontext_window = 65536\nmax_output_tokens = 8192\n', encoding="utf-8"
    )
    invoke("use", "small")
    invoke("claude", "on")
    env = env_of(user["claude"])
    assert (env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"], env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"]) == ("65536", "8192")


def test_claude_on_again_after_use_follows_the_preset_and_off_still_restores_the_users_values(
    user: dict[str, Path],
) -> None:
    mine = '{\n  "env": {\n    "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "50000"\n  }\n}\n'
    user["claude"].write_text(mine)
    invoke("use", "small")
    invoke("claude", "on")
    assert env_of(user["claude"])["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "128000"
    invoke("use", "hybrid")
    invoke("claude", "on")
    env = env_of(user["claude"])
    # Native now: switch's window is withdrawn, and the user's own value is back.
    assert env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "50000"
    assert "CLAUDE_CODE_MAX_OUTPUT_TOKENS" not in env
    invoke("use", "small")
    invoke("claude", "on")
    invoke("claude", "off")
    assert user["claude"].read_text() == mine


def test_off_after_the_user_edited_the_file_gives_their_window_back(user: dict[str, Path]) -> None:
    user["claude"].write_text('{"env": {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "50000"}}')
    invoke("use", "small")
    invoke("claude", "on")
    settings = json.loads(user["claude"].read_text())
    settings["theme"] = "dark"
    user["claude"].write_text(json.dumps(settings))
    invoke("claude", "off")
    restored = json.loads(user["claude"].read_text())
    assert restored == {"env": {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "50000"}, "theme": "dark"}


def test_doctor_reports_a_wired_window_the_active_preset_no_longer_serves(user: dict[str, Path]) -> None:
    invoke("use", "small")
    invoke("claude", "on")
    assert doctor()["window:claude"]["ok"] is True
    invoke("use", "kimi-k3")
    finding = doctor()["window:claude"]
    assert finding["ok"] is False
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW = 128000" in finding["detail"]
    assert "baseten/moonshotai/Kimi-K3, whose window is 1048576 tokens" in finding["detail"]
    assert finding["fix"] == "switch claude on"
    invoke("claude", "on")
    assert doctor()["window:claude"]["ok"] is True
    invoke("use", "hybrid")
    assert "native orchestrator" in doctor()["window:claude"]["detail"]


def test_run_claude_launches_with_the_window(user: dict[str, Path], tmp_path: Path) -> None:
    invoke("use", "small")
    seen = tmp_path / "argv.json"
    path = stand_in(tmp_path, "claude", f"import json, sys\nopen({str(seen)!r}, 'w').write(json.dumps(sys.argv))\n")
    result = run_switch("run", "claude", "--no-summary", env={"PATH": path, "SWITCH_HOME": str(user["home"])})
    assert result.returncode == 0, result.stderr
    argv = json.loads(seen.read_text())
    settings = json.loads(argv[argv.index("--settings") + 1])
    assert settings["env"]["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "128000"
    assert settings["env"]["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "32000"
    assert user["claude"].read_text() == SETTINGS  # `run` touches no file


def test_codex_on_puts_the_window_in_the_profile(user: dict[str, Path]) -> None:
    invoke("use", "small")
    invoke("codex", "on")
    # Codex 0.171 reads a named profile from its own file beside config.toml.
    profile_file = user["codex"].parent / "switch.config.toml"
    profile = tomllib.loads(profile_file.read_text())
    assert (profile["model_context_window"], profile["model_auto_compact_token_limit"]) == (128000, 115200)
    assert "profiles" not in tomllib.loads(user["codex"].read_text())
    invoke("codex", "off")
    assert not user["codex"].exists() and not profile_file.exists()


def table(**limits: tuple[int | None, int | None]) -> LimitTable:
    raw = json.dumps({key: {"max_input_tokens": w, "max_output_tokens": o} for key, (w, o) in limits.items()})
    return LimitTable(raw_tables=(raw.encode(),))


def preset(text: str) -> Any:
    return parse_preset("p", None, tomllib.loads(text), {"zai", "baseten", "local"}, "baseten/moonshotai/Kimi-K3")


def test_served_window_is_the_first_orchestrator_target_of_the_harness_section() -> None:
    limits = table(**{"zai/glm-4.5": (128000, 32000), "local/m": (32768, 32768)})
    routes = preset('[default]\norchestrator = "native"\n[codex]\norchestrator = ["local/m", "zai/glm-4.5"]\n')
    assert served_window(routes, "claude-code", limits) is None
    assert served_window(routes, "codex", limits) == ServedWindow("local/m", 32768, 32768)
    # A reply cannot take the whole window: Claude Code is told a quarter of it at most.
    assert claude_window_env(ServedWindow("local/m", 32768, 32768)) == {
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "32768",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8192",
    }
    assert codex_window_keys(ServedWindow("local/m", 32768, None)) == {
        "model_context_window": 32768,
        "model_auto_compact_token_limit": 29491,
    }
    unknown = served_window(preset('[default]\norchestrator = "zai/other"\n'), "codex", limits)
    assert unknown == ServedWindow("zai/other", None, None)
    assert claude_window_env(unknown) == {} and codex_window_keys(unknown) == {} and codex_window_keys(None) == {}


def test_a_config_override_beats_the_table_and_an_unknown_model_stays_unknown() -> None:
    limits = LimitTable(
        {"zai/glm-4.5": LimitOverride(context_window=65536)},
        raw_tables=(json.dumps({"zai/glm-4.5": {"max_input_tokens": 128000, "max_output_tokens": 32000}}).encode(),),
    )
    found = limits.of("zai/glm-4.5")
    assert (found.context_window, found.window_source) == (65536, "config:zai/glm-4.5")
    assert (found.output_limit, found.output_source) == (32000, "litellm:zai/glm-4.5")
    assert limits.of("zai/nothing").context_window is None
    assert limits.of("native").context_window is None


LIMIT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
)


@given(
    st.dictionaries(
        st.text(max_size=20),
        st.one_of(
            st.fixed_dictionaries({"max_input_tokens": LIMIT_VALUES, "max_output_tokens": LIMIT_VALUES}),
            LIMIT_VALUES,
        ),
        max_size=6,
    )
)
def test_any_table_entry_gives_positive_whole_limits_or_unknown(entries: dict[str, Any]) -> None:
    raw = json.dumps({f"zai/{key}": entry for key, entry in entries.items()}).encode()
    limits = LimitTable(raw_tables=(raw, b"not json", b"[1, 2]"))
    for key, entry in entries.items():
        found = limits.of(f"zai/{key}")
        for value in (found.context_window, found.output_limit):
            assert value is None or (type(value) is int and value > 0)
        if isinstance(entry, dict) and type(entry["max_input_tokens"]) is int and entry["max_input_tokens"] > 0:
            if key and "/" not in key and key.lower() == key and entry["max_input_tokens"] < 10**12:
                assert found.context_window == entry["max_input_tokens"]


def test_prices_presets_show_and_doctor_show_the_limits(user: dict[str, Path]) -> None:
    (user["home"] / "config.toml").write_text(
        CONFIG + '[models."zai/mine"]\ncontext_window = 65536\n[prices."zai/priced"]\ninput = 1\noutput = 2\n',
        encoding="utf-8",
    )
    shown = invoke("prices", "zai/glm-4.5")
    assert "context window 128000 tokens, output limit 32000 tokens (LiteLLM model table: zai/glm-4.5)" in shown
    unknown = invoke("prices", "zai/priced")
    assert "context window unknown (not enforced), output limit unknown (not enforced)" in unknown
    assert json.loads(invoke("prices", "zai/priced", "--json"))[0]["limits"]["context_window"] is None
    (user["home"] / "presets" / "small.toml").write_text(SMALL + 'long_context = "zai/mine"\n', encoding="utf-8")
    described = json.loads(invoke("presets", "show", "small", "--json"))
    assert described["limits"]["zai/glm-4.5"]["context_window"] == 128000
    assert described["limits"]["zai/mine"]["context_window_source"] == "config:zai/mine"
    assert described["routes"]["default"]["long_context"]["orchestrator"] == ["zai/mine"]
    text = invoke("presets", "show", "small")
    assert "long context: zai/mine" in text and "zai/mine: context window 65536 tokens" in text
    invoke("use", "small")
    report = doctor()
    assert "context window 128000 tokens" in report["limits:zai/glm-4.5"]["detail"]
    assert "output limit unknown" in report["limits:zai/mine"]["detail"]
