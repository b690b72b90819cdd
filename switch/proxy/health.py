"""`GET /healthz`: who this proxy is, what routes calls now, and whether anything is degraded."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from switch import __version__, locations
from switch.proxy.config_follower import ConfigFollower
from switch.proxy.exchange import Exchange
from switch.proxy.fail_open import FailOpen
from switch.proxy.relay import Relay
from switch.routing.presets import PresetManager


class Health:
    """The health probe's answer, read from the parts of a running proxy."""

    def __init__(
        self,
        relay: Relay,
        presets: PresetManager,
        follower: ConfigFollower | None,
        fail_open: FailOpen | None,
        ledger_health: Callable[[], dict[str, Any]] | None,
        started: float,
    ) -> None:
        self.relay = relay
        self.presets = presets
        self.follower = follower
        self.fail_open = fail_open
        self.ledger_health = ledger_health
        self.started = started
        # Who this proxy is, so a command run from another SWITCH_HOME never mistakes it for its own.
        self.identity = {"home": str(locations.home().resolve()), "pid": os.getpid(), "version": __version__}
        # Set in the login service's unit (switch.service): `up`, `down` and `status` leave such a proxy to it.
        self.service = os.environ.get("SWITCH_SERVICE", "")

    def budget_report(self) -> list[dict[str, Any]]:
        """Each budget's state now (empty without budgets)."""
        gate = self.relay.budgets
        return gate.book.report() if gate is not None else []

    def report(self) -> dict[str, Any]:
        """The health payload."""
        payload: dict[str, Any] = {"status": "ok", "uptime_s": round(time.time() - self.started, 1), **self.identity}
        # What routes calls now: after a broken edit that is the last good preset, not the one the file names.
        payload["preset"] = {"name": self.presets.active.name, "error": self.presets.error}
        if self.service:
            payload["service"] = self.service
        fail_open = self.fail_open
        if fail_open is not None and fail_open.active:
            # 200 all the same: the proxy answers every call (natively, or with the 503 that says why).
            payload["status"] = "degraded"
            payload["fail_open"] = fail_open.health()
        if self.follower is not None:
            payload["config"] = self.follower.health()
        if self.ledger_health is not None:
            # Still 200 when the ledger is in trouble: calls are served (and kept) all the same, and
            # harness start-up probes must pass; "degraded" and the figures say what is wrong.
            payload["ledger"] = ledger = self.ledger_health()
            if not ledger.get("ok", True):
                payload["status"] = "degraded"
        if self.relay.budgets is not None:
            payload["budgets"] = self.budget_report()
        return payload

    async def endpoint(self, exchange: Exchange) -> None:
        """`GET /healthz`."""
        await exchange.respond(200, orjson.dumps(self.report()))
