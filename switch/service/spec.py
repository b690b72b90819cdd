"""What a login service runs for one SWITCH_HOME: the names, the interpreter, the address and the log."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from switch import locations


def unit_name(home: Path) -> str:
    """`switch` for the default home, `switch-<8 hex>` for any other, so two homes' services never collide."""
    resolved = home.resolve()
    if resolved == (Path.home() / ".switch").resolve():
        return "switch"
    return "switch-" + hashlib.sha256(str(resolved).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class ServiceSpec:
    """One home's service, as its unit files describe it."""

    name: str
    home: Path
    python: str
    host: str
    port: int
    log: Path
    stop_timeout: int

    @property
    def command(self) -> tuple[str, ...]:
        """How the service starts the proxy: this interpreter, not the working directory on its path, failing
        open on a config it cannot use, so a wired harness is always answered."""
        return (self.python, "-P", "-m", "switch", "serve", "--fail-open", "--log-level", "info")


def this_home_spec(python: str, host: str, port: int, shutdown_grace: int) -> ServiceSpec:
    """The spec for this SWITCH_HOME and `python`; stopping waits the grace plus time to record the last calls."""
    home = locations.home().resolve()
    return ServiceSpec(unit_name(home), home, python, host, port, home / "logs" / "proxy.log", shutdown_grace + 10)
