"""Everything switch writes under SWITCH_HOME is private: directories 0700, files 0600, even under a
permissive umask, across every command that creates state (preset switch, key file, wiring backups,
a running proxy's pid file and log, the ledger and its WAL, the spill file)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import anthropic

from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream
from tests.ledger.test_ledger_proxy import hold_lock
from tests.servers import free_port, serve, wait_until


def test_every_state_file_is_private_under_a_permissive_umask(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "switch-home"  # does not exist yet: switch creates it
    claude_dir = tmp_path / "claude"
    claude_dir.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "SWITCH_HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(claude_dir),
        "BASETEN_API_KEY": FAKE_BASETEN_KEY,
    }

    def switch(*args: str, stdin: str | None = None) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "switch", *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: os.umask(0o022),  # what most shells give; files must not inherit it
        )
        assert result.returncode == 0, (args, result.stdout, result.stderr)

    fake = FakeChatUpstream()
    with serve(fake) as url:
        switch("use", "kimi-k3")
        (home / "config.toml").write_text(
            f'[server]\nport = {port}\n[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8"
        )
        switch("keys", "set", "openrouter", stdin="sk-fake-openrouter-key\n")
        switch("claude", "on")
        switch("up")
        try:
            client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="k", max_retries=0)
            client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "first"}])
            # SQLite creates the WAL and shared-memory files one after the other: wait for both.
            wait_until(lambda: all((home / name).exists() for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm")))
            # SQLite removes its WAL and shared-memory files on close: look at them while they exist.
            live_modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.glob("ledger.db-*")}
            locker = hold_lock(home / "ledger.db", 3)  # the next record cannot be written: it is spilled
            try:
                client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "second"}])
                spill = home / "ledger.spill.jsonl"
                wait_until(spill.exists)
                # Replayed (and removed) once the lock is gone: look at it while it exists.
                spill_mode = stat.S_IMODE(spill.stat().st_mode)
            finally:
                locker.kill()
                locker.wait()
        finally:
            switch("down")

    created = sorted(path.relative_to(home).as_posix() for path in home.rglob("*"))
    assert live_modes == {"ledger.db-wal": 0o600, "ledger.db-shm": 0o600}, live_modes
    assert spill_mode == 0o600, oct(spill_mode)
    for expected in ("active-preset", "keys.json", "wiring", "run", "logs", "ledger.db"):
        assert any(name.startswith(expected) for name in created), (expected, created)
    modes = {
        path.relative_to(tmp_path).as_posix(): oct(stat.S_IMODE(path.stat().st_mode))
        for path in [home, *home.rglob("*")]
        if path.name != "config.toml"  # the user's own file, written by this test
    }
    wrong = {name: mode for name, mode in modes.items() if mode != ("0o700" if (tmp_path / name).is_dir() else "0o600")}
    assert not wrong, wrong
