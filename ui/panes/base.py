"""What every dashboard tab shares: the read-only ledger, the clock, a reload hook and the read-failure fact."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, TabPane

from ..data import Ledger


class LedgerPane(TabPane):
    """A tab that reads the ledger in a worker thread and shows the result on the UI thread."""

    class ReadFailed(Message):
        """Reading the ledger failed; the next reload tries again."""

        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    def __init__(self, title: str, ledger: Ledger, clock: Callable[[], float], *, pane_id: str) -> None:
        super().__init__(title, id=pane_id)
        self.ledger = ledger
        self.clock = clock

    def reload(self, range_key: str) -> None:
        """Load what this tab shows for the time range `range_key` (in a worker thread)."""
        raise NotImplementedError

    def focus_target(self) -> Widget | None:
        """What takes the focus when this tab opens: its first table."""
        tables = self.query(DataTable)
        return tables.first() if tables else None
