"""A client that hangs up on a non-streamed call: the upstream call is cancelled and the call recorded."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import read_body
from tests.servers import send_post, serve, wait_until


class StallingUpstream:
    """An upstream that never answers: it holds each request until its caller hangs up, and counts that."""

    def __init__(self) -> None:
        self.requests = 0
        self.hang_ups = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        self.requests += 1
        # Stalling is the behaviour under test; it ends when the caller (the proxy) hangs up.
        message = await asyncio.wait_for(receive(), timeout=60)
        if message["type"] == "http.disconnect":
            self.hang_ups += 1


@pytest.fixture
def stalling() -> Iterator[tuple[StallingUpstream, str]]:
    upstream = StallingUpstream()
    with serve(upstream) as url:
        yield upstream, url


CONFIGS = {
    # translated: Anthropic Messages in, chat out to a Kimi-style provider
    "translated": '[providers.baseten]\nbase_url = "{url}/v1"\n',
    # pass-through: the caller's own provider, bytes forwarded untouched
    "passthrough": '[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n',
}


@pytest.mark.parametrize("http", ["httptools", "h11"])
@pytest.mark.parametrize("path", list(CONFIGS))
def test_client_hanging_up_on_a_non_streamed_call_cancels_the_upstream_call(
    stalling: tuple[StallingUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    http: str,
) -> None:
    upstream, url = stalling
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    proxy = start_proxy(CONFIGS[path].format(url=url), http=http)
    body = orjson.dumps({"model": "claude-opus-5-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    port = int(proxy.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        send_post(sock, "/v1/messages", body)
        wait_until(lambda: upstream.requests == 1, what="the upstream to receive the call")
    # The client is gone: the proxy must hang up on the upstream too, not wait out its answer.
    wait_until(lambda: upstream.hang_ups == 1, what="the proxy to hang up on the upstream")
    record = proxy.sink.wait(1)[0]
    assert record.outcome == "client_cancelled"
    assert not record.streamed and record.provider == ("baseten" if path == "translated" else "anthropic")
    assert record.error is not None and "closed the connection" in record.error
    assert len(proxy.sink.records) == 1
