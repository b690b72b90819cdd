"""The real Claude Code, wired with `switch claude on`, against a proxy that fails open and is socket-activated.

A user's config.toml is broken; the service's proxy starts on it anyway and `claude -p` is answered by the
native provider (a loopback stand-in), having sent its call before the proxy process even existed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import Harness
from tests.fake_upstream import FakeAnthropicUpstream, Turn
from tests.servers import free_port, serve, wait_until
from tests.service.test_socket_activation import activated, ready_at


def test_claude_code_wired_by_claude_on_is_answered_natively_through_a_broken_config(
    harness: Callable[..., Harness], claude_bin: Path
) -> None:
    run = harness(lambda request: Turn(text="never asked"), [claude_bin])
    native = FakeAnthropicUpstream()
    with serve(native) as native_url, socket.socket() as listener:
        port = free_port()
        config = f'[server]\nport = {port}\n[providers.anthropic]\nbase_url = "{native_url}"\n'
        (run.switch_home / "config.toml").write_text(config)
        wired = subprocess.run(
            [sys.executable, "-m", "switch", "claude", "on"], env=run.env, capture_output=True, text=True, timeout=60
        )
        assert wired.returncode == 0, wired.stderr
        # Later the file breaks (a typo in an edit), and the proxy is restarted on it: at the next login, say.
        (run.switch_home / "config.toml").write_text(config + '[routing]\nttft_timeout = "soon"\n')
        # The socket unit holds the port from login on (systemd would bind it; here the test does).
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        began = time.monotonic()
        claude = subprocess.Popen(
            ["claude", "-p", "say hi", "--output-format", "text"],
            cwd=run.work,
            env=run.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            # Claude Code's first call is queued on the socket before the proxy exists.
            wait_until(lambda: _queued(listener), timeout=60, what="Claude Code's call to reach the socket")
            queued = time.monotonic()
            with activated(listener, run.switch_home, "--fail-open") as proxy:
                ready = ready_at(proxy)
                out, err = claude.communicate(timeout=180)
                answered = time.monotonic()
        finally:
            if claude.poll() is None:
                claude.kill()
                claude.communicate()
        print(
            f"\ntimeline (s after claude started): call queued {queued - began:.2f}, proxy ready "
            f"{ready - began:.2f}, claude answered {answered - began:.2f}"
        )
        assert claude.returncode == 0, err
        assert "Native hello" in out
        assert native.received and native.received[0].headers["x-api-key"] == run.env["ANTHROPIC_API_KEY"]
        assert run.upstream.received == []  # the preset's Kimi route was never used
        rows = run.ledger()
        assert rows and {row["preset"] for row in rows} == {"fail-open"}


def _queued(listener: socket.socket) -> bool:
    """Whether a connection waits in the listener's backlog (peeked with a zero-timeout accept on a dup)."""
    import select

    readable, _, _ = select.select([listener], [], [], 0)
    return bool(readable)
