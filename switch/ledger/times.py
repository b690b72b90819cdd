"""Times as people write them, and local-time buckets for reports."""

from __future__ import annotations

import re
import time

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str | None, now: float | None = None) -> float | None:
    """`1h`, `7d`, `today`, `yesterday`, an ISO date or date-time → Unix time (None stays None)."""
    from datetime import datetime, timedelta

    if text is None or text == "":
        return None
    now = time.time() if now is None else now
    match = _RELATIVE.match(text.strip())
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    lowered = text.strip().lower()
    if lowered in ("today", "yesterday"):
        midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        if lowered == "yesterday":
            midnight -= timedelta(days=1)
        return midnight.timestamp()
    if lowered == "all":
        return None
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError as exc:
        raise ValueError(f"cannot read time '{text}': use 30m, 24h, 7d, today, or an ISO date") from exc


def local_bucket_start(moment: float, bucket_seconds: int) -> int:
    """Start of the local-time bucket holding `moment`: local midnight plus whole buckets (a day: midnight)."""
    from datetime import datetime

    midnight = datetime.fromtimestamp(moment).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    if bucket_seconds >= 86400:
        return int(midnight)  # a day with a daylight-saving change lasts 23 or 25 hours: still one bucket
    return int(midnight + (moment - midnight) // bucket_seconds * bucket_seconds)
