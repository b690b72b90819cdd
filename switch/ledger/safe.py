"""A call's row made safe for every store, once, where the writer builds it.

Text in a row comes from outside (the client's model name and metadata, the upstream's error text,
header values): SQLite takes anything, PostgreSQL text refuses NUL, JSON and CSV exports refuse lone
surrogates. Numbers come from upstream usage and clocks: a hostile or broken upstream can report
negative tokens, and a clock can step back. `safe_row` replaces NUL and lone surrogates with U+FFFD,
bounds text lengths, and keeps every number finite, at least 0 and within 2**53, so the ledger, the
exports, the metrics and the team server all accept every row and no total ever goes down.
"""

from __future__ import annotations

import math
from typing import Any

from switch.ledger.columns import COLUMN_KINDS

REPLACEMENT = "\ufffd"
TEXT_LIMIT = 512
"""Characters a text column keeps at most (model names, ids, sources)."""
ERROR_TEXT_LIMIT = 2000
"""Characters the error column keeps at most."""
NUMBER_LIMIT = 2**53
"""Largest number stored: SQLite, PostgreSQL bigint and the rollup sums all hold it without overflow."""

# (column, required) per kind, computed once from the generated column table.
_TEXT = tuple((column, required) for column, (kinds, required) in COLUMN_KINDS.items() if kinds == (str,))
_INTEGER = tuple((column, required) for column, (kinds, required) in COLUMN_KINDS.items() if kinds == (int,))
_REAL = tuple((column, required) for column, (kinds, required) in COLUMN_KINDS.items() if float in kinds)


def safe_text(value: str, limit: int = TEXT_LIMIT) -> str:
    """`value` without NUL or lone surrogates, at most `limit` characters."""
    if len(value) > limit:
        value = value[:limit]
    if value.isascii():
        return value.replace("\x00", REPLACEMENT) if "\x00" in value else value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (from JSON escapes like "\ud800"): each becomes U+FFFD.
        value = "".join(REPLACEMENT if "\ud800" <= char <= "\udfff" else char for char in value)
    return value.replace("\x00", REPLACEMENT) if "\x00" in value else value


def _number(value: Any, required: bool, integer: bool) -> Any:
    if value is None or isinstance(value, bool):
        value = int(value) if isinstance(value, bool) else value
        if value is None:
            return 0 if required else None
    if not isinstance(value, int | float):
        return 0 if required else None
    if isinstance(value, float) and not math.isfinite(value):
        return 0 if required else None
    if value < 0:
        value = 0
    elif value > NUMBER_LIMIT:
        value = NUMBER_LIMIT
    return int(value) if integer else value


def safe_row(row: dict[str, Any]) -> dict[str, Any]:
    """`row` (changed in place and returned) with every text safe and every number in 0..2**53."""
    # The writer thread runs this per row: the usual values (short ASCII text, plain numbers in range)
    # are checked with a type test and a comparison, and only the others take the slow path.
    for column, required in _TEXT:
        value = row.get(column)
        if type(value) is str:
            if len(value) <= TEXT_LIMIT and value.isascii() and "\x00" not in value:
                continue
        elif value is None:
            if required:
                row[column] = ""
            continue
        else:
            value = str(value)
        row[column] = safe_text(value, ERROR_TEXT_LIMIT if column == "error" else TEXT_LIMIT)
    for column, required in _INTEGER:
        value = row.get(column)
        if type(value) is not int or not 0 <= value <= NUMBER_LIMIT:
            row[column] = _number(value, required, integer=True)
    for column, required in _REAL:
        value = row.get(column)
        if (type(value) is not float and type(value) is not int) or not 0 <= value <= NUMBER_LIMIT:
            row[column] = _number(value, required, integer=False)
    return row
