"""The streamed-chunk fast path: on switch's own server (`http_server`, as `switch serve` runs) chunks go
straight to the socket; on any other ASGI server (uvicorn's httptools or h11 protocols) plain `send` works."""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import pytest

from switch.proxy import http_server
from tests.conftest import Proxy, kimi_proxy_on
from tests.fake_upstream import FakeChatUpstream, Turn

TEXT = "The direct writer frames every chunk itself. " * 20


@pytest.mark.parametrize(("http", "direct"), [("switch", True), ("httptools", False), ("h11", False)])
def test_streams_use_the_direct_writer_on_switchs_server_and_plain_send_elsewhere(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    http: str,
    direct: bool,
) -> None:
    proxy = kimi_proxy_on(fake_chat, start_proxy, monkeypatch, http)
    assert proxy.upstream is not None
    proxy.upstream.script(Turn(text=TEXT, reasoning="thinking it over", fragment=5))
    before = http_server.direct_streams
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    with client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": "x"}]) as stream:
        final = stream.get_final_message()
    assert http_server.direct_streams - before == (1 if direct else 0)
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[1].text == TEXT  # type: ignore[union-attr]
    assert proxy.sink.wait(1)[0].outcome == "completed"
    # The connection is reused for a second stream: the direct writer left it in a clean state.
    with client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": "y"}]) as stream:
        assert stream.get_final_message().content[-1].text == "Hello from the fake upstream."  # type: ignore[union-attr]
    assert http_server.direct_streams - before == (2 if direct else 0)
