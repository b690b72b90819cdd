"""A DataTable whose column widths and height are measured as it is filled, so it is drawn right at once.

A plain DataTable measures automatic column widths and its height when its message queue runs dry; on a
loaded machine the screen can be drawn before that, and a container with `height: auto` may then lay the
table out at no height at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text


def cell_width(cell: Cell) -> int:
    """How many terminal columns `cell` takes."""
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


class MeasuredTable(DataTable[Any]):
    """A table filled all at once, with fixed column widths and a height of its header and rows."""

    def __init__(self, *, max_rows: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_rows = max_rows
        self.shape: tuple[tuple[str, ...], tuple[int, ...]] | None = None

    def fill(self, headers: Sequence[str], rows: Sequence[Sequence[Cell]], room: int | None = None) -> None:
        """Replace the rows (and the columns, when their headers or widths change); the cursor row stays.

        `room` is the width the table will have: a caller that is changing the layout knows it before the
        table's own size does (which still tells the old layout's until the next refresh)."""
        widths = tuple(max(cell_width(line[index]) for line in [headers, *rows]) for index in range(len(headers)))
        shape = (tuple(headers), widths)
        cursor = self.cursor_row
        if shape != self.shape:
            self.shape = shape
            self.clear(columns=True)
            for header, width in zip(headers, widths, strict=True):
                self.add_column(header, width=width)
        self.clear()
        for row in rows:
            self.add_row(*row)
        # The header and the rows, and the horizontal scroll bar's line when the columns are wider than the table.
        room = room or self.size.width or self.app.size.width
        wider = sum(width + 2 for width in widths) > room  # two columns of cell padding each
        self.styles.height = min(self.max_rows, len(rows)) + 1 + (self.styles.scrollbar_size_horizontal if wider else 0)
        if rows and cursor > 0:
            self.move_cursor(row=min(cursor, len(rows) - 1), scroll=False)
