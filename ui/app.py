"""`switch dash`: the Textual dashboard over the ledger (read-only, its own process).

The app composes one pane per tab (`panes/`) and owns the bindings, the time range and a timer that
asks the visible pane to reload. Each pane reads in a worker thread and posts typed messages back;
widgets are only touched on the app's thread. Nothing here writes the ledger; choosing a preset writes
only the active-preset file, as `switch use` does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, Input, Select, Static, TabbedContent

from .data import RANGES, Ledger, now_seconds
from .panes.base import LedgerPane
from .panes.calls import CallsPane
from .panes.health import HealthPane
from .panes.overview import OverviewPane
from .panes.sessions import SessionsPane
from .panes.trends import TrendsPane


class SwitchDashboard(App[None]):
    """Spend, savings, speed and every call, live."""

    CSS_PATH = "app.tcss"
    TITLE = "switch"
    BINDINGS = [
        Binding("o", "show_tab('overview')", "Overview"),
        Binding("c", "show_tab('calls')", "Calls"),
        Binding("t", "show_tab('trends')", "Trends"),
        Binding("s", "show_tab('sessions')", "Sessions"),
        Binding("p", "show_tab('presets')", "Presets"),
        # Only with a [team] table; not in the footer, whose keys are the same for everyone.
        Binding("m", "show_tab('team')", "Team", show=False),
        Binding("r", "cycle_range", "Range"),
        Binding("slash", "focus_filter", "Filter", show=False),
        # Escape leaves the text filter or a dropdown for the tab's table, where `q` quits again.
        Binding("escape", "leave_input", "Leave filter", show=False),
        # While typing in the filter, `q` is a letter of it: Escape first, then `q`.
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        ledger_path: Path | None = None,
        clock: Callable[[], float] = now_seconds,
        poll_seconds: float = 1.0,
    ) -> None:
        super().__init__()
        self.ledger = Ledger(ledger_path)
        self.clock = clock
        self.poll_seconds = poll_seconds
        self.range_index = 1
        self.ledger_problem: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        # Stays while the ledger cannot be read (a toast would vanish with the cause still there).
        yield Static(id="ledger-problem", markup=False)
        with TabbedContent(initial="overview"):
            yield OverviewPane(self.ledger, self.clock)
            yield CallsPane(self.ledger, self.clock)
            yield TrendsPane(self.ledger, self.clock)
            yield SessionsPane(self.ledger, self.clock)
            yield HealthPane(self.ledger, self.clock)
            team = _team_settings()
            if team is not None:
                from .panes.team import TeamPane

                yield TeamPane(self.ledger, self.clock, team)
        # Compact, without the command palette's hint (ctrl+p still opens it): every key fits in 80 columns.
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.refresh_data()
        self.focus_active_pane()
        self.set_interval(self.poll_seconds, self.refresh_data)

    def focus_active_pane(self) -> None:
        """Give the focus to the visible tab's table, so its keys (Enter, arrows) work at once."""
        pane = self.query_one(TabbedContent).active_pane
        target = pane.focus_target() if isinstance(pane, LedgerPane) else None
        if target is not None:
            target.focus()

    @property
    def range_key(self) -> str:
        """The chosen time range."""
        return RANGES[self.range_index][0]

    def refresh_data(self) -> None:
        """Ask the visible pane to reload."""
        if not self.is_running:
            # Quitting: Textual removes the panes before it stops this timer, and a tick in between
            # found no pane for the active tab and ended the dashboard with a traceback.
            return
        if self.ledger_problem is not None and self.ledger.problem() is None:
            # Fixed (the file moved aside, a new ledger started): read the file at the path from now on.
            self.ledger_problem = None
            self.ledger.reopen()
            self.query_one("#ledger-problem", Static).display = False
        pane = self.query_one(TabbedContent).active_pane
        if isinstance(pane, LedgerPane):
            pane.reload(self.range_key)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_data()
        pane = self.query_one(TabbedContent).active_pane
        # `/` opens the Calls tab with the focus already in its filter: leave it there.
        if self.focused is None or pane is None or pane not in self.focused.ancestors:
            self.focus_active_pane()

    @on(SessionsPane.SessionChosen)
    def _show_session_calls(self, message: SessionsPane.SessionChosen) -> None:
        self.query_one(CallsPane).show_session(message.session_id)
        self.query_one(TabbedContent).active = "calls"
        self.notify(f"Calls of session {message.session_id[:18]}", markup=False)

    @on(LedgerPane.ReadFailed)
    def _ledger_unreadable(self, message: LedgerPane.ReadFailed) -> None:
        # Every poll retries; saying it once per distinct cause keeps a lasting problem from flooding the screen.
        # The file's own damage is named with its fix, whatever query tripped over it first.
        reason = self.ledger.problem() or message.reason
        banner = self.query_one("#ledger-problem", Static)
        banner.update(f"Ledger unreadable: {reason}")
        banner.display = True
        if reason != self.ledger_problem:
            self.ledger_problem = reason
            self.notify(f"Could not read the ledger: {reason}", severity="error", markup=False)

    def action_show_tab(self, tab: str) -> None:
        """Switch to a tab."""
        tabs = self.query_one(TabbedContent)
        if tabs.query(f"#{tab}"):  # the Team tab exists only with a [team] table
            tabs.active = tab

    def action_cycle_range(self) -> None:
        """Next time range."""
        self.range_index = (self.range_index + 1) % len(RANGES)
        self.notify(f"Range: {RANGES[self.range_index][1]}")
        self.refresh_data()

    def action_leave_input(self) -> None:
        """Leave the text filter or a filter dropdown for the tab's table."""
        if isinstance(self.focused, Input | Select):
            self.focus_active_pane()

    def action_focus_filter(self) -> None:
        """Jump to the text filter on the Calls tab."""
        self.query_one(TabbedContent).active = "calls"
        self.query_one(CallsPane).focus_filter()


def _team_settings() -> Any:
    """The [team] settings, or None (also when config.toml cannot be read: the health tab says why)."""
    from switch.config import load_settings
    from switch.errors import SwitchError

    try:
        return load_settings().team
    except SwitchError:
        return None


def make_app(
    ledger_path: Path | None = None, clock: Callable[[], float] = now_seconds, poll: float = 1.0
) -> SwitchDashboard:
    """The dashboard app (tests pass a frozen clock and a seeded ledger)."""
    return SwitchDashboard(ledger_path, clock, poll)
