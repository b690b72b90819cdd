"""Fail open: a proxy whose config or active preset cannot load at start-up still serves, visibly.

Every call goes to its harness's native provider as a pass-through (preset `fail-open`), or, with
`[server] fail_open = false`, gets a 503 in the caller's format naming the problem and the fix
(preset `fail-closed`). The preset name is what every such call carries in the ledger and in
`x-switch-route`. `/healthz` says `degraded` with the reason, and a marker file under
`$SWITCH_HOME/run` lets the status-line hook say so without asking the proxy. Once the config and
the preset load again (the file watchers pick up the fix), routing is back to normal and the marker
goes away.
"""

from __future__ import annotations

import json
import logging
import os
import time
import tomllib
from pathlib import Path
from typing import Any

from switch import locations
from switch.config import BUILTIN_PROVIDERS, NATIVE, Defaults, Provider, Server, Settings
from switch.config_schema import SchemaError, validate
from switch.files import atomic_write
from switch.routing.classify import ROLES
from switch.routing.presets import HarnessRoutes, Preset, PresetManager

log = logging.getLogger("switch.fail_open")

FAIL_OPEN = "fail-open"
FAIL_CLOSED = "fail-closed"
# What the status line and `switch status` print while the proxy fails open.
NOTICE = "switch: config error, calls go to native"
NOTICE_CLOSED = "switch: config error, calls are refused"


def _raw_table(path: Path) -> dict[str, Any]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return raw


def fallback_settings(path: Path) -> Settings:
    """Settings to fail open on: built-in defaults, all routes native, keeping what of the file still holds.

    The `[server]` table and the native providers' tables (`[providers.anthropic]`, `[providers.openai]`:
    a corporate gateway, say) are kept when each one is valid on its own; anything else in a broken file
    is ignored until it is fixed.
    """
    raw = _raw_table(path)
    server_table = raw.get("server")
    try:
        server = validate(Server, server_table) if isinstance(server_table, dict) else Server()
    except SchemaError:
        server = Server()
        # Whether to fail open at all is honoured even when another [server] key is broken.
        wanted = server_table.get("fail_open") if isinstance(server_table, dict) else None
        if isinstance(wanted, bool):
            server.fail_open = wanted
    providers: dict[str, Provider] = {}
    user_providers = raw.get("providers")
    for name, builtin in BUILTIN_PROVIDERS.items():
        providers[name] = validate(Provider, builtin)
        table = user_providers.get(name) if isinstance(user_providers, dict) else None
        if name in ("anthropic", "openai") and isinstance(table, dict):
            try:
                providers[name] = validate(Provider, {**builtin, **table})
            except SchemaError:
                pass
    return Settings(server=server, defaults=Defaults(model=NATIVE), providers=providers)


def degraded_preset(closed: bool, reason: str) -> Preset:
    """Every harness and role on `native` (the refusal itself, when closed, happens before routing)."""
    routes = HarnessRoutes({role: (NATIVE,) for role in ROLES})
    name, what = (FAIL_CLOSED, "calls are refused") if closed else (FAIL_OPEN, "calls go to native")
    return Preset(name, None, f"config error, {what}: {reason}", {"default": routes}, {})


class FailOpen:
    """The degraded state of one proxy, from start-up until its config and preset load again."""

    def __init__(self, reason: str, closed: bool, config_broken: bool = True, keys_broken: bool = False) -> None:
        self.reason = reason
        self.closed = closed
        self.config_broken = config_broken
        self.keys_broken = keys_broken
        self.since = time.time()
        self.active = True
        self.preset = degraded_preset(closed, reason)

    @property
    def refusal(self) -> str:
        """The message a model call gets while closed: the problem and the fix."""
        return (
            f"switch cannot use its configuration: {self.reason}. Fix it (the proxy picks up the fix within a "
            "second; `switch doctor` shows it), or set [server] fail_open = true to send calls to the native "
            "provider meanwhile"
        )

    def health(self) -> dict[str, Any]:
        """What /healthz reports while degraded."""
        return {
            "reason": self.reason,
            "mode": FAIL_CLOSED if self.closed else FAIL_OPEN,
            "notice": NOTICE_CLOSED if self.closed else NOTICE,
            "since": round(self.since, 3),
        }

    def begin(self, presets: PresetManager) -> None:
        """Pin the degraded routes, log it, and leave the marker for the status line."""
        presets.pin(self.preset)
        what = "refusing every model call with 503" if self.closed else "sending every call to the native provider"
        log.error("config error at start-up, %s until it is fixed: %s", what, self.reason)
        self._write_marker()

    def settle(self, config_ok: bool, presets: PresetManager) -> bool:
        """End the degraded state once the config and the active preset load; True when it just ended."""
        if not self.active or not config_ok or presets.error is not None:
            return False
        if self.keys_broken:
            from switch import keys

            try:
                keys.read_file()  # a small file, read only while degraded
            except keys.KeysFileError:
                return False
        self.active = False
        presets.unpin()
        log.warning("config fixed: routing by preset '%s' again", presets.active.name)
        self.clear_marker()
        return True

    def _write_marker(self) -> None:
        try:
            locations.ensure_private_dir(locations.run_dir())
            atomic_write(locations.fail_open_marker(), json.dumps({"pid": os.getpid(), **self.health()}).encode())
        except OSError as exc:
            log.warning("could not write %s: %s", locations.fail_open_marker(), exc)

    def clear_marker(self) -> None:
        """Remove the marker when it is this process's (at the fix, and at exit)."""
        try:
            record = json.loads(locations.fail_open_marker().read_text(encoding="utf-8"))
            if record.get("pid") == os.getpid():
                locations.fail_open_marker().unlink()
        except (OSError, ValueError, AttributeError):
            pass
