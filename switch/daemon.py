"""Running the proxy in the background: one JSON record in `$SWITCH_HOME/run/proxy.json`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from switch import locations
from switch.errors import SwitchError
from switch.files import atomic_write


class DaemonError(SwitchError):
    """The background proxy cannot be started or stopped as asked."""


def record_path() -> Path:
    """Where the running proxy is described."""
    return locations.run_dir() / "proxy.json"


def log_path() -> Path:
    """The background proxy's log."""
    return locations.logs_dir() / "proxy.log"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def healthy(port: int, timeout: float = 0.5) -> dict[str, Any] | None:
    """The proxy's /healthz answer on `port`, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as response:  # noqa: S310
            return dict(json.loads(response.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def port_free(port: int) -> bool:
    """Whether 127.0.0.1:`port` can be bound."""
    with socket.socket() as sock:
        # Like the server itself: connections lingering in TIME_WAIT do not make the port busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def read_record() -> dict[str, Any] | None:
    """The running proxy's record, or None."""
    path = record_path()
    if not path.exists():
        return None
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, OSError):
        return None


def status() -> dict[str, Any]:
    """Whether the background proxy runs, where, since when; explains stale records."""
    record = read_record()
    if record is None:
        return {"running": False}
    if not pid_alive(int(record["pid"])):
        return {"running": False, "stale": True, **record}
    health = healthy(int(record["port"]))
    return {"running": health is not None, **record, "health": health}


def start(port: int, wait: float = 15.0) -> dict[str, Any]:
    """Start `switch serve` in the background, or report the instance already running."""
    current = status()
    if current.get("running"):
        return {**current, "already": True}
    if current.get("stale"):
        record_path().unlink(missing_ok=True)
    if not port_free(port):
        raise DaemonError(
            f"port {port} on 127.0.0.1 is already in use by another program; "
            "pick another with `switch up --port N` or set [server] port in config.toml"
        )
    locations.ensure_private_dir(locations.run_dir())
    locations.ensure_private_dir(locations.logs_dir())
    with open(log_path(), "ab") as log:
        os.chmod(log_path(), 0o600)
        process = subprocess.Popen(
            [sys.executable, "-m", "switch", "serve", "--port", str(port), "--log-level", "info"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path().read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
            raise DaemonError("the proxy exited at start-up:\n  " + "\n  ".join(tail))
        if healthy(port):
            record = {"pid": process.pid, "port": port, "started_at": time.time(), "log": str(log_path())}
            atomic_write(record_path(), json.dumps(record).encode())
            return {"running": True, **record}
        time.sleep(0.1)
    process.terminate()
    raise DaemonError(f"the proxy did not answer on port {port} within {wait:.0f} s; see {log_path()}")


def stop(timeout: float | None = None) -> dict[str, Any]:
    """Stop the background proxy cleanly (SIGTERM, then SIGKILL after `timeout`).

    By default the proxy gets its `[server] shutdown_grace` for live calls plus time to end and
    record them, so no call loses its row to the SIGKILL.
    """
    if timeout is None:
        timeout = _shutdown_grace() + 10.0
    record = read_record()
    if record is None:
        return {"stopped": False, "reason": "not running"}
    pid = int(record["pid"])
    if not pid_alive(pid):
        record_path().unlink(missing_ok=True)
        return {"stopped": False, "reason": f"stale record (pid {pid} was not running); cleaned up"}
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    record_path().unlink(missing_ok=True)
    return {"stopped": True, "pid": pid}


def _shutdown_grace() -> float:
    from switch.config import Server, load_settings

    try:
        return load_settings().server.shutdown_grace
    except SwitchError:
        return Server().shutdown_grace
