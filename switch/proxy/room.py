"""Context windows on the route: each target's limits, and which targets can hold a call's prompt.

A target's window and output limit come from `switch.ledger.limits` when it is resolved (once per
reference). A call's prompt is estimated only when some window on its route could be too small for it,
so the usual call pays one comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from switch.errors import RoutingError
from switch.ledger.limits import LimitTable
from switch.protocols.ir import Request
from switch.protocols.tokens import estimate_input_tokens
from switch.routing.resolve import Target
from switch.values import evolve


def with_limits(target: Target, limits: LimitTable) -> Target:
    """The target with its model's window and output limit (a native target's are the harness's own business)."""
    if target.native:
        return target
    found = limits.lookup(target.provider, target.model)
    chat = target.chat
    if chat is not None and found.output_limit is not None:
        cap = min(chat.max_output_tokens or found.output_limit, found.output_limit)
        # The chat body's default output request must not exceed the model's limit either.
        chat = replace(chat, max_output_tokens=cap)
    return replace(target, chat=chat, context_window=found.context_window, output_limit=found.output_limit)


def clamped(request: Request, target: Target) -> Request:
    """The request with `max_tokens` no larger than what the target's model can give."""
    limit = target.output_limit
    if limit is None or request.max_output_tokens is None or request.max_output_tokens <= limit:
        return request
    return evolve(request, max_output_tokens=limit)


class Room:
    """Whether a call's prompt fits each target's context window, estimated only when a window could matter.

    The estimate (`switch.protocols.tokens`) walks the whole request, so it is made only when the body has
    at least as many bytes as the smallest known window has tokens: below that no estimate can exceed it."""

    __slots__ = ("resolve", "request", "body_bytes", "fallback", "estimate", "needed", "outgrown")

    def __init__(self, resolve: Callable[[str], Target], request: Request, body_bytes: int, fallback: bool) -> None:
        self.resolve = resolve
        self.request = request
        self.body_bytes = body_bytes
        self.fallback = fallback
        self.estimate = 0
        self.needed = 0
        self.outgrown = False
        """True once a target of the role's own was passed over or refused the prompt as too long."""

    def _window(self, reference: str) -> int | None:
        try:
            return self.resolve(reference).context_window
        except RoutingError:
            return None  # reported when the loop reaches it

    def smallest_window(self, references: tuple[str, ...]) -> int | None:
        """The smallest known window among `references` (the relay keeps it per route: see `size_up`)."""
        windows = [window for window in map(self._window, references) if window is not None]
        return min(windows) if windows else None

    def size_up(self, smallest_window: int | None) -> None:
        """Estimate the prompt when the route's smallest known window is small enough for it to matter."""
        if self.fallback and smallest_window is not None and self.body_bytes >= smallest_window:
            self.estimate = estimate_input_tokens(self.request)
            self.needed = self.estimate

    def holds(self, target: Target) -> bool:
        """Whether the target's window (unknown: yes) holds the prompt."""
        window = target.context_window
        return not self.fallback or window is None or not self.needed or window >= self.needed

    def may_hold(self, reference: str, is_long: bool) -> bool:
        """Whether a later target of the route could serve the call, were this one to fail."""
        if is_long and not self.outgrown:
            return False
        if not self.fallback or not self.needed:
            return True
        window = self._window(reference)
        return window is None or window >= self.needed

    def may_outgrow(self, reference: str, current: Target) -> bool:
        """Whether a later target might hold a prompt `current` refused as too long (a larger or unknown window)."""
        window = self._window(reference)
        return window is None or current.context_window is None or window > current.context_window

    def outgrow(self, target: Target) -> None:
        """`target` refused the prompt as too long: later targets need a larger window than it has."""
        self.outgrown = True
        if self.fallback and target.context_window is not None:
            self.needed = max(self.needed, target.context_window + 1)
