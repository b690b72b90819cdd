"""Client connection limits: the deadlines and the connection cap every connection of one server shares
(nginx's client_header_timeout, client_body_timeout, large_client_header_buffers and worker_connections;
the idle keep-alive timeout is uvicorn's `timeout_keep_alive`). `http_server` applies them.

uvicorn alone times out nothing but idle keep-alive connections: one that sends nothing, half its headers
or half its body stays open forever, and enough of them exhaust the file descriptors.

At the cap the oldest connection that is not carrying a request (fresh or idle between requests) is
closed to make room, as nginx drains its reusable connections: a flood of silent connections then only
pushes out its own members, and a real call, which sends its headers at once, gets in. When every
connection is carrying a request, the new one gets a 503 and is closed.
"""

from __future__ import annotations

from typing import Any


def canned_close(status: bytes, error_type: str, message: str, extra: bytes = b"") -> bytes:
    """A whole JSON error response that closes the connection, written before any request was served."""
    body = b'{"type":"error","error":{"type":"%s","message":"%s"}}' % (error_type.encode(), message.encode())
    head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n%sconnection: close\r\ncontent-length: %d\r\n\r\n"
    return head % (status, extra, len(body)) + body


REFUSED = canned_close(
    b"503 Service Unavailable", "overloaded_error", "switch proxy: too many client connections", b"retry-after: 1\r\n"
)
TOO_LARGE = canned_close(b"431 Request Header Fields Too Large", "invalid_request_error", "request headers over 64 KiB")


class ConnectionLimits:
    """The limits one server applies, and its connections that carry no request, oldest first."""

    def __init__(self, header_timeout: float, body_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_connections = max_connections
        self.live: set[Any] = set()
        self.waiting: dict[Any, None] = {}
        """Connections not carrying a request, in the order they became so (each has `close_now()`)."""

    def make_room(self) -> bool:
        """Whether a new connection fits, closing the oldest waiting one if that makes it fit."""
        if len(self.live) < self.max_connections:
            return True
        if not self.waiting:
            return False
        oldest = next(iter(self.waiting))
        oldest.close_now()
        return True
