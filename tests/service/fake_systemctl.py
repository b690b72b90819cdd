"""A stand-in `systemctl --user` for a machine with no user manager (this one: PID 1 is not systemd).

It does what the real one would with switch's units, from the unit files themselves: `enable --now
NAME.socket` binds the socket unit's ListenStream= and starts the service unit's ExecStart= with the socket on
fd 3 and LISTEN_FDS/LISTEN_PID set, in a background holder process; `disable --now` stops that holder and the
proxy. Every call is appended to $FAKE_SYSTEMCTL_LOG.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

UNITS = Path(os.environ.get("XDG_CONFIG_HOME", str(Path.home() / ".config"))) / "systemd" / "user"
STATE = Path(os.environ["FAKE_SYSTEMCTL_STATE"])


def settings(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            pairs.append((key, value))
    return pairs


def hold(name: str) -> None:
    """The socket unit and its service: bind, then run the service on the socket (the holder process)."""
    host, port = dict(settings(UNITS / f"{name}.socket"))["ListenStream"].rsplit(":", 1)
    service = settings(UNITS / f"{name}.service")
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(2048)
    env = dict(os.environ)
    for key, value in service:
        if key == "Environment":
            variable, _, text = shlex.split(value.replace("%%", "%"))[0].partition("=")
            env[variable] = text
    argv = shlex.split(dict(service)["ExecStart"].replace("%%", "%").replace("$$", "$"))
    fd = listener.fileno()

    env["LISTEN_FDS"] = "1"
    # The socket on fd 3 and LISTEN_PID naming the very process that execs the service (a shell's $$ survives exec).
    child = subprocess.Popen(
        ["/bin/sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh", *argv],
        env=env,
        pass_fds=(fd,),
        preexec_fn=lambda: os.dup2(fd, 3),
        cwd=dict(service)["WorkingDirectory"],
    )
    signal.signal(signal.SIGTERM, lambda *_: (child.terminate(), child.wait(), sys.exit(0)))
    child.wait()


def main(args: list[str]) -> int:
    with open(os.environ["FAKE_SYSTEMCTL_LOG"], "a") as log:
        log.write(" ".join(args) + "\n")
    command = args[1] if args[:1] == ["--user"] else ""
    if command == "hold":
        hold(args[2])
        return 0
    if command == "enable" and "--now" in args:
        name = args[-1].removesuffix(".socket")
        holder = subprocess.Popen(
            [sys.executable, __file__, "--user", "hold", name],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        STATE.write_text(str(holder.pid))
    elif command == "disable" and STATE.exists():
        pid = int(STATE.read_text())
        os.kill(pid, signal.SIGTERM)
        STATE.unlink()
    elif command == "is-active":
        print("active\nactive" if STATE.exists() else "inactive\ninactive")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
