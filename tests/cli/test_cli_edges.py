"""The CLI's edges a new user meets: exports of an empty ledger and their units, limits, full session ids, a second
proxy for one home, the preset a running proxy really kept, prices, doctor without a config, keys from stdin,
Ctrl-C, and click's own usage errors, each as one `switch: …` line where it is an error."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from switch.config import load_settings
from switch.ledger.recorder import Recorder
from tests.commands import run_switch
from tests.ledger_seed import kimi_call, pricer_for, seed_ledger
from tests.servers import free_port, serve_process, stopped_serve, wait_until

TRACEBACK = "Traceback (most recent call last)"


def one_line(result: subprocess.CompletedProcess[str], *names: str) -> str:
    """Exit 2 with one `switch: …` line on stderr naming each of `names`; the line."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("switch: "), result.stderr
    assert TRACEBACK not in result.stdout + result.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


# ---- export ---------------------------------------------------------------------------------------------------


def test_export_of_an_empty_ledger_writes_the_header_alone_and_says_so_on_stderr(
    isolated_home: Path, tmp_path: Path
) -> None:
    piped = run_switch("export", "--format", "csv")
    assert piped.returncode == 0
    header = next(csv.reader(io.StringIO(piped.stdout)))
    assert header[:2] == ["id", "started_at"] and "cost_micros" in header and len(piped.stdout.splitlines()) == 1
    assert "no calls recorded yet" in piped.stderr
    assert run_switch("export").stdout == ""  # JSON lines: no call, no line
    out = tmp_path / "calls.csv"
    written = run_switch("export", "--format", "csv", "--output", str(out))
    assert written.returncode == 0 and out.read_text() == piped.stdout


def test_export_readable_gives_iso_times_and_dollars(isolated_home: Path) -> None:
    seed_ledger(isolated_home / "ledger.db", 20)
    raw = list(csv.DictReader(io.StringIO(run_switch("export", "--format", "csv").stdout)))
    shown = run_switch("export", "--format", "csv", "--readable")
    assert shown.returncode == 0, shown.stderr
    readable = list(csv.DictReader(io.StringIO(shown.stdout)))
    assert len(readable) == len(raw) == 20
    for before, after in zip(raw, readable, strict=True):
        assert datetime.fromisoformat(after["started_at"]).timestamp() == pytest.approx(
            float(before["started_at"]), abs=0.001
        )
        assert "cost_micros" not in after
        for money in ("cost", "native_cost", "cache_savings"):
            micros = before[f"{money}_micros"]
            assert after[f"{money}_usd"] == ("" if micros == "" else str(round(int(micros) / 1_000_000, 6)))
    lines = run_switch("export", "--readable").stdout.splitlines()
    assert json.loads(lines[0])["cost_usd"] == round(int(raw[0]["cost_micros"]) / 1_000_000, 6)


# ---- calls and spend ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", ["-5", "0"])
def test_calls_limit_below_one_is_refused(isolated_home: Path, limit: str) -> None:
    seed_ledger(isolated_home / "ledger.db", 30)
    one_line(run_switch("calls", "--limit", limit), "--limit")


def test_spend_by_session_shows_whole_ids_that_the_status_line_finds(isolated_home: Path) -> None:
    session = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b-with-a-long-tail"
    recorder = Recorder(pricer_for(load_settings()))
    recorder.start()
    try:
        recorder.submit(kimi_call(1_780_000_000.0, session_id=session, input_tokens=1000, output_tokens=10))
        wait_until(lambda: recorder.written == 1, 30, "the call to be written")
    finally:
        recorder.close()
    report = run_switch("spend", "--by", "session")
    assert report.returncode == 0 and session in report.stdout, report.stdout
    shown = [line.split()[0] for line in report.stdout.splitlines()[1:]]
    line = run_switch("statusline", "--session", shown[0]).stdout
    assert line.startswith("switch · ") and "no calls" not in line and "Kimi-K3" in line, line


# ---- the proxy ------------------------------------------------------------------------------------------------


def test_serve_refuses_a_second_proxy_for_a_home_whose_proxy_runs(isolated_home: Path) -> None:
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    try:
        assert run_switch("up").returncode == 0
        other = free_port()
        second = run_switch("serve", "--port", str(other))
        one_line(second, f"127.0.0.1:{port}", "switch down")
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{other}/healthz", timeout=0.5)
    finally:
        run_switch("down")


def test_status_names_the_preset_the_proxy_kept_after_refusing_a_broken_one(isolated_home: Path) -> None:
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "mine.toml").write_text('[default]\norchestrator = "native"\n')
    (isolated_home / "active-preset").write_text("kimi-k3\n")
    with serve_process(port, {}):
        (isolated_home / "active-preset").write_text("mine\n")
        wait_until(lambda: _routing(port)["name"] == "mine", 30, "the proxy to take preset mine")
        (isolated_home / "presets" / "mine.toml").write_text('[default]\norchestrator = "nosuch/x"\n')
        wait_until(lambda: _routing(port)["error"], 30, "the proxy to refuse the broken preset")
        status = run_switch("status")
        assert status.returncode == 0, status.stderr
        assert "preset mine" in status.stdout.splitlines()[0]
        assert "warning: the proxy kept preset mine" in status.stdout and "nosuch" in status.stdout
        report = json.loads(run_switch("status", "--json").stdout)
        assert report["preset"] == "mine" and "nosuch" in report["preset_error"]


def _routing(port: int) -> dict[str, object]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["preset"])


def test_serve_says_it_stopped_on_ctrl_c(isolated_home: Path) -> None:
    stopped = stopped_serve(signal.SIGINT)
    assert stopped.returncode == 130, stopped.stderr  # the shell's code for a program ended by Ctrl-C
    assert stopped.stdout.splitlines()[-1] == "switch proxy stopped; 0 calls written to the ledger"
    assert TRACEBACK not in stopped.stderr


# ---- config, doctor, keys -------------------------------------------------------------------------------------


@pytest.mark.parametrize("price", ["input = -3.0", "output = -0.01", "cached_input = nan", "inptu = 3.0"])
def test_a_negative_or_misspelt_price_is_refused(isolated_home: Path, price: str) -> None:
    (isolated_home / "config.toml").write_text(f'[prices."baseten/moonshotai/Kimi-K3"]\n{price}\n')
    one_line(run_switch("prices"), "config.toml", "prices", '"baseten/moonshotai/Kimi-K3".' + price.split()[0])


def test_doctor_without_a_config_file_says_it_runs_on_the_defaults(isolated_home: Path) -> None:
    result = run_switch("doctor")
    assert "config.toml is valid" not in result.stdout
    assert f"no config.toml ({isolated_home / 'config.toml'}): running on the built-in defaults" in result.stdout


def test_keys_set_refuses_several_lines_on_stdin_and_stores_nothing(isolated_home: Path) -> None:
    result = run_switch("keys", "set", "baseten", stdin="sk-first-line\nsk-second-line\n")
    line = one_line(result, "2 lines", "nothing stored")
    assert "sk-" not in line
    assert not (isolated_home / "keys.json").exists()
    stored = run_switch("keys", "set", "baseten", stdin="sk-only-line\n")
    assert stored.returncode == 0 and (isolated_home / "keys.json").exists(), stored.stderr


# ---- usage errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--bogus"], ["--bogus", "switch --help"]),
        (["nosuchcommand"], ["nosuchcommand"]),
        (["spend", "--bogus"], ["--bogus", "spend --help"]),
        (["keys", "set"], ["provider", "keys set --help"]),
        (["calls", "--limit", "many"], ["--limit"]),
    ],
    ids=["root option", "command", "command option", "missing argument", "not a number"],
)
def test_usage_errors_are_one_line_like_every_other_error(args: list[str], names: list[str]) -> None:
    one_line(run_switch(*args), *names)
