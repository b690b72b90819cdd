"""Each native plan's quota as its answers last told it: a snapshot per provider and account, in memory.

`observe` runs once per native answer, on the event loop: it looks only for header names with the known
prefixes (no parsing unless one is there), reads them into a `Snapshot`, and hands it to the ledger's
writer only when it differs from the last one. `resting_until` tells the relay that a rejected account is
to be skipped until its reset. The account is a short hash of the caller's credential: the credential is
never kept beyond the hash's small cache here, never written, never logged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

from switch.protocols.ratelimits import PREFIXES, Snapshot, read_snapshot
from switch.proxy.scrubbing import credential_of

log = logging.getLogger("switch.relay")

REJECTED_PROBE_SECONDS = 60.0
"""A plan said `rejected` with no reset time: native is tried again after this long."""
_ACCOUNT_CACHE = 64


class PendingQuota:
    """One answer's quota headers, read into a `Snapshot` only when one is needed (mostly by the ledger's writer)."""

    __slots__ = ("account", "headers", "observed_at", "provider", "read", "status", "taken")

    def __init__(self, provider: str, account: str, status: int, headers: dict[str, str], observed_at: float) -> None:
        self.provider, self.account, self.status = provider, account, status
        self.headers, self.observed_at = headers, observed_at
        self.taken: Snapshot | None = None
        self.read = False

    def snapshot(self) -> Snapshot | None:
        """The snapshot these headers give (parsed once; the same from any thread)."""
        if not self.read:
            try:
                self.taken = read_snapshot(self.provider, self.account, self.status, self.headers, self.observed_at)
            except Exception:  # best effort, and the writer must not retry it forever: nothing to record
                log.exception("could not read a native answer's rate-limit headers")
            self.read = True
        return self.taken


class PlanQuotas:
    """The last answer's quota per (provider, account), and the accounts to skip until their reset."""

    def __init__(self, sink: Any = None, clock: Callable[[], float] = time.time) -> None:
        self.latest: dict[tuple[str, str], PendingQuota] = {}
        self.resting: dict[tuple[str, str], float] = {}
        """Accounts a plan rejected, and until when (Unix seconds) calls that can go elsewhere skip them."""
        self._clock = clock
        self._submit: Callable[[PendingQuota], None] | None = getattr(sink, "submit_quota", None)
        self._accounts: dict[str, str] = {}
        self._raw: dict[tuple[str, str], tuple[int, tuple[tuple[str, str], ...]]] = {}
        """The status and quota headers of each account's last answer, as they came (one per account seen)."""

    def account(self, request_headers: dict[str, str]) -> str:
        """A non-secret name for the caller's account: the first 12 hex digits of its credential's SHA-256."""
        credential = credential_of(request_headers)
        if not credential:
            return "none"
        known = self._accounts.get(credential)
        if known is None:
            if len(self._accounts) >= _ACCOUNT_CACHE:
                self._accounts.clear()
            known = self._accounts[credential] = "key-" + hashlib.sha256(credential.encode()).hexdigest()[:12]
        return known

    def observe(
        self, provider: str, request_headers: dict[str, str], status: int, response_headers: dict[str, str]
    ) -> None:
        """Note one native answer's quota headers, if it has any (the pass-through's one hook).

        A success is only compared with the account's last answer and handed on unparsed: the writer reads
        it. An error, or an answer for a resting account, is read at once: it decides where calls go."""
        raw = tuple(item for item in response_headers.items() if item[0].startswith(PREFIXES))
        if not raw and status != 429:
            return
        key = (provider, self.account(request_headers))
        seen = (status, raw)
        repeated = self._raw.get(key) == seen
        urgent = status >= 400 or key in self.resting
        if repeated and not urgent:
            return  # the very same figures as the last answer: nothing to read, nothing to write
        self._raw[key] = seen
        pending = PendingQuota(*key, status, dict(raw) | _retry_after(response_headers), self._clock())
        if urgent:
            try:
                self._rest(key, pending)
            except Exception:  # best effort: a quota bug never costs the caller its answer
                log.exception("could not read a native answer's rate-limit headers")
                return
            if repeated or pending.snapshot() is None:
                return  # the plan's rest is renewed; the ledger already says the same
        self.latest[key] = pending
        if self._submit is not None:
            self._submit(pending)

    def _rest(self, key: tuple[str, str], pending: PendingQuota) -> None:
        snapshot = pending.snapshot()
        now = pending.observed_at
        until = snapshot.retry_until if snapshot is not None else None
        rejected = snapshot is not None and snapshot.status == "rejected"
        if rejected and until is None:
            until = now + REJECTED_PROBE_SECONDS
        if rejected and until is not None and until > now:
            self.resting[key] = until
        else:
            self.resting.pop(key, None)

    def resting_until(self, provider: str, request_headers: dict[str, str]) -> float | None:
        """Until when this caller's account at `provider` is to be skipped (None: call it)."""
        if not self.resting:
            return None
        key = (provider, self.account(request_headers))
        until = self.resting.get(key)
        if until is None:
            return None
        if self._clock() >= until:
            del self.resting[key]  # its reset has passed: native is tried again
            return None
        return until

    def utilization(self, provider: str, window: str) -> float | None:
        """The latest utilization of `window` (e.g. `5h`) any account of `provider` reported, else None."""
        newest = max(
            (pending for (name, _account), pending in self.latest.items() if name == provider),
            key=lambda pending: pending.observed_at,
            default=None,
        )
        latest = newest.snapshot() if newest is not None else None
        if latest is None:
            return None
        for entry in latest.windows:
            if entry.name == window and (entry.resets_at is None or entry.resets_at > self._clock()):
                return entry.utilization
        return None


def _retry_after(headers: dict[str, str]) -> dict[str, str]:
    value = headers.get("retry-after")
    return {"retry-after": value} if value is not None else {}
