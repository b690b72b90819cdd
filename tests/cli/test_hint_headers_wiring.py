"""`claude on` and `run claude` ask Claude Code for its hint headers; `claude off` takes the setting back out."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_wiring import homes, invoke  # noqa: F401  (the fixture and helper of the wiring tests)
from tests.commands import run_switch, stand_in
from tests.servers import free_port

HINTS = "CLAUDE_CODE_GATEWAY_HINT_HEADERS"


def test_claude_on_asks_for_hint_headers_and_off_restores_the_file(homes: dict[str, Path]) -> None:  # noqa: F811
    original = homes["claude"].read_bytes()
    invoke("claude", "on")
    assert json.loads(homes["claude"].read_text())["env"][HINTS] == "1"
    invoke("claude", "off")
    assert homes["claude"].read_bytes() == original


def test_run_claude_asks_for_hint_headers(isolated_home: Path, tmp_path: Path) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    record = tmp_path / "argv.json"
    path = stand_in(
        tmp_path, "claude", f"import json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    result = run_switch("run", "claude", "--", "-p", "hello", env={"PATH": path})
    assert result.returncode == 0, result.stderr
    argv = json.loads(record.read_text())
    assert json.loads(argv[argv.index("--settings") + 1])["env"][HINTS] == "1"
