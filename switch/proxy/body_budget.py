"""The request bytes all calls may hold at once (`[server] max_buffered_body_bytes`).

Each body under `max_body_bytes` is fine alone, but eight 30 MB bodies at once took the proxy to 1 GB: a
call whose body would take the total over the budget gets a 503 with retry-after in its own API's format
(and its ledger row) instead. A body stays counted until its call ends, since retries and fallbacks
resend it; a declared Content-Length is counted before a byte is read.
"""

from __future__ import annotations

from switch.errors import ClientRequestError

RETRY_AFTER_S = "1"


class BodyBudget:
    """Bytes of request bodies held by the calls in flight, against a limit."""

    __slots__ = ("limit", "held", "refused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.refused = 0

    def take(self, size: int) -> None:
        """Count `size` more bytes as held, or raise a 503 `ClientRequestError` when they do not fit."""
        if self.held + size > self.limit:
            self.refused += 1
            raise ClientRequestError(
                f"switch proxy is holding {self.held} bytes of request bodies, and this one would take it over "
                f"its {self.limit}-byte budget ([server] max_buffered_body_bytes); retry shortly",
                status=503,
                retry_after=RETRY_AFTER_S,
            )
        self.held += size

    def give_back(self, size: int) -> None:
        """Stop counting `size` bytes (the call that held them has ended)."""
        self.held -= size
