"""Ports are whole numbers from 1 to 65535 wherever they enter: config.toml, `--port`, the run record.

Out of range, a port used to wrap modulo 65536 (`serve` listened on 34463 for 99999) or end in an
OverflowError traceback (`up`); a string was taken as a number.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.config import load_settings
from switch.errors import ConfigError
from tests.commands import run_switch

TRACEBACK = "Traceback (most recent call last)"
BAD_CONFIG_PORTS = ["99999", "0", '"8742"', "8742.0"]


def one_line(result: subprocess.CompletedProcess[str], *names: str) -> None:
    """Exit 2 and exactly one `switch: …` line on stderr that names each of `names`, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("switch: "), result.stderr
    assert TRACEBACK not in result.stdout + result.stderr
    for name in names:
        assert name in lines[0], lines[0]


@pytest.mark.parametrize("value", BAD_CONFIG_PORTS)
def test_a_port_in_config_outside_1_to_65535_or_not_a_whole_number_is_refused(isolated_home: Path, value: str) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {value}\n")
    for command in (["serve"], ["up"]):
        one_line(run_switch(*command), "config.toml", "server.port")
    doctor = run_switch("doctor")
    assert doctor.returncode == 1 and "server.port" in doctor.stdout and "config.toml is valid" not in doctor.stdout
    assert not (isolated_home / "run" / "proxy.json").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--port", "99999"],
        ["serve", "--port", "70000"],
        ["serve", "--port", "-1"],
        ["serve", "--port", "high"],
        ["up", "--port", "99999"],
        ["up", "--port", "-1"],
        ["up", "--port", "0"],
        ["up", "--port", "high"],
    ],
    ids=lambda args: " ".join(args),
)
def test_a_port_flag_outside_1_to_65535_is_refused_in_one_line(isolated_home: Path, args: list[str]) -> None:
    # Out of range: the range is named; not a number at all: click's own words ("valid integer"), in one line.
    one_line(run_switch(*args), "--port", "integer" if args[-1] == "high" else "1 to 65535")
    assert not (isolated_home / "run" / "proxy.json").exists()


@pytest.mark.parametrize(
    "record",
    [
        {"pid": "x", "port": "y"},
        {"pid": os.getpid(), "port": 99999, "started_at": 0},
        {"pid": os.getpid(), "port": "8742", "started_at": 0},
        ["not", "a", "record"],
    ],
    ids=["strings", "port out of range", "port as a string", "not an object"],
)
def test_a_damaged_run_record_reads_as_no_proxy(isolated_home: Path, record: object) -> None:
    (isolated_home / "run").mkdir()
    (isolated_home / "run" / "proxy.json").write_text(json.dumps(record))
    for command in ("status", "down"):
        result = run_switch(command)
        assert result.returncode == 1 and "not running" in result.stdout, result.stderr
        assert TRACEBACK not in result.stderr


@given(port=st.integers(-(2**70), 2**70) | st.text(max_size=8) | st.floats(allow_nan=False, allow_infinity=False))
def test_any_configured_port_loads_only_as_a_whole_number_from_1_to_65535(port: object) -> None:
    path = Path(os.environ["SWITCH_HOME"]) / "config.toml"
    value = json.dumps(port) if isinstance(port, str) else repr(port)
    if isinstance(port, int) and abs(port) >= 2**63:
        return  # not a TOML integer at all: the TOML parser refuses it before the settings see it
    path.write_text(f"[server]\nport = {value}\n")
    try:
        loaded = load_settings().server.port
    except ConfigError as exc:
        assert not (type(port) is int and 1 <= port <= 65535), exc.message
        assert "server.port" in exc.message or "not valid TOML" in exc.message
    else:
        assert type(port) is int and 1 <= port <= 65535 and loaded == port
