"""Running the proxy in the background: one JSON record in `$SWITCH_HOME/run/proxy.json`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from switch import locations
from switch.child import PROXY_MODULE, serve_argv
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


HEALTH_ANSWER_LIMIT = 1024 * 1024
"""The most of a /healthz answer read (a stranger on the port may send anything)."""


def healthy(port: int, timeout: float = 0.5) -> dict[str, Any] | None:
    """The proxy's /healthz answer on `port` (a JSON object), or None: nothing there, not 200, not JSON.

    One HTTP/1.0 request on a plain socket, all of it within twice `timeout` (a stranger on the port may
    trickle bytes or never close). The proxy probes its own port at start with this; urllib.request would
    bring http.client, email and tempfile into it for good (1.3 MB).
    """
    request = f"GET /healthz HTTP/1.0\r\nhost: 127.0.0.1:{port}\r\n".encode()
    token = local_access_token()
    if token is not None:
        # A proxy with [server] access_token answers nobody without it, not even its own CLI.
        request += b"x-switch-token: " + token.encode() + b"\r\n"
    deadline = time.monotonic() + 2 * timeout
    answer = bytearray()
    head_end = -1  # where the head's blank line starts, once it is in
    length: int | None = None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(request + b"\r\n")
            while len(answer) <= HEALTH_ANSWER_LIMIT:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                piece = sock.recv(65536)
                if not piece:
                    break
                answer += piece
                if head_end < 0:
                    # Only the new bytes (and the three before them) can complete the blank line.
                    head_end = answer.find(b"\r\n\r\n", max(0, len(answer) - len(piece) - 3))
                    if head_end < 0:
                        continue
                    if not answer.startswith((b"HTTP/1.0 200 ", b"HTTP/1.1 200 ")):
                        return None
                    length = _content_length(bytes(answer[:head_end]))
                if length is not None and len(answer) - head_end - 4 >= length:
                    break
    except OSError:
        return None
    if head_end < 0:
        return None
    body = answer[head_end + 4 :] if length is None else answer[head_end + 4 : head_end + 4 + length]
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _content_length(head: bytes) -> int | None:
    """The `content-length` of an answer's head, or None (none, or not a number)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            return int(value) if value.isdigit() else None
    return None


def local_access_token() -> str | None:
    """`[server] access_token` of this home's config.toml, read on its own so probes work even when the rest of
    the file does not load (the proxy may be running on an earlier, good version of it)."""
    import tomllib

    try:
        raw = tomllib.loads(locations.config_file().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    server = raw.get("server")
    token = server.get("access_token") if isinstance(server, dict) else None
    return token if isinstance(token, str) and token else None


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


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_record() -> dict[str, Any] | None:
    """The running proxy's record, or None."""
    path = record_path()
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return None
    # A damaged record (hand-edited, half-written by an older switch) describes no proxy: as if absent.
    if not isinstance(record, dict) or not _whole(record.get("pid"), 1) or not _whole(record.get("port"), 1, 65535):
        return None
    return record


def _whole(value: Any, lowest: int, highest: int | None = None) -> bool:
    return type(value) is int and value >= lowest and (highest is None or value <= highest)


def this_home() -> str:
    """This home's absolute path, as a proxy started from it reports it in /healthz."""
    return str(locations.home().resolve())


def is_ours(health: dict[str, Any]) -> bool:
    """Whether a /healthz answer comes from a proxy serving this SWITCH_HOME."""
    return health.get("home") == this_home()


def describe_other(health: dict[str, Any]) -> str:
    """Who a proxy of another home is, in words (its home and pid)."""
    home = health.get("home") or "not reported: an older switch"
    return f"another switch proxy (home {home}, pid {health.get('pid', 'not reported')})"


def proxy_port(configured: int) -> int:
    """The port of this home's background proxy when its record is live, else `configured`."""
    record = read_record()
    if record is not None and pid_alive(int(record["pid"])):
        return int(record["port"])
    return configured


def fallback_port() -> int:
    """The port a proxy of this home most likely uses when config.toml cannot be loaded as settings."""
    import tomllib

    from switch.config import Server

    try:
        port = tomllib.loads(locations.config_file().read_text(encoding="utf-8")).get("server", {}).get("port")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        port = None  # missing or broken: the config check speaks for the file
    return proxy_port(port if isinstance(port, int) and not isinstance(port, bool) else Server().port)


def _home_of_environment(environ: dict[str, str]) -> str | None:
    configured = environ.get("SWITCH_HOME")
    if configured:
        return str(Path(configured).expanduser().resolve())
    user_home = environ.get("HOME")
    return str((Path(user_home) / ".switch").resolve()) if user_home else None


def _runs_our_serve(pid: int) -> bool:
    """Whether process `pid` is `switch serve` started from this home, judged from /proc (Linux).

    The fallback for a proxy that does not answer /healthz (busy or hung) but must still be stoppable. Its
    command line is `switch serve`'s own (a plain one serves in its own process), or the proxy module's
    (`python -P -m switch.proxy.server_main`, which `switch serve` execs after typer read its options).
    """
    proc = Path("/proc") / str(pid)
    try:
        argv = proc.joinpath("cmdline").read_bytes().split(b"\0")
        raw_environ = proc.joinpath("environ").read_bytes()
    except OSError:
        return False
    proxy_module = PROXY_MODULE.encode() in argv
    if not proxy_module and (b"serve" not in argv or not any(part.endswith(b"switch") for part in argv)):
        return False
    environ = dict(
        entry.decode("utf-8", "replace").split("=", 1) for entry in raw_environ.split(b"\0") if b"=" in entry
    )
    return _home_of_environment(environ) == this_home()


def is_our_proxy(pid: int, port: int) -> bool:
    """Whether `pid` is this home's proxy: it answers /healthz on `port` with this home and pid, or (Linux)
    its command line and environment say so."""
    health = healthy(port)
    if health is not None and is_ours(health) and health.get("pid") == pid:
        return True
    return _runs_our_serve(pid)


def status(port: int | None = None) -> dict[str, Any]:
    """Whether this home's proxy runs, where, since when; explains stale records and a port held by another.

    `port` (the configured one) is also checked when there is no live record: a foreground `switch serve`
    of this home counts as running, another home's proxy there is reported as `other`.
    """
    record = read_record()
    if record is not None:
        pid = int(record["pid"])
        if not pid_alive(pid):
            return {"running": False, "stale": True, "reason": f"pid {pid} is gone", **record}
        health = healthy(int(record["port"]))
        if health is not None and is_ours(health) and health.get("pid") == pid:
            return {"running": True, **record, "health": health}
        if not _runs_our_serve(pid):
            return {"running": False, "stale": True, "reason": f"pid {pid} is now another program", **record}
        return {"running": False, "unresponsive": True, **record}
    if port is None:
        return {"running": False}
    health = healthy(port)
    if health is None:
        return {"running": False}
    if is_ours(health):
        return {"running": True, "foreground": True, "pid": health.get("pid"), "port": port, "health": health}
    return {"running": False, "port": port, "other": {"home": health.get("home"), "pid": health.get("pid")}}


def start(port: int, wait: float = 15.0) -> dict[str, Any]:
    """Start `switch serve` in the background, or report this home's instance already running."""
    current = status(port)
    if current.get("running"):
        return {**current, "already": True}
    if current.get("stale"):
        record_path().unlink(missing_ok=True)
    if not port_free(port):
        health = healthy(port)
        if health is not None and not is_ours(health):
            raise DaemonError(
                f"port {port} on 127.0.0.1 is held by {describe_other(health)}, not by this home's "
                f"({this_home()}); pick another port with `switch up --port N` or set [server] port in config.toml"
            )
        raise DaemonError(
            f"port {port} on 127.0.0.1 is already in use by another program; "
            "pick another with `switch up --port N` or set [server] port in config.toml"
        )
    locations.ensure_private_dir(locations.run_dir())
    locations.ensure_private_dir(locations.logs_dir())
    with open(log_path(), "ab") as log:
        os.chmod(log_path(), 0o600)
        process = subprocess.Popen(
            serve_argv(port, "--log-level", "info"),
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


def stop(timeout: float | None = None, port: int | None = None) -> dict[str, Any]:
    """Stop this home's background proxy cleanly (SIGTERM, then SIGKILL after `timeout`).

    Only a pid proven to be this home's proxy is signalled. Without a record, `port` (the configured one)
    is checked so the answer can say who holds it. By default the proxy gets its `[server] shutdown_grace`
    for live calls plus time to end and record them, so no call loses its row to the SIGKILL.
    """
    if timeout is None:
        timeout = _shutdown_grace() + 10.0
    record = read_record()
    if record is None:
        health = healthy(port) if port is not None else None
        if health is not None and not is_ours(health):
            return {
                "stopped": False,
                "reason": f"not running for this home; port {port} is held by {describe_other(health)}, left alone",
            }
        if health is not None:
            return {
                "stopped": False,
                "reason": f"this home's proxy on port {port} (pid {health.get('pid')}) runs in the foreground "
                "(`switch serve`); stop it there",
            }
        return {"stopped": False, "reason": "not running"}
    pid = int(record["pid"])
    if not pid_alive(pid):
        record_path().unlink(missing_ok=True)
        return {"stopped": False, "reason": f"was not running (pid {pid} had exited); removed its stale record"}
    if not is_our_proxy(pid, int(record["port"])):
        # The pid was reused by another program after the proxy died: signalling it would kill a stranger.
        record_path().unlink(missing_ok=True)
        return {
            "stopped": False,
            "reason": f"was not running (pid {pid} is now another program, not this home's proxy); "
            "removed its stale record without signalling it",
        }
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
