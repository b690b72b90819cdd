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

log = logging.getLogger("switch.relay")

REJECTED_PROBE_SECONDS = 60.0
"""A plan said `rejected` with no reset time: native is tried again after this long."""
_ACCOUNT_CACHE = 64


def credential_of(headers: dict[str, str]) -> str:
    """The credential a native call carries (API key or bearer token, without `Bearer `); empty without one."""
    credential = headers.get("x-api-key") or headers.get("authorization") or ""
    scheme, _space, token = credential.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else credential


class PlanQuotas:
    """The last snapshot per (provider, account), and the accounts to skip until their reset."""

    def __init__(self, sink: Any = None, clock: Callable[[], float] = time.time) -> None:
        self.snapshots: dict[tuple[str, str], Snapshot] = {}
        self.resting: dict[tuple[str, str], float] = {}
        """Accounts a plan rejected, and until when (Unix seconds) calls that can go elsewhere skip them."""
        self._clock = clock
        self._submit: Callable[[Snapshot], None] | None = getattr(sink, "submit_quota", None)
        self._accounts: dict[str, str] = {}

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
        """Read one native answer's quota headers, if it has any (the pass-through's one hook)."""
        for name in response_headers:
            if name.startswith(PREFIXES):
                break
        else:
            if status != 429:
                return
        try:
            self._record(provider, self.account(request_headers), status, response_headers)
        except Exception:  # best effort: a quota bug never costs the caller its answer
            log.exception("could not read a native answer's rate-limit headers")

    def _record(self, provider: str, account: str, status: int, headers: dict[str, str]) -> None:
        now = self._clock()
        snapshot = read_snapshot(provider, account, status, headers, now)
        if snapshot is None:
            return
        key = (provider, account)
        until = snapshot.retry_until
        if snapshot.status == "rejected" and until is None:
            until = now + REJECTED_PROBE_SECONDS
        if until is not None and until > now and snapshot.status == "rejected":
            self.resting[key] = until
        else:
            self.resting.pop(key, None)
        if snapshot.same_as(self.snapshots.get(key)):
            return
        self.snapshots[key] = snapshot
        if self._submit is not None:
            self._submit(snapshot)

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
        latest: Snapshot | None = None
        for (name, _account), snapshot in self.snapshots.items():
            if name == provider and (latest is None or snapshot.observed_at > latest.observed_at):
                latest = snapshot
        if latest is None:
            return None
        for entry in latest.windows:
            if entry.name == window and (entry.resets_at is None or entry.resets_at > self._clock()):
                return entry.utilization
        return None
