"""One proxy per SWITCH_HOME: commands run from one home never use, stop or count another home's proxy."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import switch
from tests.commands import run_switch, stand_in
from tests.servers import answers_health, free_port, serve_process


@dataclass
class OtherProxy:
    home: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def holder(self) -> str:
        return f"another switch proxy (home {self.home.resolve()}, pid {self.process.pid})"

    def alive(self) -> bool:
        return self.process.poll() is None and answers_health(self.port)


@pytest.fixture
def other_proxy(tmp_path: Path, isolated_home: Path) -> Iterator[OtherProxy]:
    """`switch serve` of another home on the port this home's config.toml names too."""
    home = tmp_path / "other-home"
    home.mkdir()
    port = free_port()
    (home / "config.toml").write_text(f"[server]\nport = {port}\n")
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    with serve_process(port, {"SWITCH_HOME": str(home)}) as process:
        yield OtherProxy(home, port, process)


def test_healthz_names_the_home_pid_and_version(other_proxy: OtherProxy) -> None:
    health = httpx.get(f"http://127.0.0.1:{other_proxy.port}/healthz", timeout=5).json()
    assert health["home"] == str(other_proxy.home.resolve())
    assert health["pid"] == other_proxy.process.pid
    assert health["version"] == switch.__version__


def test_status_up_down_doctor_and_dashboard_leave_another_homes_proxy_alone(
    isolated_home: Path, other_proxy: OtherProxy
) -> None:
    status = json.loads(run_switch("status", "--json").stdout)
    assert not status["running"]
    assert status["other"] == {"home": str(other_proxy.home.resolve()), "pid": other_proxy.process.pid}
    text = run_switch("status").stdout
    assert f"not running for this home ({isolated_home.resolve()})" in text and other_proxy.holder in text

    up = run_switch("up")
    assert up.returncode == 2 and other_proxy.holder in up.stderr and "switch up --port N" in up.stderr
    assert not (isolated_home / "run" / "proxy.json").exists()

    down = run_switch("down")
    assert f"port {other_proxy.port} is held by {other_proxy.holder}, left alone" in down.stdout

    doctor = {check["check"]: check for check in json.loads(run_switch("doctor", "--json").stdout)["checks"]}
    assert not doctor["proxy"]["ok"] and other_proxy.holder in doctor["proxy"]["detail"]
    assert doctor["proxy"]["fix"].startswith("switch up --port ")

    from switch.ui.panes.health import proxy_status

    from switch.checks.doctor import probe_proxy

    assert proxy_status(probe_proxy(other_proxy.port)) == (
        f"not running for this home: port {other_proxy.port} is held by {other_proxy.holder}"
    )
    assert other_proxy.alive()


def test_run_claude_from_another_home_gets_a_proxy_of_its_own(
    isolated_home: Path, tmp_path: Path, other_proxy: OtherProxy
) -> None:
    seen = tmp_path / "seen.json"
    path = stand_in(
        tmp_path,
        "claude",
        "import json, sys, urllib.request\n"
        "settings = json.loads(sys.argv[sys.argv.index('--settings') + 1])\n"
        "base = settings['env']['ANTHROPIC_BASE_URL']\n"
        "health = json.loads(urllib.request.urlopen(base + '/healthz').read())\n"
        f"open({str(seen)!r}, 'w').write(json.dumps({{'base': base, 'health': health}}))\n",
    )

    result = run_switch("run", "claude", env={"PATH": path})

    assert result.returncode == 0, result.stderr
    observed = json.loads(seen.read_text())
    assert observed["health"]["home"] == str(isolated_home.resolve())  # this home's config and ledger
    own_port = int(observed["base"].rsplit(":", 1)[1])
    assert own_port != other_proxy.port
    assert result.stderr.strip() == (
        f"switch: port {other_proxy.port} is held by {other_proxy.holder}; "
        f"starting this home's own proxy on 127.0.0.1:{own_port} for this run"
    )
    assert not answers_health(own_port)  # it stopped the proxy it started...
    assert other_proxy.alive()  # ...and only that one


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not a switch proxy (as when a dead proxy's pid was reused)."""
    process = subprocess.Popen(["sleep", "120"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_down_never_signals_a_pid_that_is_now_another_program(
    isolated_home: Path, stranger: subprocess.Popen[bytes]
) -> None:
    record = isolated_home / "run" / "proxy.json"
    record.parent.mkdir()
    entry = json.dumps({"pid": stranger.pid, "port": free_port(), "started_at": 0, "log": "x"})
    record.write_text(entry)

    down = run_switch("down")

    assert stranger.poll() is None  # not signalled
    assert down.stdout.strip() == (
        f"switch proxy: was not running (pid {stranger.pid} is now another program, not this home's proxy); "
        "removed its stale record without signalling it"
    )
    assert not record.exists()
    record.write_text(entry)
    assert f"stale record: pid {stranger.pid} is now another program" in run_switch("status").stdout


def test_a_second_proxy_of_one_home_on_another_port_is_refused_with_the_holders_pid(isolated_home: Path) -> None:
    # Before the home lock, `serve --port` on a second port ran a second writer on the same ledger and
    # spill file (rows lost); now the second one says who serves the home and exits non-zero.
    import os
    import signal
    import sys

    first_port, second_port = free_port(), free_port()
    with serve_process(first_port, {}) as first:
        second = subprocess.run(
            [sys.executable, "-m", "switch", "serve", "--port", str(second_port)],
            env=os.environ,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode != 0
        assert f"another switch proxy (pid {first.pid}) already serves this home" in second.stderr
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert not answers_health(second_port) and answers_health(first_port)
        # The lock goes with its process, however it ends: after a kill -9 the next proxy starts.
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert (isolated_home / "proxy.lock").exists()
    with serve_process(second_port, {}) as replacement:
        assert answers_health(second_port)
        assert (isolated_home / "proxy.lock").read_text().strip() == str(replacement.pid)


def test_a_wedged_background_proxy_is_named_by_status_and_stopped_by_down(isolated_home: Path) -> None:
    # A proxy that stops answering (hung, or stopped by a debugger) is still this home's: `status` says it
    # does not answer and `down` stops it. Judged from its command line: `switch serve`'s own, or the proxy
    # module's (`python -P -m switch.proxy.server_main`) where typer read the options and exec'd it. The
    # module's used to be taken for another program, and `down` dropped its record and left it running with
    # the port and the home.
    import os
    import signal

    port = free_port()
    (isolated_home / "config.toml").write_text("[server]\nshutdown_grace = 1\n")
    assert run_switch("up", "--port", str(port)).returncode == 0
    pid = json.loads((isolated_home / "run" / "proxy.json").read_text())["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        status = json.loads(run_switch("status", "--json").stdout)
        assert status.get("unresponsive") and not status.get("stale"), status
        assert f"this home's proxy (pid {pid}) does not answer" in run_switch("status").stdout

        down = run_switch("down")

        assert down.returncode == 0 and f"pid {pid}" in down.stdout, down.stdout + down.stderr
        assert _ended(pid)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("repeat", [False, True], ids=["switch serve", "the module typer execs"])
def test_a_wedged_proxy_is_recognised_by_its_command_line_either_way_it_was_started(
    isolated_home: Path, repeat: bool
) -> None:
    # A plain `switch serve` serves in its own process; one typer had to read (a repeated option) execs the
    # proxy module. Either command line, stopped so that it cannot answer /healthz, is this home's proxy.
    import os
    import signal

    from switch import daemon

    port = free_port()
    args = ("--port", str(port)) if repeat else ()
    with serve_process(port, {}, args) as proxy:
        os.kill(proxy.pid, signal.SIGSTOP)
        try:
            assert daemon.is_our_proxy(proxy.pid, port)
        finally:
            os.kill(proxy.pid, signal.SIGCONT)


def _ended(pid: int) -> bool:
    """Whether `pid` has exited (gone, or a zombie its new parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
