"""A call's row made safe for every store, once, where the writer builds it.

Text in a row comes from outside (the client's model name and metadata, the upstream's error text,
header values): SQLite takes anything, PostgreSQL text refuses NUL, JSON and CSV exports refuse lone
surrogates. Numbers come from upstream usage and clocks: a hostile or broken upstream can report
negative tokens, and a clock can step back. `safe_row` replaces NUL and lone surrogates with U+FFFD,
bounds text lengths, and keeps every number finite, at least 0 and within 2**53, so the ledger, the
exports, the metrics and the team server all accept every row and no total ever goes down.

Usage and costs have tighter, plausible bounds (`TOKEN_LIMIT` per count, `COST_LIMIT_MICROS` per cost):
a row at 2**53 tokens is storable, but 70 of them push a rollup sum past SQLite's 64 bits, the batch
fails and the answered calls would be lost. Clamped, a sum overflows only after billions of calls, and
the row says in its error text that its usage was clamped. `bounded_usage` clamps a record's tokens
before it is priced, so its cost is the cost of the clamped tokens, not a figure of $10^11.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from switch.ledger.columns import COLUMN_KINDS
from switch.ledger.record import CallRecord

REPLACEMENT = "\ufffd"
TEXT_LIMIT = 512
"""Characters a text column keeps at most (model names, ids, sources)."""
ERROR_TEXT_LIMIT = 2000
"""Characters the error column keeps at most."""
NUMBER_LIMIT = 2**53
"""Largest number stored: SQLite, PostgreSQL bigint and the rollup sums all hold it without overflow."""
TOKEN_LIMIT = 10**9
"""Tokens one count of one call keeps at most (no model's window is near it): 9 billion such calls fit a sum."""
COST_LIMIT_MICROS = 10**12
"""Micro-dollars one cost of one call keeps at most ($1M, above 10**9 tokens at any listed price)."""
CLAMPED_NOTE = "usage clamped: the upstream reported more than 10^9 tokens or a cost above $1M"
"""What the error column says of a row whose usage or cost was clamped."""
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
COST_COLUMNS = ("cost_micros", "native_cost_micros", "cache_savings_micros")
_LIMITS = {**dict.fromkeys(TOKEN_COLUMNS, TOKEN_LIMIT), **dict.fromkeys(COST_COLUMNS, COST_LIMIT_MICROS)}

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


def with_clamped_note(error: str | None) -> str:
    """`error` with the note that the row's usage was clamped (once, within the error column's limit)."""
    if not error:
        return CLAMPED_NOTE
    if CLAMPED_NOTE in error:
        return error
    return f"{error[: ERROR_TEXT_LIMIT - len(CLAMPED_NOTE) - 2]}; {CLAMPED_NOTE}"


def bounded_usage(record: CallRecord) -> CallRecord:
    """`record` with each token count within `TOKEN_LIMIT` (the same record when all are)."""
    tokens = {name: getattr(record, name) for name in TOKEN_COLUMNS}
    if all(type(count) is int and count <= TOKEN_LIMIT for count in tokens.values()):
        return record
    clamped: dict[str, Any] = {
        name: min(count, TOKEN_LIMIT)
        for name, count in tokens.items()
        if isinstance(count, int | float) and count > TOKEN_LIMIT
    }
    if not clamped:
        return record  # odd types are safe_row's to fix; nothing here was too large
    clamped["error"] = with_clamped_note(record.error)
    return replace(record, **clamped)


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
    """`row` (changed in place and returned) with every text safe, every number in 0..2**53, usage and costs clamped."""
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
    clamped = False
    for column, limit in _LIMITS.items():
        value = row.get(column)
        if value is not None and value > limit:
            row[column] = limit
            clamped = True
    if clamped:
        row["error"] = with_clamped_note(row["error"])
    return row
