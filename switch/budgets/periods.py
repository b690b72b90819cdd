"""Calendar periods in local time: a day from local midnight, a week from Monday, a month from the 1st."""

from __future__ import annotations

import time


def _local_midnight(year: int, month: int, day: int) -> float:
    # mktime normalises day 0 / month 13 and picks the DST state in force at that local time.
    return time.mktime((year, month, day, 0, 0, 0, 0, 0, -1))


def period_bounds(period: str, now: float) -> tuple[float, float]:
    """The [start, end) Unix times of the local `period` (day | week | month) holding `now`."""
    local = time.localtime(now)
    year, month, day = local.tm_year, local.tm_mon, local.tm_mday
    if period == "day":
        return _local_midnight(year, month, day), _local_midnight(year, month, day + 1)
    if period == "week":
        monday = day - local.tm_wday
        return _local_midnight(year, month, monday), _local_midnight(year, month, monday + 7)
    if period == "month":
        return _local_midnight(year, month, 1), _local_midnight(year, month + 1, 1)
    raise ValueError(f"unknown period {period!r}")
