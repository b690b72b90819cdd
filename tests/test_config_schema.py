"""config.toml is checked without pydantic: same keys, types, ranges and messages, ~9 MB less for the proxy.

The settings are plain dataclasses checked by `switch.config_schema`. What a user sees: every TOML value of
the right type and range is taken as written, every other one is one `switch:`-style error naming the file
and the dotted key (never the value), and `switch serve`'s config modules leave pydantic unimported.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import typing
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.child import python_argv
from switch.config import Routing, Server, Settings, load_settings
from switch.config_schema import SchemaError, field_names, to_dict, validate
from switch.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent

# (ge, gt, le) of every numeric [server] and [routing] key, as the README's config reference states them.
RANGES: dict[str, tuple[float | None, float | None, float]] = {
    "port": (1, None, 65535),
    "max_body_bytes": (1024, None, 1 << 30),
    "ping_interval": (0.1, None, 3600),
    "connect_timeout": (None, 0, 3600),
    "read_timeout": (None, 0, 86400),
    "max_stream_seconds": (None, 0, 7 * 24 * 3600),
    "shutdown_grace": (0, None, 3600),
    "header_timeout": (None, 0, 3600),
    "body_timeout": (None, 0, 86400),
    "idle_timeout": (None, 0, 86400),
    "max_connections": (4, None, 1 << 20),
    "max_buffered_body_bytes": (1024, None, 1 << 34),
    "websocket_idle_timeout": (None, 0, 86400),
    "ttft_timeout": (None, 0, 3600),
}


def test_the_config_modules_of_switch_serve_leave_pydantic_unimported(tmp_path: Path) -> None:
    """Importing and loading what `switch serve` reads its config with never imports pydantic."""
    code = (
        "import sys\n"
        "import switch.config, switch.proxy.fail_open, switch.config_budgets, switch.config_team\n"
        "from switch.config import load_config\n"
        "from switch.proxy.fail_open import fallback_settings\n"
        "loaded = load_config()\n"
        "fallback_settings(loaded.path)\n"
        "assert loaded.settings.budgets and loaded.settings.team is not None, loaded\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('pydantic', 'pydantic_core')))\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    # Budgets and a team table too, so their schemas are built in the child.
    (home / "config.toml").write_text(
        '[team]\nledger_url = "postgresql://u@db.internal/switch"\n[[budgets]]\nlimit_usd = 2\n', encoding="utf-8"
    )
    env = {**os.environ, "SWITCH_HOME": str(home)}
    done = subprocess.run(
        python_argv("-c", code), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_schema_knows_every_key_of_the_server_table() -> None:
    """Every numeric [server]/[routing] key has a range stated here (a new key without one fails this)."""
    numeric = [
        name
        for table in (Server, Routing)
        for name, hint in typing.get_type_hints(table).items()
        if hint in (int, float)
    ]
    assert sorted(numeric) == sorted(RANGES)


def _in_range(name: str, value: float) -> bool:
    ge, gt, le = RANGES[name]
    return math.isfinite(value) and (ge is None or value >= ge) and (gt is None or value > gt) and value <= le


VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    # Marked, so a value quoted back is found (and a short one never matches the message's own words).
    st.text(max_size=6).map(lambda text: "sk-" + text),
    st.lists(st.integers(), max_size=2),
)
SERVER_KEYS = st.sampled_from([*field_names(Server), "prot", "hosts"])


@given(table=st.dictionaries(SERVER_KEYS, VALUES, max_size=4))
def test_any_server_table_is_taken_as_written_or_refused_at_one_of_its_keys(table: dict[str, Any]) -> None:
    """Each value of the right TOML type and range is kept as written (ints as floats where a float is
    wanted); anything else is refused naming one of the table's keys, never quoting the value."""
    hints = typing.get_type_hints(Server)
    wrong = []
    for key, value in table.items():
        hint = hints.get(key)
        if hint is None:
            wrong.append(key)
        elif hint is bool or hint is str:
            wrong += [] if type(value) is hint else [key]
        elif hint == str | None:
            wrong += [] if isinstance(value, str) else [key]
        elif hint is int:
            wrong += [] if type(value) is int and _in_range(key, value) else [key]
        else:
            wrong += [] if type(value) in (int, float) and _in_range(key, value) else [key]
    try:
        server = validate(Server, table, ("server",))
    except SchemaError as exc:
        assert exc.loc[0] == "server" and exc.loc[1] in wrong, (exc, wrong)
        assert exc.kind == ("unknown" if exc.loc[1] in ("prot", "hosts") else "invalid")
        value = table[exc.loc[1]]
        assert not isinstance(value, str) or value not in str(exc)
        return
    assert not wrong, wrong
    for key, value in table.items():
        kept = getattr(server, key)
        assert kept == value and type(kept) is (float if hints[key] is float else type(value)), key


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    port=st.integers(min_value=1, max_value=65535),
    ttft=st.floats(min_value=0.001, max_value=3600, allow_nan=False),
    triggers=st.lists(st.sampled_from(["connect", "timeout", "5xx", "429", "no_key", "context_window"]), unique=True),
    limit=st.floats(min_value=0.01, max_value=1e6, allow_nan=False),
)
def test_loaded_settings_round_trip_through_plain_data(
    isolated_home: Path, port: int, ttft: float, triggers: list[str], limit: float
) -> None:
    """A loaded config, written back as `switch config show` prints it, loads to the same settings."""
    path = isolated_home / "config.toml"
    path.write_text(
        f"[server]\nport = {port}\n[routing]\nttft_timeout = {ttft!r}\nfallback_on = {triggers!r}\n"
        f'[[budgets]]\nlimit_usd = {limit!r}\nactions = [{{ at = 0.5, do = "effort", effort = "low" }}]\n'
        '[team]\nledger_url = "postgresql://u@h/db"\nmember = "ana"\n',
        encoding="utf-8",
    )
    loaded = load_settings(path)
    assert (loaded.server.port, loaded.routing.ttft_timeout, loaded.routing.fallback_on) == (port, ttft, triggers)
    shown = to_dict(loaded, exclude_none=True)
    path.write_text(tomlkit.dumps(shown), encoding="utf-8")
    assert load_settings(path) == loaded == validate(Settings, shown)
    assert dataclasses.replace(loaded, server=Server(port=port % 65535 + 1)) != loaded


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[server]\nport = "8742"\n', "invalid value at 'server.port': must be a whole number from 1 to 65535"),
        ("[server]\nport = 8742.0\n", "invalid value at 'server.port': must be a whole number from 1 to 65535"),
        ("[server]\nshutdown_grace = true\n", "'server.shutdown_grace': must be a whole number from 0 to 3600"),
        ("[server]\nread_timeout = nan\n", "'server.read_timeout': must be a finite number greater than 0 and at"),
        ("[server]\nmetrics = 1\n", "invalid value at 'server.metrics': must be true or false"),
        ('[routing]\naffinity = "sticky"\n', "'routing.affinity': must be 'session' or 'none'"),
        ('[routing]\nfallback_on = ["5xx", "4xx"]\n', "'routing.fallback_on.1': must be 'connect', 'timeout'"),
        ('[models."baseten/m"]\ncontext_window = 0\n', "must be a whole number greater than 0 and at most"),
        ("[team]\nmember = 'ana'\n", "key 'team.ledger_url' is required"),
        ('[[budgets]]\nlimit_usd = 1\nwindow = ""\n', "'budgets.0.window': must be text of 1 to 16 characters"),
        ("[[budgets]]\nlimit_usd = 1\nactions = []\n", "'budgets.0.actions': must be a list of at least 1 item"),
        ('[server]\naccess_token = 5\nhost = "h"\n', "'server.access_token': must be text (in quotes)"),
    ],
)
def test_a_wrong_value_names_the_key_and_what_is_allowed(isolated_home: Path, text: str, expected: str) -> None:
    path = isolated_home / "config.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert caught.value.message.startswith(f"{path}: ") and expected in caught.value.message, caught.value.message


def test_a_float_setting_takes_a_toml_integer_as_a_float(isolated_home: Path) -> None:
    path = isolated_home / "config.toml"
    path.write_text("[server]\nread_timeout = 60\n[[budgets]]\nlimit_usd = 3\n", encoding="utf-8")
    loaded = load_settings(path)
    assert type(loaded.server.read_timeout) is float and loaded.server.read_timeout == 60.0
    assert type(loaded.budgets[0].limit_usd) is float


def test_a_secret_given_where_a_number_belongs_is_never_shown(isolated_home: Path) -> None:
    path = isolated_home / "config.toml"
    path.write_text('[server]\nport = "sk-live-9f8e7d"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "server.port" in caught.value.message and "sk-live-9f8e7d" not in caught.value.message
