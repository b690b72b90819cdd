"""The running proxy follows config.toml: each edit it can use is applied whole, one it cannot leaves the last good
config serving (and says why in the log and `/healthz`)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

from switch.budgets.presets import check_budget_presets
from switch.config import LoadedConfig, Settings, file_digest, file_signature, litellm_names, load_config
from switch.errors import ConfigError
from switch.ledger.record import RecordSink
from switch.proxy.budget_gate import BudgetGate
from switch.proxy.relay import Relay
from switch.routing.presets import PresetManager, active_name, load_preset

log = logging.getLogger("switch.app")


class ConfigFollower:
    """Applies config.toml edits to the running proxy; a file it cannot use leaves the last good config running.

    Providers, `[defaults]`, `[routing]`, `[models]` and prices follow the file; `[server]` (where and how
    the proxy listens) needs a restart, which the log and `/healthz` say. Each change swaps whole
    objects, so a call sees the old config or the new one and requests pay nothing for the watching.
    """

    def __init__(self, loaded: LoadedConfig, relay: Relay, presets: PresetManager, sink: RecordSink | None) -> None:
        self.relay = relay
        self.presets = presets
        self.sink = sink
        self.path = loaded.path
        self.running = loaded
        self.started_server = loaded.server
        self.seen = loaded.signature
        self.loaded_at = time.time()
        self.rejected: dict[str, str | None] | None = None
        self.restart_needed: list[str] = []
        self.budget_rebuilds = 0
        """Budget gates asked for by edits so far; `budgets_applied` is the last one swapped in."""
        self.budgets_applied = 0

    def poll(self) -> bool:
        """Apply the file if it changed since the last look; True when the running config changed."""
        signature = file_signature(self.path)
        if signature == self.seen:
            return False
        self.seen = signature
        try:
            loaded = load_config(self.path)
            check_budget_presets(loaded.settings, self.path)
            self._check_active_preset(loaded)
        except ConfigError as exc:
            if self.rejected is None or self.rejected["error"] != exc.message:
                log.error("config.toml rejected, still running on the previous config: %s", exc.message)
            self.rejected = {"digest": file_digest(self.path), "error": exc.message}
            return False
        self.rejected = None
        if loaded.digest == self.running.digest:
            return False
        self._apply(loaded)
        return True

    def _check_active_preset(self, loaded: LoadedConfig) -> None:
        # A provider the active preset routes to must not vanish under it; when the preset was already
        # broken on its own, the preset watcher reports that, not this file.
        name = active_name()
        if name is None or self.presets.error is not None:
            return
        try:
            load_preset(name, set(loaded.settings.providers), loaded.settings.defaults.model)
        except ConfigError as exc:
            raise ConfigError(f"{self.path}: the active preset no longer loads with it: {exc.message}") from exc

    def _apply(self, loaded: LoadedConfig) -> None:
        running = self.relay.settings
        settings = dataclasses.replace(loaded.settings, server=running.server)
        providers = {name: provider.api_key_env for name, provider in settings.providers.items()}
        if providers != {name: provider.api_key_env for name, provider in running.providers.items()}:
            self.relay.keys.reconfigure(providers)
        self.relay.reconfigure(settings)
        if set(settings.providers) != self.presets.providers or settings.defaults.model != self.presets.fallback_model:
            self.presets.reconfigure(set(settings.providers), settings.defaults.model)
        if (
            settings.prices != running.prices
            or settings.pricing != running.pricing
            or litellm_names(settings) != litellm_names(running)
        ):
            self._reprice(settings)
        if settings.budgets != running.budgets or set(settings.providers) != set(running.providers):
            # Rebuilt from the ledger (spend so far this period carries over to the edited budgets) on
            # a thread of its own: on a big ledger that read takes long, and streams must not wait.
            self.budget_rebuilds += 1
            threading.Thread(
                target=self._rebuild_budgets,
                args=(settings, self.budget_rebuilds),
                name="switch-budget-rebuild",
                daemon=True,
            ).start()
        self.running = loaded
        self.loaded_at = time.time()
        self.restart_needed = sorted(
            key for key, value in loaded.server.items() if value != self.started_server.get(key)
        )
        log.warning("config.toml reloaded: %s", loaded.path)
        if self.restart_needed:
            log.warning(
                "config.toml changes [server] %s: that applies only after a restart (switch down && switch up)",
                ", ".join(self.restart_needed),
            )

    def _rebuild_budgets(self, settings: Settings, generation: int) -> None:
        """Build the gate for `settings` off the event loop, then swap it in whole, missing no committed row."""
        try:
            database, pricer = getattr(self.sink, "database", None), getattr(self.sink, "pricer", None)
            gate = BudgetGate.build(settings, self.path, database, self.relay.budgets, pricer)
        except Exception:  # the running budgets stay; the next edit tries again
            log.exception("could not rebuild the budgets for the edited config.toml")
            return

        def swap() -> None:
            if generation == self.budget_rebuilds:  # a later edit's gate wins over this one
                self.relay.budgets = gate
                self.budgets_applied = generation

        catch_up = getattr(self.sink, "catch_up", None)
        if gate is None or catch_up is None:
            swap()
            return
        try:
            # Rows committed after the gate read the ledger reach it before it takes over the stream.
            catch_up(gate.book.through_id, gate.book.observe, swap)
        except Exception:
            log.exception("could not hand the ledger's new rows to the edited budgets")

    def _reprice(self, settings: Settings) -> None:
        from switch.ledger.pricer import Pricer

        if isinstance(getattr(self.sink, "pricer", None), Pricer):
            # The writer thread reads `pricer` once per row; the new table loads there, on first use.
            self.sink.pricer = Pricer(  # type: ignore[union-attr]
                settings.prices,
                litellm_names=litellm_names(settings),
                baseline_anthropic=settings.pricing.baseline_anthropic,
                baseline_openai=settings.pricing.baseline_openai,
            )

    def health(self) -> dict[str, Any]:
        """The config the proxy runs with, for /healthz (which `switch doctor` compares with the file)."""
        signature = self.running.signature
        return {
            "path": str(self.path),
            "digest": self.running.digest,
            "mtime": signature[1] / 1e9 if signature else None,
            "loaded_at": round(self.loaded_at, 3),
            "rejected": self.rejected,
            "restart_needed": self.restart_needed,
        }
