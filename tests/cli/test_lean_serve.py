"""`switch serve` serves from a lean process: the same PID as the command, without typer or the other commands.

A plain `switch serve` reads its options without typer and serves from the command's own process, with the
import path `-P` gives (no working directory on it); anything typer must read is answered by typer's command,
which then execs `python -P -m switch.proxy.server_main`. Either way what systemd, launchd, `switch up` and a
shell's `$!` know as the proxy's PID is the serving process, and the memory typer and every command module
hold is not kept for the proxy's whole life (tests/cli/test_serve_fast_path.py checks the two ways agree).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import switch
from switch.proxy import server_main
from tests.servers import end_process, serve_command

IMPORT_HEADER = "import time: self [us] | cumulative | imported package"
COMMAND_MODULES = ("typer", "switch.cli")


def console_script() -> str:
    """The `switch` script installed beside this Python, as users start it."""
    script = Path(sys.executable).with_name("switch")
    if not script.exists():
        pytest.skip("no `switch` console script beside this Python")
    return str(script)


@pytest.mark.parametrize("how", ["console script", "python -P -m switch"])
def test_a_plain_serve_serves_from_the_process_it_was_started_as(tmp_path: Path, how: str) -> None:
    command = [console_script()] if how == "console script" else [sys.executable, "-P", "-m", "switch"]
    with serve_command([*command, "serve", "--port", "0"], tmp_path / "stderr") as (process, port, pid):
        # The PID a supervisor or `switch up` holds is the one serving: it says so, and /healthz agrees.
        assert pid == process.pid
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()
        assert health["pid"] == process.pid
        if sys.platform.startswith("linux"):
            # What `ps` shows for the proxy: the command the user typed (no second interpreter was started).
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert b"serve" in cmdline and b"switch.proxy.server_main" not in cmdline


def test_a_serve_that_typer_read_execs_the_lean_module(tmp_path: Path) -> None:
    # A repeated option is typer's to read (it takes the last): typer's memory is then left behind by the exec.
    command = [sys.executable, "-P", "-m", "switch", "serve", "--port", "1", "--port", "0"]
    with serve_command(command, tmp_path / "stderr") as (process, port, pid):
        assert pid == process.pid
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["pid"] == process.pid
        if sys.platform.startswith("linux"):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert b"switch.proxy.server_main" in cmdline and b"serve" not in cmdline


def _imports_while_serving(tmp_path: Path, keyring: bool = True) -> tuple[set[str], str]:
    """(the modules the serving process imported up to and through served probes and a model call, its import
    log)."""
    env = {"PYTHONPROFILEIMPORTTIME": "1"}
    if not keyring:
        # As where no keyring can answer (no D-Bus session, no backend chosen, as in the peer bench).
        env |= {"PYTHON_KEYRING_BACKEND": "", "DBUS_SESSION_BUS_ADDRESS": "", "XDG_CONFIG_HOME": str(tmp_path)}
    stderr = tmp_path / "stderr"
    command = [sys.executable, "-P", "-m", "switch", "serve", "--port", "0"]
    with serve_command(command, stderr, env) as (process, port, _):
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(url + "/healthz", timeout=10).status_code == 200
        assert httpx.get(url + "/v1/models", timeout=10).status_code == 200
        # A model call (refused for want of a body): the whole request path is imported by then.
        assert httpx.post(url + "/v1/messages", content=b"", timeout=10).status_code == 400
        end_process(process)
    log = stderr.read_text()
    # One process: a plain `switch serve` serves from the interpreter it started in.
    assert log.count(IMPORT_HEADER) == 1, log
    return {line.rsplit("|", 1)[-1].strip() for line in log.splitlines() if "|" in line}, log


def _imported_by_switch(import_log: str, names: set[str]) -> set[str]:
    """Those of `names` that a switch module imported (directly or through others), from `-X importtime` lines.

    The log lists a module after everything it imported, indented one step deeper than its importer, so
    a module's importers are the next lines less indented than it. (What `site` imports for an environment's
    own `.pth` files, certifi in some, is not switch's doing.)
    """
    entries = []
    for line in import_log.splitlines():
        if "|" not in line:
            continue
        name = line.rsplit("|", 1)[-1]
        entries.append((len(name) - len(name.lstrip()), name.strip()))
    found = set()
    for index, (depth, name) in enumerate(entries):
        if name not in names:
            continue
        for later_depth, later in entries[index + 1 :]:
            if later_depth < depth:
                depth = later_depth
                if later.split(".")[0] == "switch":
                    found.add(name)
                    break
    return found


def test_the_serving_process_imports_neither_typer_nor_the_commands(tmp_path: Path) -> None:
    modules, _log = _imports_while_serving(tmp_path)
    assert {"switch.proxy.serving", "switch.proxy.app", "switch.service.activation"} <= modules
    # Whoever starts the proxy waits for what it imports: of the command line, only the option reader.
    command_line = {name for name in modules if name.split(".")[0] == "typer" or name.startswith("switch.cli")}
    assert command_line == {"switch.cli", "switch.cli.proxy_process"}, command_line


def test_the_serving_process_loads_no_web_framework_no_uvicorn_and_no_websocket_library_until_an_upgrade(
    tmp_path: Path,
) -> None:
    # Memory a proxy keeps for its whole life: the router and the server are switch's own, and uvicorn (3.1 MB
    # with click and multiprocessing), its WebSocket protocol and the library (1.6 MB) are imported by the first
    # upgrade (tests/proxy/test_responses_websocket.py has those).
    modules, proxy = _imports_while_serving(tmp_path, keyring=False)
    assert "switch.proxy.relay" in modules
    if not os.path.exists(f"/run/user/{os.getuid()}/bus"):  # a desktop's session bus cannot be hidden from it
        assert "keyring" not in modules
    roots = {name.split(".")[0] for name in modules}
    unwanted = {"starlette", "anyio", "websockets", "wsproto", "uvicorn", "click", "multiprocessing"}
    assert not roots & unwanted, roots & unwanted
    # Finding the shipped presets' folder, probing the port at start and writing files atomically need
    # none of these (with shutil, zipfile, bz2, email and http.client behind them, about 2 MB).
    heavy = {"tempfile", "importlib.resources", "urllib.request", "http.client", "email"}
    assert not _imported_by_switch(proxy, heavy), _imported_by_switch(proxy, heavy)


def test_the_proxy_module_imports_nothing_of_the_command_line() -> None:
    code = (
        "import sys\n"
        "import switch.proxy.server_main, switch.proxy.app, switch.proxy.serving, switch.service.activation\n"
        f"loaded = [name for name in sys.modules if name.startswith({COMMAND_MODULES!r})]\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_in_process_serving_ends_a_broken_config_in_one_line_with_exit_code_2(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A plain `switch serve` (and Windows, always) serves in the command's own process: the exec'd one's line and code.
    (isolated_home / "config.toml").write_text("[server]\nport = 'high'\n")
    assert server_main.main(["--log-level", "warning", "--port", "0"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("switch: ") and "server.port" in lines[0], lines


def test_python_m_switch_serve_in_a_checkout_serves_that_checkouts_switch(tmp_path: Path) -> None:
    # `python -m switch serve` from a source checkout imports switch from the working directory; `-P` keeps
    # that off the proxy process's path, which must still run this checkout's switch, not an installed one.
    checkout = tmp_path / "checkout"
    shutil.copytree(Path(switch.__file__).parent, checkout / "switch", ignore=shutil.ignore_patterns("__pycache__"))
    init = checkout / "switch" / "__init__.py"
    init.write_text(init.read_text().replace(f'__version__ = "{switch.__version__}"', '__version__ = "0.0.0+checkout"'))
    command = [sys.executable, "-m", "switch", "serve", "--port", "0"]
    with serve_command(command, tmp_path / "stderr", cwd=checkout) as (_, port, _):
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["version"] == "0.0.0+checkout"
