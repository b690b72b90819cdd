"""A throwaway PostgreSQL cluster for the team tests: initdb in a temp dir, a free port on 127.0.0.1.

The server binaries refuse to run as root: as root (here and in CI) every binary runs as the `postgres`
OS user, with the data directory owned by it. Found on PATH, else under /usr/lib/postgresql/*/bin.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PASSWORD = "team-pw-Zq7-never-shown"
USER = "switch"


def binaries() -> Path:
    """The directory holding initdb, pg_ctl and postgres."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not candidates:
        raise RuntimeError("PostgreSQL server binaries not found: apt-get install -y postgresql (.ci/run does it)")
    return Path(candidates[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """One initdb'd data directory and the server on it."""

    def __init__(self) -> None:
        self.bin = binaries()
        self.as_postgres = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="switch-pg-", dir=self._base()))
        self.data = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.port = _free_port()
        self._databases = 0

    def _base(self) -> str:
        # The `postgres` user must reach the data directory: a private /tmp (mode 0700) will not do.
        if not self.as_postgres:
            return tempfile.gettempdir()
        for base in (tempfile.gettempdir(), "/var/tmp", "/dev/shm"):
            reachable = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", base], check=False)
            if reachable.returncode == 0:
                return base
        raise RuntimeError("no temp directory the postgres user can reach")

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        if check and done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def init(self) -> None:
        """Create the data directory: trust over the unix socket, password (scram) over TCP."""
        self.socket_dir.mkdir()
        if self.as_postgres:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.socket_dir, "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "-t", "60", "start"
        )

    def stop(self) -> None:
        """Stop the server at once (as a crash or an outage would)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` as the superuser over the unix socket."""
        return self._run(
            "psql",
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atc",
            sql,
        ).stdout

    def create_role(self) -> None:
        """The role the tests connect as, with a password."""
        self.psql(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")

    def new_database(self) -> str:
        """A fresh database owned by the test role; returns its URL (no password in it)."""
        self._databases += 1
        name = f"team_{os.getpid()}_{self._databases}"
        self.psql(f"CREATE DATABASE {name} OWNER {USER}")
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def remove(self) -> None:
        """Stop the server and delete everything."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def running_cluster() -> Iterator[Cluster]:
    """A started cluster with the switch role, stopped and removed afterwards whatever happens."""
    cluster = Cluster()
    try:
        cluster.init()
        cluster.start()
        cluster.create_role()
        yield cluster
    finally:
        cluster.remove()


def wait_for(condition: object, timeout: float = 30.0, interval: float = 0.05) -> None:
    """Poll `condition()` until true or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")
