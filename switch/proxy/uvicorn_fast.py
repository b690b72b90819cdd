"""The streamed-chunk fast path: chunks written straight to uvicorn's socket, past its per-message ASGI checks.

Streamed chunks are most of the proxy's writes, so on uvicorn's httptools protocol they are framed
here and written to the connection's transport. This is the one module that reads uvicorn's
private request cycle (`uvicorn.protocols.http.httptools_impl.RequestResponseCycle`, the object
behind the ASGI `send` bound method). It relies on these fields, and on nothing else of uvicorn:

    transport           the client's asyncio transport (written to)
    flow                uvicorn's FlowControl: `write_paused` (client buffer full), `drain()`, and
                        `resume_reading()` (so a paused socket still sees the client hang up)
    disconnected        the client has gone
    response_complete   the response has ended (nothing may be written after it)
    chunked_encoding    True when the response is chunked (decided by our headers)

When any of them is missing (another server, h11, a uvicorn that renamed them), `cycle_behind`
returns None and `Exchange` uses plain ASGI `send` calls: slower, never broken.
tests/proxy/test_uvicorn_fast_path.py checks the fields on the installed uvicorn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

HTTPTOOLS_MODULE = "uvicorn.protocols.http.httptools_impl"
CYCLE_FIELDS = ("transport", "flow", "disconnected", "response_complete", "chunked_encoding")
FLOW_FIELDS = ("write_paused", "drain", "resume_reading")

direct_streams = 0
"""Streams whose chunks went straight to uvicorn's socket (tests check the fast path engages)."""

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class HttptoolsCycle:
    """uvicorn's httptools request cycle behind one `send`, read only through the fields listed above."""

    __slots__ = ("cycle",)

    def __init__(self, cycle: Any) -> None:
        self.cycle = cycle

    @property
    def gone(self) -> bool:
        """Whether the client has disconnected."""
        return bool(self.cycle.disconnected)

    def hear_hangup(self) -> None:
        """Read the client's socket again once its request body is in, so a hang-up is seen.

        uvicorn pauses reading when a body chunk takes its buffer over 64 KiB and resumes only in
        `receive`. When the last chunk of a large body paused it, nothing calls `receive` again on
        this path, so the client's close was never read: a call whose client had left held its
        upstream and its body's bytes until the upstream answered. uvicorn's own `receive` resumes
        the same way; it pauses again by itself for a pipelined request.
        """
        cycle = self.cycle
        if not cycle.disconnected and not cycle.response_complete:
            cycle.flow.resume_reading()

    @property
    def write_paused(self) -> bool:
        """Whether the client's socket buffer is full (writes should wait for `drain`)."""
        return bool(self.cycle.flow.write_paused)

    async def drain(self) -> None:
        """Wait until the client's socket buffer has room."""
        await self.cycle.flow.drain()

    def try_write(self, data: bytes) -> bool:
        """Write one chunk unless the client's socket buffer is full: False then, and the caller awaits `drain`."""
        cycle = self.cycle
        # Inline, not through the properties above: this runs once per streamed chunk.
        if cycle.flow.write_paused and not cycle.disconnected:
            return False
        if not cycle.disconnected and not cycle.response_complete:
            cycle.transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        return True

    def write_chunk(self, data: bytes) -> None:
        """Write one chunk of a chunked body; dropped once the client has gone or the response ended."""
        cycle = self.cycle
        # A chunk written after the response ended (the client buffer was full meanwhile) would
        # corrupt the next response on this kept-alive connection; one to a departed client is dropped.
        if not cycle.disconnected and not cycle.response_complete:
            cycle.transport.write(b"%x\r\n%b\r\n" % (len(data), data))


def missing_fields(send: Send) -> list[str]:
    """The fields this module relies on that the cycle behind `send` lacks ('send' when it is no uvicorn cycle)."""
    cycle = getattr(send, "__self__", None)
    if cycle is None or type(cycle).__module__ != HTTPTOOLS_MODULE:
        return ["send"]
    missing = [name for name in CYCLE_FIELDS if not hasattr(cycle, name)]
    flow = getattr(cycle, "flow", None)
    missing += [f"flow.{name}" for name in FLOW_FIELDS if not hasattr(flow, name)]
    return missing


def cycle_behind(send: Send) -> HttptoolsCycle | None:
    """uvicorn's httptools request cycle behind `send`, when it has every field read here; else None."""
    # The same checks as `missing_fields`, without building its list: this runs once per call.
    cycle = getattr(send, "__self__", None)
    if cycle is None or type(cycle).__module__ != HTTPTOOLS_MODULE:
        return None
    for name in CYCLE_FIELDS:
        if not hasattr(cycle, name):
            return None
    flow = cycle.flow
    for name in FLOW_FIELDS:
        if not hasattr(flow, name):
            return None
    return HttptoolsCycle(cycle)


def direct_writer(send: Send) -> HttptoolsCycle | None:
    """The cycle behind `send` when a streamed body's chunks may be written to its socket directly.

    Only a chunked response qualifies (the framing is ours); the final chunk always goes through
    `send`, so uvicorn completes the response and keeps the connection.
    """
    cycle = cycle_behind(send)
    if cycle is None or cycle.cycle.chunked_encoding is not True:
        return None
    global direct_streams
    direct_streams += 1
    return cycle
