"""Socket activation for real: `switch serve` handed a listening socket the way systemd hands it over.

systemd binds the port, forks, puts the socket on fd 3, sets LISTEN_FDS=1 and LISTEN_PID to the child's own
pid, and execs the service. The launcher below does exactly that. A call connected and sent before the proxy
process even exists waits in the socket's backlog and is answered once the proxy is up.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.fake_upstream import FakeAnthropicUpstream
from tests.servers import end_process, serve

# fork+exec as systemd does: the socket on fd 3, the variables naming this very process, then exec.
LAUNCHER = (
    "import os, sys\n"
    "os.dup2(int(sys.argv[1]), 3)\n"
    "os.environ['LISTEN_FDS'] = '1'\n"
    "os.environ['LISTEN_PID'] = str(os.getpid())\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'switch', 'serve', *sys.argv[2:]])\n"
)


def raw_call(port: int) -> socket.socket:
    """Connect to `port` and send a whole Messages call (Connection: close); the answer is read later."""
    body = orjson.dumps({"model": "claude-opus-5-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"x-api-key: sk-ant-test\r\nanthropic-version: 2023-06-01\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    client = socket.create_connection(("127.0.0.1", port), timeout=60)
    client.sendall(head.encode() + body)
    return client


def read_all(client: socket.socket) -> bytes:
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    client.close()
    return b"".join(chunks)


@contextmanager
def activated(listener: socket.socket, home: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`switch serve` started on `listener` as systemd starts a socket-activated service."""
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(listener.fileno()), *args],
        pass_fds=(listener.fileno(),),
        env={**os.environ, "SWITCH_HOME": str(home), "SWITCH_SERVICE": "systemd"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process
    finally:
        end_process(process)
        if process.stdout is not None:
            process.stdout.close()


def ready_at(process: subprocess.Popen[str]) -> float:
    """When `switch serve` said it listens (its first line), as time.monotonic()."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("switch proxy listening on "), line
    return time.monotonic()


def test_a_call_sent_before_the_proxy_starts_waits_and_is_answered(isolated_home: Path) -> None:
    fake = FakeAnthropicUpstream()
    with serve(fake) as url, socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        (isolated_home / "config.toml").write_text(
            f'[server]\nport = {port}\n[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n'
        )
        began = time.monotonic()
        client = raw_call(port)
        sent = time.monotonic()
        with activated(listener, isolated_home) as process:
            spawned = time.monotonic()
            ready = ready_at(process)
            answer = read_all(client)
            answered = time.monotonic()
            print(
                f"\ntimeline (s after the socket was bound): call sent {sent - began:.3f}, proxy process "
                f"started {spawned - began:.3f}, proxy ready {ready - began:.3f}, call answered {answered - began:.3f}"
            )
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            assert b"Native hello" in answer
            assert sent < spawned < ready <= answered
            assert len(fake.received) == 1
            # The proxy says who runs it, so `up`, `down` and `status` leave it to the service.
            health = orjson.loads(read_all(_get(port, "/healthz")).split(b"\r\n\r\n", 1)[1])
            assert health["service"] == "systemd" and health["pid"] == process.pid

        # A restart: the service is down, the socket still holds the port, the next call waits again.
        client = raw_call(port)
        with activated(listener, isolated_home) as process:
            ready_at(process)
            assert read_all(client).startswith(b"HTTP/1.1 200")
            assert len(fake.received) == 2


def _get(port: int, path: str) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n".encode())
    return client


def test_variables_meant_for_another_process_are_left_alone(isolated_home: Path) -> None:
    from tests.servers import free_port, serve_process

    port = free_port()
    # LISTEN_PID names another process (systemd's variables leaked into a child): serve binds its own port.
    env = {"SWITCH_HOME": str(isolated_home), "LISTEN_FDS": "1", "LISTEN_PID": "1"}
    with serve_process(port, env):
        health = orjson.loads(read_all(_get(port, "/healthz")).split(b"\r\n\r\n", 1)[1])
        assert health["status"] == "ok"


def test_a_handed_over_fd_that_is_not_a_listening_socket_is_one_clear_line(isolated_home: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        result = subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(read_end)],
            pass_fds=(read_end,),
            env={**os.environ, "SWITCH_HOME": str(isolated_home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 2
    assert result.stderr.startswith("switch: ") and "fd 3" in result.stderr and "Traceback" not in result.stderr


def test_up_down_and_status_leave_a_service_run_proxy_to_the_service(isolated_home: Path) -> None:
    from tests.commands import run_switch

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
        env = {"SWITCH_HOME": str(isolated_home)}
        with activated(listener, isolated_home) as process:
            ready_at(process)
            down = run_switch("down", env=env)
            assert down.returncode == 1
            assert "run by the login service (systemd" in down.stdout and "switch service uninstall" in down.stdout
            assert process.poll() is None  # not signalled
            up = run_switch("up", env=env)
            assert up.returncode == 0 and "already running" in up.stdout and "login service" in up.stdout
            assert not (isolated_home / "run" / "proxy.json").exists()  # no second proxy was started
            status = run_switch("status", env=env)
            assert status.returncode == 0 and "under the login service (systemd" in status.stdout


@given(pid=st.text(max_size=12), count=st.text(max_size=12))
def test_any_listen_variables_give_no_socket_or_one_clear_error(pid: str, count: str) -> None:
    from switch.errors import SwitchError
    from switch.service.activation import inherited_socket

    assume(pid.strip() != str(os.getpid()) and "\0" not in pid + count)
    saved = {name: os.environ.get(name) for name in ("LISTEN_PID", "LISTEN_FDS")}
    os.environ["LISTEN_PID"], os.environ["LISTEN_FDS"] = pid, count
    try:
        assert inherited_socket() is None
    except SwitchError as exc:
        assert "LISTEN_" in exc.message
    finally:
        for name, value in saved.items():
            if value is not None:
                os.environ[name] = value
        assert "LISTEN_PID" not in os.environ or saved["LISTEN_PID"] is not None
