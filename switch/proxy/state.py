"""Small bounded in-memory state the proxy keeps between calls."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from switch import keys
from switch.errors import KeyMissingError
from switch.protocols.ir import DocumentPart, Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

log = logging.getLogger(__name__)


class ReasoningCache:
    """Reasoning text by tool-call id, so it can be sent back even when a client drops it.

    Bounded in entries and in characters: one reasoning can run to tens of KB, and 4,096 of those
    would hold a long-running proxy's memory at hundreds of MB. The newest entry is always kept.
    """

    def __init__(self, capacity: int = 4096, max_chars: int = 4 * 1024 * 1024) -> None:
        self._capacity = capacity
        self._max_chars = max_chars
        self._entries: OrderedDict[str, str] = OrderedDict()
        self.chars = 0
        """Characters of reasoning held now."""

    def put(self, call_id: str, reasoning: str) -> None:
        """Remember `reasoning` for `call_id`, evicting the oldest entries while over either bound."""
        replaced = self._entries.pop(call_id, None)
        if replaced is not None:
            self.chars -= len(replaced)
        self._entries[call_id] = reasoning
        self.chars += len(reasoning)
        while len(self._entries) > 1 and (len(self._entries) > self._capacity or self.chars > self._max_chars):
            _, evicted = self._entries.popitem(last=False)
            self.chars -= len(evicted)

    def get(self, call_id: str) -> str | None:
        """The reasoning remembered for `call_id`, if any."""
        return self._entries.get(call_id)

    def __len__(self) -> int:
        return len(self._entries)


class KeyCache:
    """Provider keys held in memory for the request path, which only ever reads a dict.

    A daemon thread reads them (environment, secure OS keyring, key file) at start and every
    `refresh_s` seconds, or sooner after a call found no key: a keyring that is slow, locked or
    waiting for the user to answer a prompt holds up that thread and never a call. Keys are checked
    once, when read: one that cannot be sent in a header is kept out, with the reason.
    """

    def __init__(self, providers: Mapping[str, str | None], refresh_s: float = 30.0, min_gap_s: float = 2.0) -> None:
        self._providers = dict(providers)
        self._refresh_s = refresh_s
        self._min_gap_s = min_gap_s
        self._keys: dict[str, str] = {}
        self._problems: dict[str, str] = {}
        self._loaded = threading.Event()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported: set[str] = set()

    def get(self, provider: str) -> str | None:
        """The usable key for `provider`, or None."""
        return self._keys.get(provider)

    def unavailable(self, provider: str, env_var: str | None) -> tuple[int, str]:
        """The status and message for a call whose provider has no usable key (never the key itself)."""
        # The user may have just stored or exported it: read again soon, off the request path.
        self._wake.set()
        problem = self._problems.get(provider)
        if problem is not None:
            return 401, problem
        if not self._loaded.is_set():
            return 503, (
                f"switch is still reading the {provider} key from the OS keyring "
                "(it may be waiting for you to unlock it); try again in a moment"
            )
        return 401, KeyMissingError(provider, env_var).message

    def load(self) -> None:
        """Read every provider's key once (blocking: never call it on the event loop)."""
        found = keys.find_all(self._providers, previous=self._keys)
        fresh = {name: entry.key for name, entry in found.items() if entry.key is not None}
        problems = {name: entry.problem for name, entry in found.items() if entry.problem is not None}
        # Swap whole dicts: a reader on the event loop sees the old set or the new one, never half.
        self._keys, self._problems = fresh, problems
        self._loaded.set()
        for problem in sorted(set(problems.values()) - self._reported):
            log.warning("%s", problem)
        self._reported = set(problems.values())

    def start(self) -> None:
        """Start the reading thread (the first read begins at once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="switch-keys", daemon=True)
            self._thread.start()

    def wait_loaded(self, timeout: float) -> bool:
        """Block until the first read finished (True) or `timeout` passed (False)."""
        return self._loaded.wait(timeout)

    def reconfigure(self, providers: Mapping[str, str | None]) -> None:
        """Read the keys of this provider set (name -> env var) from now on, starting soon."""
        # One assignment: the reading thread sees the old mapping or the new one, never half.
        self._providers = dict(providers)
        self._wake.set()

    def wake(self) -> None:
        """Read the keys again soon (after a config change, or a call that found none)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the reading thread; a read stuck in the keyring is abandoned (the thread is a daemon)."""
        self._stopped.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            began = time.monotonic()
            try:
                self.load()
            except Exception:  # the thread must not die: a later read may succeed
                log.exception("could not read provider keys")
            self._wake.wait(self._refresh_s)
            # A flood of calls without a key must not turn into back-to-back keyring reads.
            self._stopped.wait(max(0.0, self._min_gap_s - (time.monotonic() - began)))
            self._wake.clear()


def _part_chars(part: Part) -> int:
    if isinstance(part, ToolResultPart):
        return sum(_part_chars(inner) for inner in part.content)
    if isinstance(part, ToolCallPart):
        return len(part.arguments)
    if isinstance(part, (TextPart, ReasoningPart)):
        return len(part.text)
    if isinstance(part, DocumentPart):
        return len(part.data or "") + len(part.text or "") + len(part.url or "")
    return len(part.data or "") + len(part.url or "")


def conversation_chars(messages: tuple[Message, ...]) -> int:
    """The characters a conversation's parts carry: what keeping it costs, within a small factor."""
    return sum(_part_chars(part) for message in messages for part in message.parts)


class ResponseStore:
    """Recent Responses conversations by response id, for `previous_response_id`.

    Bounded in entries and in characters: a harness that sends its whole input on every call with
    `store` left on would otherwise keep 128 copies of its longest conversations. A chain counts its
    shared history once per entry, so the bound errs on the side of memory. The newest is always kept.
    """

    def __init__(self, capacity: int = 128, max_chars: int = 32 * 1024 * 1024) -> None:
        self.capacity = capacity
        self.max_chars = max_chars
        self._entries: OrderedDict[str, tuple[tuple[Message, ...], int]] = OrderedDict()
        self.chars = 0
        """Characters of the conversations held now."""

    def put(self, response_id: str, messages: tuple[Message, ...]) -> None:
        """Remember the full conversation that ended in `response_id`."""
        replaced = self._entries.pop(response_id, None)
        if replaced is not None:
            self.chars -= replaced[1]
        size = conversation_chars(messages)
        self._entries[response_id] = (messages, size)
        self.chars += size
        while len(self._entries) > 1 and (len(self._entries) > self.capacity or self.chars > self.max_chars):
            _, (_, evicted) = self._entries.popitem(last=False)
            self.chars -= evicted

    def get(self, response_id: str) -> tuple[Message, ...] | None:
        """The conversation up to and including `response_id`, if still kept."""
        found = self._entries.get(response_id)
        return None if found is None else found[0]


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
