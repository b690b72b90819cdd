"""What a user sees from `switch serve` at start-up and on a busy port, and the smaller CLI promises:
--version, -h, bare `switch`, `use --none`, refused keys, exit codes of rm/status/down, listed values."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from switch import __version__
from switch.cli import app
from switch.ledger.queries import GROUPS
from tests.cli.test_cli_errors import _invocations
from tests.servers import end_process

TRACEBACK = "Traceback (most recent call last)"


def run_switch(*args: str, home: Path | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"SWITCH_HOME": str(home)} if home else {})}
    return subprocess.run(
        [sys.executable, "-m", "switch", *args], env=env, input=stdin, capture_output=True, text=True, timeout=60
    )


class Serving:
    """A real `switch serve` process and the lines it printed so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def first_lines(self, count: int, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while len(seen) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"`switch serve` printed only {seen} within {timeout} s"
            try:
                seen.append(self.lines.get(timeout=remaining))
            except queue.Empty:
                continue
        return seen


@contextmanager
def serving(home: Path, *args: str) -> Iterator[Serving]:
    process = subprocess.Popen(
        [sys.executable, "-m", "switch", "serve", *args],
        env={**os.environ, "SWITCH_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Serving(process)
    try:
        yield served
    finally:
        end_process(process)
        served.reader.join(timeout=10)  # it ends at the pipe's end, once the process is gone
        assert process.stdout is not None
        process.stdout.close()


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
        return dict(json.loads(response.read()))


def _wait_for(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_serve_prints_its_url_routes_and_ledger_and_use_none_goes_back_to_defaults(isolated_home: Path) -> None:
    assert run_switch("use", "kimi-k3").returncode == 0
    with serving(isolated_home, "--port", "0") as proxy:
        listening, routes, ledger = proxy.first_lines(3)
        assert listening.startswith("switch proxy listening on http://127.0.0.1:")
        url = listening.split()[4]
        assert _get(url + "/healthz")["pid"] == proxy.process.pid  # the URL printed is the one that answers
        assert routes.startswith("preset: kimi-k3")
        assert ledger == f"ledger: {isolated_home / 'ledger.db'}"

        def routed_to() -> set[str]:
            return {entry["display_name"].rsplit("(", 1)[1] for entry in _get(url + "/v1/models")["data"]}

        assert routed_to() == {"kimi-k3)"}
        back = run_switch("use", "--none")
        assert back.returncode == 0, back.stderr
        assert "every call goes to baseten/moonshotai/Kimi-K3" in back.stdout
        _wait_for(lambda: routed_to() == {"defaults)"})  # the running proxy follows
    assert "No preset chosen" in run_switch("presets").stdout
    with serving(isolated_home, "--port", "0") as proxy:
        routes = proxy.first_lines(2)[1]
    assert routes.startswith("no preset: every call goes to baseten/moonshotai/Kimi-K3")


def test_serve_on_a_busy_port_names_who_holds_it(isolated_home: Path, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        stranger = run_switch("serve", "--port", str(port))
    assert stranger.returncode == 2
    assert stranger.stderr.strip().splitlines() == [
        f"switch: port {port} on 127.0.0.1 is already taken by another program (it does not answer as a switch "
        "proxy); pick another with `switch serve --port N` or set [server] port in config.toml"
    ]
    assert "Errno" not in stranger.stderr + stranger.stdout

    other_home = tmp_path / "other-home"
    other_home.mkdir()
    with serving(other_home, "--port", "0") as other:
        other_port = int(other.first_lines(1)[0].split()[4].rsplit(":", 1)[1])
        mine = run_switch("serve", "--port", str(other_port))
        theirs = run_switch("serve", "--port", str(other_port), home=other_home)
        pid = other.process.pid
    assert mine.returncode == 2 and theirs.returncode == 2
    assert f"another switch proxy (home {other_home.resolve()}, pid {pid})" in mine.stderr
    assert f"this home's own switch proxy (pid {pid})" in theirs.stderr and "switch down" in theirs.stderr
    for result in (mine, theirs):
        assert len(result.stderr.strip().splitlines()) == 1 and TRACEBACK not in result.stderr
        assert "Errno" not in result.stderr + result.stdout


def test_version_and_bare_switch() -> None:
    version = run_switch("--version")
    assert (version.returncode, version.stdout) == (0, f"switch {__version__}\n")
    bare = run_switch()
    assert bare.returncode == 0 and bare.stdout.startswith("Usage:")
    assert "Exit codes: 0" in bare.stdout and bare.stderr == ""


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_takes_h_and_help(flag: str) -> None:
    runner = CliRunner()
    for command in _invocations(typer.main.get_command(app)):
        result = runner.invoke(app, [*command.split(), flag])
        assert result.exit_code == 0 and "Usage:" in result.output, f"`switch {command} {flag}`: {result.output}"


def test_help_lists_every_accepted_value() -> None:
    runner = CliRunner()

    def helped(*command: str) -> str:
        # Click wraps help text; the values are checked on the words, not the lines.
        return " ".join(runner.invoke(app, [*command, "--help"]).output.split())

    assert all(group in helped("spend") for group in GROUPS)
    assert all(value in helped("langchain") for value in ("on,", "off", "env"))
    assert all(value in helped("run") for value in ("claude", "codex", "dcode"))
    assert "csv or jsonl" in helped("export")


@pytest.mark.parametrize(("harness", "accepted"), [("langchain", "on, off or env"), ("claude", "on or off")])
def test_a_wrong_action_lists_every_accepted_one(harness: str, accepted: str) -> None:
    result = run_switch(harness, "bogus")
    assert result.returncode == 2
    assert result.stderr == f"switch: `switch {harness}` takes {accepted}, not 'bogus'\n"


def test_keys_for_an_unknown_provider_are_refused(isolated_home: Path) -> None:
    result = run_switch("keys", "set", "nosuchprovider", stdin="sk-some-key\n")
    assert result.returncode == 2
    assert "unknown provider 'nosuchprovider' (known: anthropic, baseten, moonshot, openai, openrouter)" in (
        result.stderr
    )
    assert "sk-some-key" not in result.stdout + result.stderr
    assert not (isolated_home / "keys.json").exists()


def test_removing_a_key_that_is_not_stored_exits_1(isolated_home: Path) -> None:
    missing = run_switch("keys", "rm", "baseten")
    assert missing.returncode == 1 and "no stored key for baseten" in missing.stderr
    assert run_switch("keys", "set", "baseten", stdin="sk-test-0123\n").returncode == 0
    removed = run_switch("keys", "rm", "baseten")
    assert removed.returncode == 0 and "Removed" in removed.stdout


def test_status_and_down_exit_1_when_nothing_runs_and_down_tells_dead_from_stopped(isolated_home: Path) -> None:
    status = run_switch("status")
    assert status.returncode == 1 and "not running" in status.stdout
    assert run_switch("status", "--json").returncode == 1

    (isolated_home / "run").mkdir()
    (isolated_home / "run" / "proxy.json").write_text(json.dumps({"pid": 999999, "port": 1, "started_at": 0}))
    dead = run_switch("down")
    assert dead.returncode == 1
    assert dead.stdout == "switch proxy: was not running (pid 999999 had exited); removed its stale record\n"
    assert not (isolated_home / "run" / "proxy.json").exists()
    assert run_switch("down").returncode == 1


def test_export_to_a_missing_folder_is_one_clean_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "x.csv"
    result = run_switch("export", "--output", str(target))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"switch: cannot write {target}: No such file or directory; give --output a file in a folder that exists "
        "and you can write to"
    ]
