"""A `switch.py` or `switch/` in the directory the user stands in is never run by switch's own child processes.

Each test runs switch the way the installed `switch` script does (the working directory is not on the
parent's path: `-P`) from a directory holding hostile code that leaves a marker file when imported, and
checks that the proxy, the demo, `switch run` and both harness hooks work and the marker never appears.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from switch import wiring
from switch.cli import app
from tests.commands import stand_in
from tests.servers import free_port, serve_command

FORMS = ("module", "package", "clone")


def planted(tmp_path: Path, files: list[str]) -> tuple[Path, Path]:
    """A working directory holding `files` (paths in it), each code that leaves a marker if it is ever run:
    (the directory, the marker)."""
    where = tmp_path / "project"
    where.mkdir()
    marker = tmp_path / "hostile-code-ran"
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nraise SystemExit(3)\n"
    for name in files:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(code)
    return where, marker


def hostile_directory(tmp_path: Path, form: str) -> tuple[Path, Path]:
    """A working directory whose `switch` is not switch: (the directory, the marker its code would write)."""
    if form == "module":
        # A project file that shadows the standard library reaches every Python started with the directory on
        # its path, even one that puts switch's own folder first.
        return planted(tmp_path, ["switch.py", "json.py"])
    if form == "package":
        return planted(tmp_path, ["switch/__init__.py", "switch/__main__.py"])
    # A clone of switch's own repository, entered from its parent: a `switch/` folder with no __init__.py,
    # which the working directory turns into a namespace package that shadows the installed one.
    where, marker = planted(tmp_path, [])
    (where / "switch" / "docs").mkdir(parents=True)
    return where, marker


def switch_in(where: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`switch ARGS` run from `where` as the installed console script runs it (its cwd not on the path)."""
    return subprocess.run(
        [sys.executable, "-P", "-m", "switch", *args],
        cwd=where,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("form", FORMS)
def test_up_starts_switchs_own_proxy_from_a_directory_with_its_own_switch(
    isolated_home: Path, tmp_path: Path, form: str
) -> None:
    where, marker = hostile_directory(tmp_path, form)
    port = free_port()
    try:
        started = switch_in(where, "up", "--port", str(port))
        assert started.returncode == 0, started.stderr + started.stdout
        assert f"started on 127.0.0.1:{port}" in started.stdout
    finally:
        switch_in(where, "down")
    assert not marker.exists()


@pytest.mark.parametrize("form", FORMS[:2])
def test_demo_runs_switchs_own_proxy_from_a_directory_with_its_own_switch(tmp_path: Path, form: str) -> None:
    where, marker = hostile_directory(tmp_path, form)
    (tmp_path / "user").mkdir()
    env = {key: value for key, value in os.environ.items() if key != "SWITCH_HOME"}
    env["HOME"] = str(tmp_path / "user")
    result = subprocess.run(
        [sys.executable, "-P", "-m", "switch", "demo"],
        cwd=where,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "SIMULATED" in result.stdout
    assert not marker.exists()


@pytest.mark.parametrize("form", FORMS[:2])
def test_run_starts_switchs_own_proxy_from_a_directory_with_its_own_switch(
    isolated_home: Path, tmp_path: Path, form: str
) -> None:
    where, marker = hostile_directory(tmp_path, form)
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    path = stand_in(
        tmp_path,
        "claude",
        "import json, sys, urllib.request\n"
        "settings = json.loads(sys.argv[sys.argv.index('--settings') + 1])\n"
        "urllib.request.urlopen(settings['env']['ANTHROPIC_BASE_URL'] + '/healthz').read()\n"
        "sys.exit(7)\n",
    )
    result = switch_in(where, "run", "claude", "--", "-p", "hi", env={"PATH": path})
    assert result.returncode == 7, result.stderr
    assert not marker.exists()


@pytest.mark.parametrize("form", FORMS[:2])
def test_the_installed_status_line_runs_switch_from_a_directory_with_its_own_switch(
    user_home: Path, tmp_path: Path, form: str
) -> None:
    where, marker = hostile_directory(tmp_path, form)
    assert CliRunner().invoke(app, ["claude", "on"]).exit_code == 0
    command = json.loads((user_home / ".claude" / "settings.json").read_text())["statusLine"]["command"]
    # As Claude Code runs it: through the shell, in the project the user works in.
    result = subprocess.run(
        command, shell=True, input='{"session_id": "s-1"}', capture_output=True, text=True, timeout=60, cwd=where
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "switch · no calls recorded yet\n", "")
    assert not marker.exists()


@pytest.mark.parametrize("form", FORMS[:2])
def test_the_installed_codex_notify_runs_switch_from_a_directory_with_its_own_switch(
    user_home: Path, isolated_home: Path, tmp_path: Path, form: str
) -> None:
    where, marker = hostile_directory(tmp_path, form)
    assert CliRunner().invoke(app, ["codex", "on"]).exit_code == 0
    import tomlkit

    # The per-turn summary is the `switch` profile's own (Codex 0.171 reads it from switch.config.toml).
    notify = list(tomlkit.parse((user_home / ".codex" / "switch.config.toml").read_text())["notify"])
    assert notify == wiring.codex_notify_argv()
    payload = json.dumps({"type": "agent-turn-complete", "thread-id": "t-1", "turn-id": "1"})
    # As Codex runs it: the argv with the turn's JSON last, in the project the user works in.
    result = subprocess.run(
        [*notify, payload],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=where,
        env={**os.environ, "SWITCH_NO_DESKTOP_NOTIFY": "1"},
    )
    assert (result.returncode, result.stderr) == (0, ""), shlex.join(notify)
    assert (isolated_home / "logs" / "turns.log").exists()
    assert not marker.exists()


def test_python_m_switch_serve_serves_without_the_working_directorys_modules(tmp_path: Path) -> None:
    # `python -m switch serve` (no -P, as a user may type it) puts the working directory first on the path.
    # A plain serve serves from that very process, so it must take the directory off before the proxy's own
    # modules load: a project's json.py, orjson.py or uvloop.py would otherwise run with the user's keys in reach.
    where, marker = planted(tmp_path, [f"{name}.py" for name in ("__future__", "json", "orjson", "uvloop", "sqlite3")])
    command = [sys.executable, "-m", "switch", "serve", "--port", "0"]
    with serve_command(command, tmp_path / "stderr", cwd=where) as (_process, port, _pid):
        import httpx

        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    assert not marker.exists()


# What `python -m switch` runs before `switch.cli.main` takes the working directory off the import path, and
# the only modules those may import: ones Python itself has loaded by then (`importlib.machinery` is frozen),
# or each other. A `from __future__ import annotations` here would import a project's `__future__.py`.
BEFORE_THE_PATH_IS_SAFE = ("switch/__init__.py", "switch/__main__.py", "switch/cli/__init__.py", "switch/child.py")
LOADED_BY_THEN = {"os", "sys", "importlib.machinery", "switch.cli", "switch.child"}


@pytest.mark.parametrize("module", BEFORE_THE_PATH_IS_SAFE)
def test_what_runs_before_the_working_directory_leaves_the_path_imports_nothing_it_could_shadow(module: str) -> None:
    import ast

    import switch

    tree = ast.parse((Path(switch.__file__).parent.parent / module).read_text())
    imported = set()
    for statement in tree.body:  # module level: what runs on import (an `if TYPE_CHECKING:` block does not)
        if isinstance(statement, ast.Import):
            imported |= {alias.name for alias in statement.names}
        elif isinstance(statement, ast.ImportFrom):
            imported.add(statement.module or "")
    assert imported <= LOADED_BY_THEN, imported - LOADED_BY_THEN


@pytest.mark.parametrize("args", [("--version",), ("serve", "--port", "0")], ids=["a typer command", "serve"])
def test_python_m_switch_runs_none_of_the_working_directorys_modules_even_those_python_loads_late(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # Without `site` (-S), Python has loaded almost nothing when switch starts: `__future__`, `typing`, `re` and
    # `enum` all come from the path, so a project's copies would run if switch imported them too early.
    import sysconfig

    import switch

    shadows = ("__future__", "typing", "re", "enum", "json", "orjson", "uvloop")
    where, marker = planted(tmp_path, [f"{name}.py" for name in shadows])
    paths = sysconfig.get_paths()
    env = dict(os.environ)
    # switch and its dependencies from where this test's Python has them, but not through `site`.
    env["PYTHONPATH"] = os.pathsep.join([str(Path(switch.__file__).parent.parent), paths["purelib"], paths["platlib"]])
    command = [sys.executable, "-S", "-m", "switch", *args]
    if args[0] == "serve":
        with serve_command(command, tmp_path / "stderr", env=env, cwd=where) as (_process, port, _pid):
            import httpx

            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    else:
        result = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and switch.__version__ in result.stdout, result.stderr
    assert not marker.exists()
