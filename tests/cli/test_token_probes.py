"""With `[server] access_token` set, every CLI probe of this home's proxy sends the token.

Before, the proxy answered the CLI's own `/healthz` with 401: `status` and `doctor` saw no proxy, `up`
waited for one that was already up, and `switch run` started a second proxy for the same home.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from switch.ui.panes.health import proxy_status

from switch.checks.doctor import probe_proxy
from tests.commands import run_switch, stand_in
from tests.servers import free_port

TOKEN = "probe-token-4d1e2b"


def test_every_cli_probe_sees_a_token_protected_proxy(isolated_home: Path, tmp_path: Path) -> None:
    """`up`, `status`, `doctor`, the dashboard, `run`, `serve` and `down` all find the running proxy."""
    port = free_port()
    (isolated_home / "config.toml").write_text(f'[server]\nport = {port}\naccess_token = "{TOKEN}"\n')
    up = run_switch("up")
    try:
        assert up.returncode == 0, up.stderr
        # The guard still holds for anyone without the token.
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 401
        pid = json.loads((isolated_home / "run" / "proxy.json").read_text())["pid"]

        status = json.loads(run_switch("status", "--json").stdout)
        assert status["running"] and status["pid"] == pid

        doctor = {check["check"]: check for check in json.loads(run_switch("doctor", "--json").stdout)["checks"]}
        assert doctor["proxy"]["ok"], doctor["proxy"]

        assert proxy_status(probe_proxy(port)).startswith("running")

        again = run_switch("up")
        assert again.returncode == 0 and "already running" in again.stdout, again.stdout + again.stderr

        second = run_switch("serve", "--port", str(port))
        assert second.returncode != 0 and "already" in (second.stdout + second.stderr)

        seen = tmp_path / "seen.json"
        path = stand_in(
            tmp_path,
            "claude",
            "import json, sys\n"
            "settings = json.loads(sys.argv[sys.argv.index('--settings') + 1])\n"
            f"open({str(seen)!r}, 'w').write(json.dumps(settings['env']['ANTHROPIC_BASE_URL']))\n",
        )
        run = run_switch("run", "claude", env={"PATH": path})
        assert run.returncode == 0, run.stderr
        assert json.loads(seen.read_text()) == f"http://127.0.0.1:{port}"  # this home's running proxy, not a new one
        assert "starting" not in run.stderr
        assert json.loads((isolated_home / "run" / "proxy.json").read_text())["pid"] == pid
    finally:
        down = run_switch("down")
    assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
