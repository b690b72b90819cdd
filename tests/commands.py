"""Commands run as their own processes: switch's CLI, and stand-in harness executables for `switch run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_switch(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`switch ARGS` in a process of its own (extra `env` on top of ours), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "switch", *args],
        env={**os.environ, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def stand_in(tmp_path: Path, name: str, code: str) -> str:
    """Install an executable `name` running the Python `code` in `tmp_path/bin`; return PATH with it first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!{sys.executable}\n{code}")
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
