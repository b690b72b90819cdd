"""HTTP clients for upstream providers: one pooled httpx client per provider.

The transport is a seam: tests and benchmarks inject one; production uses httpx's default pool.
Clients ignore proxy environment variables so a loopback upstream is never sent elsewhere.
"""

from __future__ import annotations

import httpx

from switch.config import Server


class UpstreamPool:
    """Lazily created, long-lived clients keyed by provider name."""

    def __init__(self, server: Server, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._server = server
        self._transport = transport
        self._clients: dict[str, httpx.AsyncClient] = {}

    def client(self, provider: str) -> httpx.AsyncClient:
        """The client for `provider`, created on first use."""
        client = self._clients.get(provider)
        if client is None:
            timeout = httpx.Timeout(
                connect=self._server.connect_timeout,
                read=self._server.read_timeout,
                write=60.0,
                pool=30.0,
            )
            limits = httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=60)
            client = httpx.AsyncClient(
                timeout=timeout,
                limits=limits,
                transport=self._transport,
                trust_env=False,
                follow_redirects=False,
            )
            self._clients[provider] = client
        return client

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
