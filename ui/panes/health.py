"""The Presets & health tab: presets (Enter makes one active), the active routes, proxy, keys, recent problems.

Config, presets, keys and the proxy are read through `switch.checks.doctor`, the checks `switch doctor` runs;
the key sources named there never include a key.
"""

from __future__ import annotations

import sqlite3
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from switch.checks import doctor
from switch.ledger import queries

from .. import format as fmt
from ..data import Ledger
from .base import LedgerPane


@dataclass(frozen=True)
class HealthInfo:
    """What the Presets & health tab shows."""

    presets: list[doctor.PresetStatus]
    routes: Text
    keys: dict[str, str | None]
    proxy: str
    problems: list[dict[str, Any]]
    team: str | None = None
    """The team ledger's shipping lag in one line (None: no [team] table)."""


def proxy_status(state: doctor.ProxyState) -> str:
    """This home's proxy in one line: running (and for how long), or why it is not."""
    if state.health is None:
        return f"not reachable on 127.0.0.1:{state.port} (start it with `switch up`)"
    if not state.ours:
        return f"not running for this home: port {state.port} is held by {state.holder}"
    return f"running on 127.0.0.1:{state.port} (up {fmt.ms(state.uptime_s * 1000)})"


def _fail_open_note(state: doctor.ProxyState) -> str:
    degraded = doctor.fail_open_check(state)
    return "" if degraded is None else f"\n  {degraded['detail']}\n  fix: {degraded['fix']}"


def active_routes(statuses: list[doctor.PresetStatus], default_model: str) -> Text:
    """Each harness's route per role under the active preset."""
    for status in statuses:
        if status.active and status.preset is not None:
            preset = status.preset
            lines = [fmt.labelled(preset.name, preset.description)]
            for harness in preset.sections:
                chains = ", ".join(
                    f"{role} → {' → '.join(preset.chain(harness, role))}"
                    for role in ("orchestrator", "subagent", "background")
                )
                # Forks and compaction follow the orchestrator unless the section names them: show only those.
                for kind in sorted(preset.sections[harness].kinds):
                    chains += f", {kind} → {' → '.join(preset.chain(harness, 'orchestrator', kind=kind))}"
                # Say where a route the preset does not name comes from, or it reads as the preset's choice.
                label = (
                    f"{harness} (not in the preset: [defaults] model)"
                    if preset.sections[harness].from_defaults
                    else harness
                )
                lines.append(fmt.plain(f"  {label}: {chains}"))
            return Text("\n").join(lines)
    return fmt.plain(f"No preset chosen: every call goes to {default_model}.")


def read_health(problems: list[dict[str, Any]]) -> HealthInfo:
    """Gather the tab's contents around the ledger's recent `problems` (blocking: run it off the UI thread)."""
    settings, config = doctor.config_check()
    if settings is None:
        # A proxy may still serve (on its last good config, or failing open): say which.
        state = doctor.probe_proxy(doctor.fallback_port(), timeout=0.3)
        proxy = proxy_status(state) + _fail_open_note(state)
        return HealthInfo([], fmt.plain(f"config.toml is invalid: {config['detail']}"), {}, proxy, problems)
    statuses = doctor.preset_statuses(settings)
    state = doctor.proxy_state(settings, timeout=0.3)
    proxy = proxy_status(state) + _fail_open_note(state)
    running = doctor.running_config_check(state)
    if running is not None and not running["ok"]:
        proxy += f"\n  {running['detail']}\n  fix: {running['fix']}"
    team = None
    if settings.team is not None:
        from switch.checks.team import team_lag_line

        ok, line, fix = team_lag_line(settings.team)
        team = line if ok else f"{line}\n  fix: {fix}"
    return HealthInfo(
        statuses,
        active_routes(statuses, settings.defaults.model),
        doctor.key_sources(settings),
        proxy,
        problems,
        team,
    )


class HealthPane(LedgerPane):
    """Presets and what is wrong; Enter on a preset makes it active, as `switch use` does."""

    class Loaded(Message):
        """Presets, routes, keys, proxy and recent problems were gathered."""

        bubble = False

        def __init__(self, info: HealthInfo) -> None:
            super().__init__()
            self.info = info

    def __init__(self, ledger: Ledger, clock: Callable[[], float]) -> None:
        super().__init__("Presets & health", ledger, clock, pane_id="presets")

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield DataTable(id="presets-table", cursor_type="row")
            with VerticalScroll(id="health-side"):
                yield Static(id="routes")
                yield Static(id="health")

    def on_mount(self) -> None:
        self.info: HealthInfo | None = None
        self.description_width = 0

    def on_resize(self) -> None:
        if self.info is not None and self.size.width:
            self._show_presets(self.info)

    def reload(self, range_key: str) -> None:
        """Gather presets and health (they do not depend on the time range)."""
        self._load()

    @work(thread=True, exclusive=True, group="health")
    def _load(self) -> None:
        problems: list[dict[str, Any]] = []
        try:
            connection = self.ledger.get()
            if connection is not None:
                problems = queries.recent_problems(connection)
        except sqlite3.Error as exc:
            # Presets, keys and the proxy matter most when the ledger cannot be read: show them anyway.
            self.post_message(self.ReadFailed(str(exc)))
        self.post_message(self.Loaded(read_health(problems)))

    def _show_presets(self, info: HealthInfo) -> None:
        """The presets table, each description wrapped to the width left for it (never cut at the edge)."""
        table = self.query_one("#presets-table", DataTable)
        name_width = max([len("preset"), *(len(status.name) for status in info.presets)])
        # The marker and name columns with their padding, and the scroll bar, come off the table's width.
        width = max(20, table.size.width - (1 + 2) - (name_width + 2) - 2 - 2)
        cursor = table.cursor_row
        if width != self.description_width:
            self.description_width = width
            table.clear(columns=True)
            table.add_column("", key="active", width=1)
            table.add_column("preset", key="preset", width=name_width)
            table.add_column("description", key="description", width=width)
        table.clear()
        for status in info.presets:
            lines = textwrap.wrap(status.problem or status.description or "-", width) or ["-"]
            table.add_row(
                "●" if status.active else "",
                fmt.plain(status.name),
                fmt.plain("\n".join(lines)),
                key=status.name,
                height=len(lines),
            )
        if info.presets and cursor >= 0:
            table.move_cursor(row=min(cursor, len(info.presets) - 1), scroll=False)

    @on(Loaded)
    def _show(self, message: Loaded) -> None:
        info = message.info
        self.info = info
        self._show_presets(info)
        self.query_one("#routes", Static).update(
            Text.assemble(info.routes, ("\n\nEnter on a preset makes it active.", "dim"))
        )
        keys = "\n".join(f"  {name}: {source or 'no key'}" for name, source in sorted(info.keys.items()))
        problems = "\n".join(problem_line(row) for row in info.problems) or "  none"
        self.query_one("#health", Static).update(
            Text.assemble(
                ("Proxy", "bold"),
                ": ",
                fmt.plain(info.proxy),
                "\n",
                *((("Team", "bold"), ": ", fmt.plain(info.team), "\n") if info.team else ()),
                ("Keys", "bold"),
                ":\n",
                fmt.plain(keys),
                "\n",
                ("Recent errors and fallbacks", "bold"),
                ":\n",
                fmt.plain(problems),
            )
        )

    @on(DataTable.RowSelected, "#presets-table")
    def _use(self, event: DataTable.RowSelected) -> None:
        from switch.config import load_settings
        from switch.errors import SwitchError
        from switch.routing.presets import use_preset

        if event.row_key.value is None:
            return
        try:
            settings = load_settings()
            preset = use_preset(event.row_key.value, set(settings.providers), settings.defaults.model)
        except SwitchError as exc:
            self.notify(exc.message, title="Preset not changed", severity="error", markup=False)
            return
        self.notify(f"Active preset: {preset.name}", markup=False)
        self._load()


def problem_line(row: dict[str, Any]) -> str:
    """One recent failure or fallback: when (local time), what, on which model, and the error's start."""
    when = time.strftime("%m-%d %H:%M:%S", time.localtime(row["started_at"]))
    fallback = " (fallback)" if row.get("fallback_attempt") else ""
    error = f": {row['error']}" if row.get("error") else ""
    return f"  {when} {row['outcome']}{fallback} {row['served_model'] or '-'}{error}"[:200]
