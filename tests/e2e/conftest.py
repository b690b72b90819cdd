"""Real harness CLIs, installed once into `.cache/e2e` (ignored by git), driven through `switch run`."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import versions
from tests.fake_upstream import FakeChatUpstream, Turn
from tests.servers import free_port, serve

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "e2e"
ORCHESTRATOR_MODEL = "kimi-orchestrator"
SUBAGENT_MODEL = "kimi-subagent"
PRESET = f"""
description = "e2e: orchestrator and subagents on two differently named models"
[default]
orchestrator = "baseten/{ORCHESTRATOR_MODEL}"
subagent = "baseten/{SUBAGENT_MODEL}"
background = "baseten/{SUBAGENT_MODEL}"
"""


@contextmanager
def _install_lock(name: str) -> Iterator[None]:
    """One installer at a time per harness, across pytest-xdist workers."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _npm_install(package: str, version: str, binary: str) -> Path:
    with _install_lock(binary):
        return _npm_install_unlocked(package, version, binary)


def _npm_install_unlocked(package: str, version: str, binary: str) -> Path:
    prefix = CACHE / f"{binary}-{version}"
    executable = prefix / "node_modules" / ".bin" / binary
    if not executable.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is needed to install the real harnesses for the end-to-end tests")
        started = time.monotonic()
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), f"{package}@{version}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
        print(f"installed {package}@{version} in {time.monotonic() - started:.1f} s")
    return executable.parent


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """A directory holding the pinned `claude` executable."""
    return _npm_install("@anthropic-ai/claude-code", versions.CLAUDE_CODE, "claude")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """A directory holding the pinned `codex` executable."""
    return _npm_install("@openai/codex", versions.CODEX, "codex")


def _python_312() -> str:
    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    # pyenv shims exist for every installed version but only run the selected one; look behind them.
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += [str(p) for p in sorted(pyenv_root.glob("versions/3.1[2-9]*/bin/python3"), reverse=True)]
    for found in candidates:
        if (
            found
            and subprocess.run(
                [found, "-c", "import sys, venv; assert sys.version_info >= (3, 12)"], capture_output=True
            ).returncode
            == 0
        ):
            return found
    pytest.fail("deepagents-code needs Python >= 3.12 and none was found (python3.12/3.13 on PATH or under pyenv)")


@pytest.fixture(scope="session")
def dcode_bin() -> Path:
    """A directory holding the pinned `dcode` executable, in its own virtual environment."""
    prefix = CACHE / f"dcode-{versions.DEEPAGENTS_CODE}"
    executable = prefix / "bin" / "dcode"
    with _install_lock("dcode"):
        _install_dcode(prefix, executable)
    return executable.parent


def _install_dcode(prefix: Path, executable: Path) -> None:
    if not executable.exists():
        started = time.monotonic()
        subprocess.run([_python_312(), "-m", "venv", str(prefix)], check=True, capture_output=True, timeout=300)
        subprocess.run(
            [str(prefix / "bin" / "pip"), "install", "-q", f"deepagents-code=={versions.DEEPAGENTS_CODE}"],
            check=True,
            capture_output=True,
            timeout=1200,
        )
        print(f"installed deepagents-code {versions.DEEPAGENTS_CODE} in {time.monotonic() - started:.1f} s")


@dataclass
class Harness:
    """Everything one e2e run needs: scratch homes, the fake upstream, and the ledger."""

    root: Path
    switch_home: Path
    work: Path
    upstream: FakeChatUpstream
    env: dict[str, str]

    def run(self, harness: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """`switch run HARNESS -- ARGS` in the work directory."""
        return subprocess.run(
            [sys.executable, "-m", "switch", "run", harness, "--", *args],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def switch(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`switch ARGS` as the user types it, in the work directory."""
        return self.program(sys.executable, "-m", "switch", *args, timeout=timeout)

    def program(self, *argv: str, timeout: float = 180, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Any program (a harness CLI run directly, as the README tells users to) in the work directory."""
        return subprocess.run(
            list(argv),
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )

    @contextmanager
    def proxy_up(self) -> Iterator[None]:
        """`switch up` for the test, and `switch down` after it whatever happens."""
        started = self.switch("up")
        assert started.returncode == 0, started.stdout + started.stderr
        try:
            yield
        finally:
            self.switch("down")

    def ledger(self) -> list[dict[str, Any]]:
        """Every recorded call (waits for the writer to finish)."""
        path = self.switch_home / "ledger.db"
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        connection.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in connection.execute("SELECT * FROM calls ORDER BY id")]
        finally:
            connection.close()


@pytest.fixture
def harness(
    tmp_path: Path, claude_bin: Path
) -> Iterator[Callable[[Callable[[dict[str, Any]], Turn], list[Path]], Harness]]:
    contexts: list[Any] = []

    def make(responder: Callable[[dict[str, Any]], Turn], bins: list[Path]) -> Harness:
        upstream = FakeChatUpstream(responder=responder)
        context = serve(upstream)
        url = context.__enter__()
        contexts.append(context)
        switch_home = tmp_path / "switch-home"
        (switch_home / "presets").mkdir(parents=True)
        (switch_home / "presets" / "e2e.toml").write_text(PRESET)
        (switch_home / "active-preset").write_text("e2e\n")
        (switch_home / "config.toml").write_text(
            f'[server]\nport = {free_port()}\n[providers.baseten]\nbase_url = "{url}/v1"\n'
        )
        home = tmp_path / "home"
        work = tmp_path / "work"
        for directory in (home, work, home / ".codex"):
            directory.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.pathsep.join([*(str(b) for b in bins), os.environ["PATH"]]),
            "HOME": str(home),
            "TMPDIR": str(tmp_path),
            "CODEX_HOME": str(home / ".codex"),
            "SWITCH_HOME": str(switch_home),
            "BASETEN_API_KEY": "sk-fake-e2e-baseten",
            "ANTHROPIC_API_KEY": "sk-ant-fake-e2e-client",
            "OPENAI_API_KEY": "sk-fake-e2e-openai",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "NO_COLOR": "1",
            # A harness's Python process that crashes (dcode's server has, by SIGSEGV) prints where it was.
            "PYTHONFAULTHANDLER": "1",
        }
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return Harness(tmp_path, switch_home, work, upstream, env)

    yield make
    for context in contexts:
        context.__exit__(None, None, None)


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def has_tool_result(request: dict[str, Any]) -> bool:
    return any(message.get("role") == "tool" for message in request.get("messages", []))


def last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool outputs the harness sent back in a chat request."""
    return [str(m.get("content")) for m in request.get("messages", []) if m.get("role") == "tool"]


def check_ledger(harness: Harness, name: str, inbound_api: str | None = None) -> list[dict[str, Any]]:
    """One completed row per upstream call, with the fake upstream's token counts."""
    rows = harness.ledger()
    served = sorted(received.json["model"] for received in harness.upstream.received)
    assert sorted(row["served_model"] for row in rows) == served
    for row in rows:
        assert row["harness"] == name and row["outcome"] == "completed"
        assert inbound_api is None or row["inbound_api"] == inbound_api
        assert row["input_tokens"] + row["cache_read_tokens"] == 120 and row["output_tokens"] == 30
        assert row["cost_micros"] is None or row["cost_micros"] > 0
    return rows
