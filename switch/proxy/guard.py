"""Request guard: no browser Origin, and either loopback Host names or a local access token.

A web page the user visits can make the browser send requests to localhost; checking `Host`
stops DNS rebinding and checking `Origin` stops cross-site requests, so no page can spend the
user's keys through the proxy. With `[server] access_token` set, the token is the proof instead
of the Host: remote clients address the machine by whatever name they know it by, and a page
cannot send a header it does not know.
"""

from __future__ import annotations

import hmac
from typing import Any

import orjson

from switch.proxy.exchange import Receive, Scope, Send

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """ASGI middleware applying the checks above before any endpoint runs."""

    def __init__(self, app: Any, access_token: str | None = None) -> None:
        self.app = app
        self.access_token = access_token or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = ""
        origin = None
        token = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value
            elif name == b"x-switch-token":
                token = value.decode("latin-1")
        if origin is not None:
            await _refuse(send, 403, "browser requests (with an Origin header) are not accepted")
            return
        if self.access_token is None:
            if _host_name(host.lower()) not in LOOPBACK_HOSTS:
                await _refuse(send, 403, "requests must address the proxy by a loopback host name")
                return
        elif token is None or not hmac.compare_digest(token.encode("latin-1"), self.access_token.encode()):
            await _refuse(send, 401, "missing or wrong x-switch-token")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "permission_error" if status == 403 else "authentication_error",
                "message": message,
            },
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
