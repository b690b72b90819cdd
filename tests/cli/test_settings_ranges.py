"""Config values that would break the proxy at run time are refused when the file is read.

`ping_interval = 0` spun a core, `read_timeout = nan` failed every call with a 500, `max_body_bytes = -1`
answered every call with 413, and a CR/LF in a name gave empty replies and no ledger row. Each is now one
`switch: …` line naming the file and the key, `switch serve` does not start, and a running proxy keeps its
last good config.
"""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.config import PRICE_FIELDS, ModelSettings, Routing, Server, load_config, load_settings
from switch.errors import ConfigError, PresetError
from switch.proxy.config_follower import ConfigFollower
from switch.routing.presets import load_preset
from tests.commands import run_switch

TRACEBACK = "Traceback (most recent call last)"


def _numeric_fields(model: Any) -> list[str]:
    return [
        name
        for name, hint in typing.get_type_hints(model).items()
        if any(kind in str(hint) for kind in ("int", "float")) and name != "port"
    ]


# Every numeric key of every fixed table (and a model's), found from the schema so a new one is covered too.
NUMERIC_KEYS = (
    [("server", name) for name in _numeric_fields(Server)]
    + [("routing", name) for name in _numeric_fields(Routing)]
    + [('models."baseten/some-model"', name) for name in _numeric_fields(ModelSettings)]
    + [('prices."baseten/some-model"', name) for name in PRICE_FIELDS]
)

BROKEN = [
    ("[server]\nping_interval = 0\n", "server.ping_interval"),
    ("[server]\nread_timeout = nan\n", "server.read_timeout"),
    ("[server]\nmax_body_bytes = -1\n", "server.max_body_bytes"),
    ("[server]\nconnect_timeout = inf\n", "server.connect_timeout"),
    ("[server]\nheader_timeout = -5\n", "server.header_timeout"),
    ("[server]\nmax_connections = 0\n", "server.max_connections"),
    ("[routing]\nttft_timeout = -inf\n", "routing.ttft_timeout"),
    ('[prices."baseten/m"]\ninput = nan\n', "prices"),
    ('[prices."baseten/m"]\noutput = -inf\n', "prices"),
    ('[prices."baseten/m"]\ninput = -1.5\n', "prices"),
    ('[defaults]\nmodel = "baseten/kimi\\r\\nx-evil: 1"\n', "defaults.model"),
    ('[providers.baseten]\nbase_url = "https://a.example/v1\\n"\n', "providers.baseten.base_url"),
    ('[providers."bad\\u0007name"]\nbase_url = "https://a.example/v1"\n', "providers.bad\\x07name"),
]


@pytest.mark.parametrize(("text", "key"), BROKEN, ids=[key + ":" + text.split("=")[-1].strip() for text, key in BROKEN])
def test_serve_refuses_a_value_that_would_break_calls(isolated_home: Path, text: str, key: str) -> None:
    """`switch serve` exits with one line naming the file and the key (never a traceback, never listening)."""
    (isolated_home / "config.toml").write_text(text, encoding="utf-8")
    result = run_switch("serve", "--port", "0")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("switch: ") and str(isolated_home / "config.toml") in lines[0]
    assert f"'{key}" in lines[0]
    assert TRACEBACK not in result.stderr and "listening" not in result.stdout


def _toml_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        # JSON's string escapes are TOML's, but for DEL, which TOML wants escaped too.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return str(value)


VALUES = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(NUMERIC_KEYS), value=VALUES)
def test_any_numeric_value_is_a_usable_setting_or_one_clear_error(
    isolated_home: Path, key: tuple[str, str], value: Any
) -> None:
    """Random TOML values for every numeric key: a finite, positive setting, or a ConfigError naming the key."""
    table, name = key
    path = isolated_home / "config.toml"
    path.write_text(f"[{table}]\n{name} = {_toml_literal(value)}\n", encoding="utf-8")
    try:
        loaded = load_settings(path)
    except ConfigError as exc:
        assert exc.message.startswith(f"{path}: ") and name in exc.message and "\n" not in exc.message
        return
    if table == "server":
        number = getattr(loaded.server, name)
    elif table == "routing":
        number = getattr(loaded.routing, name)
    elif table.startswith("prices"):
        number = loaded.prices["baseten/some-model"][name]
    else:
        number = getattr(loaded.models["baseten/some-model"], name)
    assert isinstance(number, int | float) and not isinstance(number, bool)
    assert math.isfinite(number) and number >= 0
    assert number > 0 or name in ("shutdown_grace", *PRICE_FIELDS)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=1, max_size=12))
def test_any_text_with_a_control_character_is_refused(isolated_home: Path, name: str) -> None:
    """A model name of any text loads exactly when it holds no control character, and the error stays one line."""
    path = isolated_home / "config.toml"
    path.write_text(f"[defaults]\nmodel = {_toml_literal('baseten/' + name)}\n", encoding="utf-8")
    control = any(ord(character) < 0x20 or 0x7F <= ord(character) <= 0x9F for character in name)
    try:
        loaded = load_settings(path)
    except ConfigError as exc:
        assert control and "defaults.model" in exc.message and "\n" not in exc.message and "\r" not in exc.message
        return
    assert not control and loaded.defaults.model == "baseten/" + name


def test_a_preset_with_a_control_character_in_a_target_is_refused(isolated_home: Path) -> None:
    """A target name in a preset file is refused the same way (it would become a header and a URL)."""
    presets = isolated_home / "presets"
    presets.mkdir()
    (presets / "evil.toml").write_text('[default]\norchestrator = ["baseten/kimi\\r\\nx"]\n', encoding="utf-8")
    with pytest.raises(PresetError) as caught:
        load_preset("evil", {"baseten"}, "baseten/kimi")
    assert "default.orchestrator[0]" in caught.value.message and "U+000D" in caught.value.message


def test_a_running_proxy_keeps_its_last_good_config(start_proxy: Any, isolated_home: Path) -> None:
    """An edit to `read_timeout = nan` is rejected by the follower, which says why and keeps serving the old one."""
    proxy = start_proxy("[routing]\nttft_timeout = 7\n")
    relay = proxy.app.app.relay
    follower = ConfigFollower(load_config(isolated_home / "config.toml"), relay, relay.presets, None)
    (isolated_home / "config.toml").write_text("[routing]\nttft_timeout = nan\n", encoding="utf-8")
    follower.poll()
    assert follower.rejected is not None and "routing.ttft_timeout" in follower.rejected["error"]
    assert follower.relay.settings.routing.ttft_timeout == 7
