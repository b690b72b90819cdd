"""`switch export --readable`: a call row with ISO 8601 times and money in US dollars, for people and spreadsheets."""

from __future__ import annotations

from datetime import datetime
from typing import Any

MICROS = "_micros"
TIMES = ("started_at",)


def readable_names(names: list[str]) -> list[str]:
    """The column names of a readable row: `*_micros` become `*_usd`."""
    return [name.removesuffix(MICROS) + "_usd" if name.endswith(MICROS) else name for name in names]


def readable_row(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with epoch-second times as local ISO 8601 (with UTC offset) and micro-dollars as dollars."""
    shown: dict[str, Any] = {}
    for name, value in row.items():
        if name in TIMES and isinstance(value, int | float):
            shown[name] = datetime.fromtimestamp(value).astimezone().isoformat(timespec="milliseconds")
        elif name.endswith(MICROS):
            # Unpriced stays empty (None), never $0; dollars to the micro-dollar, as stored.
            shown[name.removesuffix(MICROS) + "_usd"] = None if value is None else round(value / 1_000_000, 6)
        else:
            shown[name] = value
    return shown
