"""Small bounded in-memory state the proxy keeps between calls."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from switch import keys
from switch.protocols.ir import Message


class ReasoningCache:
    """Reasoning text by tool-call id, so it can be sent back even when a client drops it."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, str] = OrderedDict()

    def put(self, call_id: str, reasoning: str) -> None:
        """Remember `reasoning` for `call_id`, evicting the oldest entry when full."""
        self._entries[call_id] = reasoning
        self._entries.move_to_end(call_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def get(self, call_id: str) -> str | None:
        """The reasoning remembered for `call_id`, if any."""
        return self._entries.get(call_id)

    def __len__(self) -> int:
        return len(self._entries)


class KeyCache:
    """Provider keys, looked up at most every `ttl` seconds (the keyring is slow)."""

    def __init__(self, ttl: float = 30.0) -> None:
        self._ttl = ttl
        self._entries: dict[str, tuple[float, str | None]] = {}

    def get(self, provider: str, env_var: str | None) -> str | None:
        """The key for `provider`, or None."""
        now = time.monotonic()
        cached = self._entries.get(provider)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        value, _source = keys.lookup(provider, env_var)
        self._entries[provider] = (now, value)
        return value


class ResponseStore:
    """Recent Responses conversations by response id, for `previous_response_id`."""

    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    def put(self, response_id: str, messages: tuple[Message, ...]) -> None:
        """Remember the full conversation that ended in `response_id`."""
        self._entries[response_id] = messages
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def get(self, response_id: str) -> tuple[Message, ...] | None:
        """The conversation up to and including `response_id`, if still kept."""
        return self._entries.get(response_id)


class SessionAffinity:
    """The preset each live harness session started on, so a mid-session `switch use` never moves it.

    Keyed by (session, agent); entries idle for `ttl` seconds expire, and at most `capacity` are kept.
    """

    def __init__(self, ttl: float = 6 * 3600, capacity: int = 8192) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()

    def pin(self, session: str, agent: str | None, current: Any) -> Any:
        """The value pinned for this session and agent, pinning `current` if there is none yet."""
        key = (session, agent or "")
        now = time.monotonic()
        found = self._entries.get(key)
        if found is not None and now - found[0] < self.ttl:
            self._entries[key] = (now, found[1])
            self._entries.move_to_end(key)
            return found[1]
        self._entries[key] = (now, current)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return current
