"""A native answer's rate-limit headers read into one plan-quota snapshot (pure: the clock is an argument).

Three header families (see docs/protocols/native-quota.md for where each name and format comes from):
Anthropic's subscription `anthropic-ratelimit-unified-*` (status, each window's utilization as a fraction
and its reset in Unix seconds, the binding window), Codex's ChatGPT-plan `x-codex-primary-*` /
`x-codex-secondary-*` (used percent, window minutes, reset in Unix seconds), and the API keys'
`anthropic-ratelimit-{requests,tokens,...}-*` (RFC 3339 resets) and `x-ratelimit-*` (durations like `6m0s`).
Anything unreadable is left out, never raised: a snapshot is best effort and a header is outside input.
"""

from __future__ import annotations

import calendar
import math
import re

from switch.values import value

STATUSES = ("allowed", "allowed_warning", "rejected")
UNIFIED = "anthropic-ratelimit-unified-"
CODEX = "x-codex-"
ANTHROPIC_KEY = "anthropic-ratelimit-"
OPENAI_KEY = "x-ratelimit-"
PREFIXES = (ANTHROPIC_KEY, CODEX, OPENAI_KEY)
"""A response header starting with none of these carries no quota (the only test on the hot path)."""
_UNIFIED_WINDOWS = ("5h", "7d", "7d_oi")
"""The plan windows (overage, the extra-usage credit, is not a window of the plan and is left out)."""
_CODEX_WINDOWS = ("primary", "secondary")
_KEY_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_RETRY_SECONDS = 7 * 86400.0
"""A retry-after beyond a week is read as a week: a hostile or broken header cannot park a plan for years."""


@value
class Window:
    """One limit of a plan: how much of it is used (0..1) and when it resets (Unix seconds; None: unknown)."""

    name: str
    utilization: float
    resets_at: float | None = None
    status: str | None = None


@value
class Snapshot:
    """What one native answer said about its account's plan; `account` is never the credential itself."""

    provider: str
    account: str
    source: str
    """unified (Claude subscription), codex (ChatGPT plan), or api (an API key's request/token limits)."""
    status: str | None
    windows: tuple[Window, ...]
    binding: str | None
    """The window the provider names as the one that decides (Anthropic's representative claim)."""
    retry_until: float | None
    """Until when the provider asked not to be called (a 429's retry-after or reset), Unix seconds."""
    observed_at: float


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        number = float(text.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _fraction(text: str | None) -> float | None:
    number = _number(text)
    return None if number is None else min(1.0, max(0.0, number))


def _epoch(text: str | None) -> float | None:
    number = _number(text)
    return number if number is not None and 0 < number < 1e11 else None


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?")


def _timestamp(text: str | None) -> float | None:
    """An RFC 3339 time (Anthropic's API-key resets) as Unix seconds; no offset is read as UTC.

    Parsed by hand, not with `datetime`: this package reads no clock and no local time zone."""
    match = _RFC3339.fullmatch(text.strip()) if text else None
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    # Year 0 is a valid four-digit match but no calendar year (`calendar.monthrange` raises on it).
    if not (
        year >= 1 and 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1] and hour < 24 and minute < 60
    ):
        return None
    if second > 60:
        return None
    offset = 0
    if match.group(9):
        offset = (int(match.group(10)) * 60 + int(match.group(11))) * 60 * (1 if match.group(9) == "+" else -1)
    fraction = float(match.group(7)) if match.group(7) else 0.0
    return calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0)) + fraction - offset


def _duration(text: str | None) -> float | None:
    """OpenAI's `x-ratelimit-reset-*` form (`1s`, `6m0s`, `20ms`, `1h2m3.5s`) in seconds."""
    if not text:
        return None
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        return None
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def _status(text: str | None) -> str | None:
    return text if text in STATUSES else None


def retry_seconds(text: str | None) -> float | None:
    """A `retry-after` in seconds (a number; an HTTP date is left to the provider's reset headers)."""
    number = _number(text)
    return None if number is None or number < 0 else min(number, MAX_RETRY_SECONDS)


def _unified(headers: dict[str, str]) -> tuple[str | None, list[Window], str | None, float | None]:
    windows = []
    for name in _UNIFIED_WINDOWS:
        utilization = _fraction(headers.get(f"{UNIFIED}{name}-utilization"))
        resets_at = _epoch(headers.get(f"{UNIFIED}{name}-reset"))
        status = _status(headers.get(f"{UNIFIED}{name}-status"))
        if utilization is None and resets_at is None and status is None:
            continue
        windows.append(Window(name, utilization or 0.0, resets_at, status))
    claim = headers.get(f"{UNIFIED}representative-claim")
    binding = {"five_hour": "5h", "seven_day": "7d"}.get(claim or "", claim[:32] if claim else None)
    return _status(headers.get(f"{UNIFIED}status")), windows, binding, _epoch(headers.get(f"{UNIFIED}reset"))


def _codex(headers: dict[str, str]) -> tuple[list[Window], str | None]:
    windows = []
    for slot in _CODEX_WINDOWS:
        used = _number(headers.get(f"{CODEX}{slot}-used-percent"))
        if used is None:
            continue
        minutes = _number(headers.get(f"{CODEX}{slot}-window-minutes"))
        name = _window_name(minutes) if minutes else slot
        windows.append(Window(name, min(1.0, max(0.0, used / 100)), _epoch(headers.get(f"{CODEX}{slot}-reset-at"))))
    reached = headers.get(f"{CODEX}rate-limit-reached-type")
    return windows, reached[:32] if reached else None


def _window_name(minutes: float) -> str:
    """`300` minutes → `5h`, `10080` → `7d`: the names Claude Code's windows go by."""
    if minutes >= 1440 and minutes % 1440 == 0:
        return f"{int(minutes // 1440)}d"
    if minutes >= 60 and minutes % 60 == 0:
        return f"{int(minutes // 60)}h"
    return f"{int(minutes)}m"


def _api_key(headers: dict[str, str], now: float) -> list[Window]:
    windows = []
    for limit in _KEY_LIMITS:
        ceiling = _number(headers.get(f"{ANTHROPIC_KEY}{limit}-limit"))
        if ceiling is not None and ceiling > 0:
            remaining = _number(headers.get(f"{ANTHROPIC_KEY}{limit}-remaining"))
            resets_at = _timestamp(headers.get(f"{ANTHROPIC_KEY}{limit}-reset"))
        else:
            # Azure's OpenAI answers `-1` for a limit it does not apply: no window, not "all used".
            ceiling = _number(headers.get(f"{OPENAI_KEY}limit-{limit}"))
            if ceiling is None or ceiling <= 0:
                continue
            remaining = _number(headers.get(f"{OPENAI_KEY}remaining-{limit}"))
            seconds = _duration(headers.get(f"{OPENAI_KEY}reset-{limit}"))
            resets_at = now + seconds if seconds is not None else None
        if remaining is None:
            continue
        used = min(1.0, max(0.0, 1 - remaining / ceiling))
        windows.append(Window(limit, used, resets_at))
    return windows


def read_snapshot(
    provider: str, account: str, status_code: int, headers: dict[str, str], now: float
) -> Snapshot | None:
    """The snapshot one native answer's headers (lower-case names) give, else None (no quota headers)."""
    status, windows, binding, reset = _unified(headers)
    source = "unified"
    if status is None and not windows:
        codex_windows, reached = _codex(headers)
        windows, binding, source = codex_windows, reached, "codex"
        if reached:
            status = "rejected"
        elif windows:
            status = "allowed"
    if not windows and status is None:
        windows, source = _api_key(headers, now), "api"
        if not windows and status_code != 429:
            return None
    retry_until = None
    if status_code == 429:
        seconds = retry_seconds(headers.get("retry-after"))
        if seconds is not None:
            retry_until = now + seconds
        elif reset is not None and reset > now:
            retry_until = reset
        else:
            retry_until = max((w.resets_at for w in windows if w.resets_at and w.resets_at > now), default=None)
        if retry_until is not None:
            status = "rejected"
        elif not windows and status is None:
            return None  # a bare 429: nothing to say about the plan, and nothing to wait for
    elif status == "rejected" and reset is not None:
        retry_until = reset
    return Snapshot(provider, account, source, status, tuple(windows), binding, retry_until, now)
