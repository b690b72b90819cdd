"""Socket activation: the listening socket a service manager bound for `switch serve` and handed over.

systemd passes it as file descriptor 3 with `LISTEN_FDS=1` and `LISTEN_PID=<the serving process>`
(sd_listen_fds(3)). The manager holds the port from login on, so a call that arrives while the proxy
starts or restarts waits in the socket's backlog instead of being refused.
"""

from __future__ import annotations

import os
import socket

from switch.errors import SwitchError

LISTEN_FDS_START = 3
VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def inherited_socket() -> socket.socket | None:
    """The listening socket handed to this process (None when there is none); the variables are cleared so
    no child process takes them for its own."""
    pid_text, count_text = os.environ.get("LISTEN_PID"), os.environ.get("LISTEN_FDS")
    for name in VARIABLES:
        os.environ.pop(name, None)
    if not pid_text or not count_text:
        return None
    try:
        pid, count = int(pid_text), int(count_text)
    except ValueError:
        raise SwitchError(
            f"LISTEN_PID={pid_text!r} / LISTEN_FDS={count_text!r} are not numbers; start `switch serve` from the "
            "switch socket unit (`switch service install`), or unset them"
        ) from None
    if pid != os.getpid():
        return None  # set for another process (the one that started this one): not ours to take
    if count < 1:
        return None
    if count > 1:
        raise SwitchError(
            f"LISTEN_FDS={count}: switch serves one listening socket; give its socket unit a single ListenStream="
        )
    try:
        listener = socket.socket(fileno=LISTEN_FDS_START)
    except OSError as exc:
        raise SwitchError(f"the socket handed over as fd {LISTEN_FDS_START} cannot be used: {exc.strerror}") from None
    os.set_inheritable(LISTEN_FDS_START, False)
    if listener.type != socket.SOCK_STREAM or not listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        listener.detach()
        raise SwitchError(
            f"fd {LISTEN_FDS_START} handed over is not a listening TCP socket; the socket unit needs ListenStream="
        )
    return listener
