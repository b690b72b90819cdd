"""Request guard: no browser Origin, and either loopback Host names or a local access token.

A web page the user visits can make the browser send requests to localhost; checking `Host`
stops DNS rebinding and checking `Origin` stops cross-site requests, so no page can spend the
user's keys through the proxy. With `[server] access_token` set, the token is the proof instead
of the Host: remote clients address the machine by whatever name they know it by, and a page
cannot send a header it does not know.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

import orjson

from switch.proxy.exchange import Receive, Scope, Send

RefusalRecorder = Callable[[Scope, int, str], None]
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """ASGI middleware applying the checks above before any endpoint runs."""

    def __init__(
        self, app: Any, access_token: str | None = None, on_refused_upgrade: RefusalRecorder | None = None
    ) -> None:
        self.app = app
        self.access_token = access_token or None
        # Records a refused WebSocket upgrade in the ledger (an HTTP refusal is the caller's to see, and
        # costs nothing; an upgrade Codex retries would otherwise leave no trace of why it fell back).
        self.on_refused_upgrade = on_refused_upgrade

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif kind == "http":
            await _refuse(send, *refusal)
        else:
            await receive()  # websocket.connect
            await refuse_upgrade(scope, send, refusal[0], _body(*refusal))
            if self.on_refused_upgrade is not None:
                self.on_refused_upgrade(scope, *refusal)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and reason to refuse this request (or upgrade) with; None when it may proceed."""
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
            return 403, "browser requests (with an Origin header) are not accepted"
        if self.access_token is None:
            if _host_name(host.lower()) not in LOOPBACK_HOSTS:
                return 403, "requests must address the proxy by a loopback host name"
        elif token is None or not hmac.compare_digest(token.encode("latin-1"), self.access_token.encode()):
            return 401, "missing or wrong x-switch-token"
        return None


def _body(status: int, message: str) -> bytes:
    return orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "permission_error" if status == 403 else "authentication_error",
                "message": message,
            },
        }
    )


async def _refuse(send: Send, status: int, message: str) -> None:
    body = _body(status, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def refuse_upgrade(scope: Scope, send: Send, status: int, body: bytes) -> None:
    """Answer a WebSocket upgrade with a plain HTTP response the client can read (ASGI's
    `websocket.http.response` extension), or with a close where the server lacks it."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        # 1008: policy violation (RFC 6455 §7.4.1); uvicorn turns a close before accept into a 403.
        await send({"type": "websocket.close", "code": 1008})
