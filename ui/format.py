"""Formatting for people: money, durations, rates; unpriced is never shown as $0."""

from __future__ import annotations

from rich.text import Text

from switch.ledger.queries import micros_to_usd


def plain(value: object) -> Text:
    """Text recorded in the ledger or read from a file, shown literally: `[b]` in it is not markup."""
    return Text("-" if value is None else str(value))


def labelled(label: str, value: object) -> Text:
    """`label: value` with a bold label and a literal value."""
    return Text.assemble((label, "bold"), ": ", plain(value))


def money(value: int | None) -> str:
    """Micro-USD as dollars, or `unpriced`."""
    return micros_to_usd(value)


# Larger units for a figure too wide for its cell: a cell is cut at its edge, and `$12,345.6` cut to `$12,34`
# reads as another amount, so a figure is shortened on purpose instead.
_UNITS = (("", 1), ("k", 1_000), ("M", 1_000_000), ("B", 1_000_000_000), ("T", 1_000_000_000_000))


def _shortened(amount: float, prefix: str, width: int, places: tuple[int, ...]) -> str:
    """`amount` after `prefix` in at most `width` characters: fewer decimal places first, then k/M/B/T."""
    for suffix, scale in _UNITS:
        if suffix and amount / scale >= 999.5 and suffix != _UNITS[-1][0]:
            continue  # `12.35M`, not `12,346k`
        for digits in places:
            text = f"{prefix}{amount / scale:,.{digits}f}{suffix}"
            if len(text) <= width:
                return text
    return f"{prefix}{amount / _UNITS[-1][1]:.0f}T"


def money_cell(value: int | None, width: int = 8) -> str:
    """Money for a table cell of `width` characters: as `money` when it fits, else shortened (`$1,234.6`, `$12k`)."""
    text = money(value)
    if value is None or len(text) <= width:
        return text
    sign = "-" if value < 0 else ""
    return _shortened(abs(value) / 1_000_000, f"{sign}$", width, (2, 1, 0))


def count_cell(value: int | None, width: int = 8) -> str:
    """A count for a table cell of `width` characters: as `count` when it fits, else `1.23M`, `45k`."""
    text = count(value)
    if len(text) <= width:
        return text
    sign = "-" if (value or 0) < 0 else ""
    return _shortened(abs(value or 0), sign, width, (2, 1, 0))


def pct(value: float | None) -> str:
    """A fraction as a percentage."""
    return "-" if value is None else f"{value:.0%}"


def ms(value: float | None) -> str:
    """Milliseconds, compact."""
    if value is None:
        return "-"
    return f"{value / 1000:.1f}s" if value >= 10_000 else f"{value:,.0f}ms"


def rate(value: float | None) -> str:
    """Tokens per second."""
    return "-" if value is None else f"{value:,.0f}/s"


def count(value: int | None) -> str:
    """A whole number with thousands separators."""
    return f"{value or 0:,}"


SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """Values oldest first as one line of block heights (lowest to highest); a gap stays a space."""
    known = [value for value in values if value is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    top = len(SPARK_BLOCKS) - 1
    return "".join(
        " " if value is None else SPARK_BLOCKS[round((value - low) / span * top) if span else top // 2]
        for value in values
    )
