"""The shapes every check returns, and the one helper that builds a finding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from switch.routing.presets import Preset


class Check(TypedDict):
    """One finding: `fix` names the command or edit that resolves a failed check."""

    check: str
    ok: bool
    detail: str
    fix: str | None


@dataclass(frozen=True)
class PresetStatus:
    """One preset as the dashboard lists it: loaded, or the reason it cannot be."""

    name: str
    description: str
    active: bool
    problem: str | None
    preset: Preset | None


@dataclass(frozen=True)
class ProxyState:
    """What answers `/healthz` on this home's proxy port (None: nothing does)."""

    port: int
    health: dict[str, Any] | None

    @property
    def ours(self) -> bool:
        """Whether the answering proxy serves this SWITCH_HOME."""
        from switch import daemon

        return self.health is not None and daemon.is_ours(self.health)

    @property
    def holder(self) -> str:
        """Who holds the port when it is another home's proxy, in words."""
        from switch import daemon

        return daemon.describe_other(self.health or {})

    @property
    def uptime_s(self) -> float:
        """How long the proxy has been up, as it reports."""
        return float((self.health or {}).get("uptime_s") or 0)


def check(name: str, ok: bool, detail: str, fix: str | None = None) -> Check:
    """One finding; a passed check carries no fix."""
    return {"check": name, "ok": ok, "detail": detail, "fix": None if ok else fix}
