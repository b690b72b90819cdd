"""The streamed-chunk fast path: on uvicorn's httptools protocol chunks go straight to its socket
(uvicorn_fast.py reads uvicorn's private request-cycle fields); on h11 plain ASGI `send` still works.
If a uvicorn upgrade renames those fields, the fast path silently turns off: this test says so."""

from __future__ import annotations

from collections.abc import Callable

import anthropic
import pytest

from switch.proxy import uvicorn_fast
from tests.conftest import Proxy, kimi_proxy_on
from tests.fake_upstream import FakeChatUpstream, Turn

TEXT = "The direct writer frames every chunk itself. " * 20


@pytest.mark.parametrize(("http", "direct"), [("httptools", True), ("h11", False)])
def test_streams_use_the_direct_writer_on_httptools_and_plain_send_on_h11(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    http: str,
    direct: bool,
) -> None:
    proxy = kimi_proxy_on(fake_chat, start_proxy, monkeypatch, http)
    assert proxy.upstream is not None
    proxy.upstream.script(Turn(text=TEXT, reasoning="thinking it over", fragment=5))
    before = uvicorn_fast.direct_streams
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    with client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": "x"}]) as stream:
        final = stream.get_final_message()
    assert uvicorn_fast.direct_streams - before == (1 if direct else 0)
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[1].text == TEXT  # type: ignore[union-attr]
    assert proxy.sink.wait(1)[0].outcome == "completed"
    # The connection is reused for a second stream: the direct writer left it in a clean state.
    with client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": "y"}]) as stream:
        assert stream.get_final_message().content[-1].text == "Hello from the fake upstream."  # type: ignore[union-attr]
    assert uvicorn_fast.direct_streams - before == (2 if direct else 0)
