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
