"""The seam between the paths and whatever carries a call upstream: send a request, get a status, headers, a body.

Modelled on httpx's transport interface. Two implementations: the HTTP/1.1 pool (`upstream.UpstreamPool`,
over `http1`) and LiteLLM's SDK (`litellm_upstream.LiteLLMTransport`); tests can plug an in-memory one.
The translated and pass-through paths, the fallback and the meter see only these two shapes.

Contract: `send` returns once the status and headers are in (for LiteLLM: its first chunk), the wait
bounded by `header_timeout` when set. Not reaching the upstream, or not hearing from it, raises
`UpstreamError` (its `kind` says how; `failures` maps it to an outcome) with no key in its message; an
upstream that refuses answers with its status and error body. The body must be read (`chunks()`,
`read()`) or the answer `close()`d, which is what hands a reusable connection back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from switch.routing.resolve import Target


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs microseconds per call
class UpstreamRequest:
    """One call to send: where, with which headers and body, and for which target."""

    url: str
    headers: list[tuple[str, str]]
    body: bytes
    target: Target
    key: str = ""
    """The provider key, for a transport that takes it apart from the headers (LiteLLM); never logged."""
    header_timeout: float | None = None
    """The longest wait for the answer to begin (a time-to-first-token limit); None: the read timeout."""
    method: str = "POST"


class UpstreamAnswer(Protocol):
    """An upstream's answer: status and headers at once, the body as it arrives."""

    status_code: int
    headers: dict[str, str]

    async def wait_body(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the first body bytes (or the end); False on timeout."""
        ...

    def decode_content(self, enabled: bool) -> None:
        """Whether `chunks()` yields decompressed bytes."""
        ...

    def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive."""
        ...

    async def read(self, limit: int = ...) -> bytes:
        """The whole body."""
        ...

    def close(self) -> None:
        """Give up on the rest of the body."""
        ...


class Transport(Protocol):
    """What carries a call to an upstream and its answer back."""

    async def send(self, request: UpstreamRequest) -> UpstreamAnswer:
        """Send `request`; its answer once the status and headers are in."""
        ...

    async def aclose(self) -> None:
        """Close what this transport holds open (the proxy is stopping)."""
        ...


class WholeAnswer:
    """An answer whose body is already complete in memory (an in-memory transport's, or LiteLLM's)."""

    __slots__ = ("status_code", "headers", "body")

    def __init__(self, status_code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.body = body
        self.headers = headers if headers is not None else {"content-type": "application/json"}

    async def wait_body(self, timeout: float) -> bool:
        """The body is here."""
        return True

    def decode_content(self, enabled: bool) -> None:
        """Nothing to decode."""

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body in one piece."""
        if self.body:
            yield self.body

    async def read(self, limit: int = 0) -> bytes:
        """The body."""
        return self.body

    def close(self) -> None:
        """Nothing held open."""
