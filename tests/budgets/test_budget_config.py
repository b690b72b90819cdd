"""`[[budgets]]` in config.toml: loaded, or refused with a ConfigError naming the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.budgets.presets import check_budget_presets
from switch.config import load_settings
from switch.errors import ConfigError

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "total",
            "plan:anthropic",
            "plan:nosuch",
            "5h",
            "session",
            "role:subagent",
            "role:nobody",
            "harness:codex",
            "harness:",
            "model:baseten/x",
            "model:nosuch/x",
            "model:baseten",
            "day",
            "week",
            "month",
            "year",
            "warn",
            "effort",
            "preset",
            "block",
            "low",
            "max",
            "open",
            "nosuch-preset",
        ]
    ),
)
ACTION = st.dictionaries(
    st.sampled_from(["at", "do", "effort", "preset", "when"]),
    st.one_of(SCALARS, st.floats(min_value=0, max_value=2)),
    max_size=4,
)
BUDGET = st.dictionaries(
    st.sampled_from(["name", "scope", "period", "limit_usd", "actions", "limit", "window"]),
    st.one_of(SCALARS, st.lists(ACTION, max_size=3), st.lists(SCALARS, max_size=2)),
    max_size=6,
)
BUDGETS = st.one_of(st.lists(BUDGET, max_size=3), SCALARS, ACTION)


def _clean(value: Any) -> Any:
    # TOML has no null: a None becomes a missing key (or an empty list item is dropped).
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_clean(item) for item in value if item is not None]
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budgets=BUDGETS)
def test_any_budgets_table_is_loaded_or_refused_naming_the_key(isolated_home: Path, budgets: Any) -> None:
    budgets = _clean(budgets)
    if budgets is None:
        return
    path = Path(os.environ["SWITCH_HOME"]) / "config.toml"
    path.write_text(tomlkit.dumps({"budgets": budgets}), encoding="utf-8")
    try:
        loaded = load_settings(path)
    except ConfigError as exc:
        assert exc.message.startswith(f"{path}: ")
        assert "'budgets" in exc.message, exc.message
        return
    for budget in loaded.budgets:
        assert budget.actions
        # A plan: budget counts the plan's window, never dollars; every other one has a positive limit.
        assert (budget.limit_usd is None) == budget.is_plan
        assert budget.limit_usd is None or budget.limit_usd > 0
        for action in budget.actions:
            assert (action.effort is not None) == (action.do == "effort")
            assert (action.preset is not None) == (action.do == "preset")


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ('scope = "role:boss"\nlimit_usd = 1', "budgets.0.scope", "unknown role"),
        ('scope = "model:nosuch/m"\nlimit_usd = 1', "budgets.0.scope", "unknown provider 'nosuch'"),
        ('period = "year"\nlimit_usd = 1', "budgets.0.period", "'day', 'week' or 'month'"),
        ("limit_usd = 0", "budgets.0.limit_usd", "greater than 0"),
        ("limit_usd = 1\nactions = [{ at = 0.5, do = 'effort' }]", "budgets.0.actions.0", "needs effort"),
        ("limit_usd = 1\nactions = [{ at = 1, do = 'block', when = 1 }]", "budgets.0.actions.0.when", "allowed: at"),
        ("limit_usd = 1\nlimt = 2", "budgets.0.limt", "allowed: actions, limit_usd, name, period, scope, window"),
        ('scope = "plan:nosuch"', "budgets.0.scope", "unknown plan (known: anthropic, openai)"),
        ('scope = "plan:anthropic"\nlimit_usd = 1', "budgets.0", "takes no limit_usd"),
        ('scope = "total"', "budgets.0", "limit_usd is required"),
        ('scope = "total"\nlimit_usd = 1\nwindow = "5h"', "budgets.0", "'window' goes only with"),
    ],
)
def test_a_wrong_budget_is_a_config_error_naming_the_key(isolated_home: Path, text: str, key: str, hint: str) -> None:
    path = isolated_home / "config.toml"
    path.write_text(f"[[budgets]]\n{text}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert f"'{key}" in caught.value.message and hint in caught.value.message, caught.value.message


def test_a_budget_without_actions_blocks_at_its_limit(isolated_home: Path) -> None:
    path = isolated_home / "config.toml"
    path.write_text('[[budgets]]\nscope = "harness:codex"\nperiod = "week"\nlimit_usd = 2.5\n', encoding="utf-8")
    (budget,) = load_settings(path).budgets
    assert (budget.label, budget.limit_micros) == ("harness:codex/week", 2_500_000)
    assert [(action.at, action.do) for action in budget.actions] == [(1.0, "block")]


def test_a_budget_switching_to_a_missing_preset_is_refused_where_the_config_is_taken_into_use(
    isolated_home: Path,
) -> None:
    path = isolated_home / "config.toml"
    path.write_text(
        "[[budgets]]\nlimit_usd = 1\n"
        "actions = [{ at = 0.5, do = 'warn' }, { at = 1, do = 'preset', preset = 'nosuch' }]\n",
        encoding="utf-8",
    )
    settings = load_settings(path)  # config alone knows no presets: the table itself is valid
    with pytest.raises(ConfigError) as caught:
        check_budget_presets(settings, path)
    message = caught.value.message
    assert message.startswith(f"{path}: key 'budgets.0.actions.1.preset': no preset named 'nosuch'"), message
    # The commands that take a config into use refuse it the same way, as one line naming the key.
    for command in (["doctor"], ["serve", "--port", "1"]):
        done = subprocess.run(
            [sys.executable, "-m", "switch", *command], capture_output=True, text=True, timeout=120, check=False
        )
        output = done.stdout + done.stderr
        assert done.returncode in (1, 2) and "budgets.0.actions.1.preset" in output, (command, output)
        assert "Traceback" not in output
