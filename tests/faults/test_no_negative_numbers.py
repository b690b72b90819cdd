"""No negative or impossible numbers: whatever an upstream streams or answers, for every inbound × upstream
pair, the counts a call is recorded with (reported usage or the estimate from what the client was sent)
are at least 0; and through the real proxy, ledger and metrics never go down."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.ir import UpstreamFormatError, UpstreamReportedError
from switch.protocols.sse import SseDecoder
from switch.protocols.tools import CustomCallUnwrapper, ToolIndex
from switch.proxy.upstream_apis import UPSTREAMS
from tests.conftest import Proxy
from tests.fake_upstream import Reply
from tests.faults.test_upstream_fuzz import (
    INBOUNDS,
    PATHS,
    REQUESTS,
    UPSTREAM_APIS,
    client_body,
    fuzzed_body,
    fuzzed_stream,
)

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def _encoded(upstream_api: str, inbound_api: str, data: bytes) -> Any:
    """The client encoder after upstream stream `data` went through it (ended or failed, as the relay does)."""
    upstream, inbound = UPSTREAMS[upstream_api], INBOUNDS[inbound_api]
    request = REQUESTS[(inbound_api, True)]
    index = ToolIndex.of(request.tools)
    encoder = inbound.new_encoder(request, 10, "resp_n" if inbound_api == "openai-responses" else "msg_n")
    sink = CustomCallUnwrapper(encoder, index) if upstream.function_only and index.custom else encoder
    decoder = upstream.new_decoder(sink, index)
    sse = SseDecoder()
    try:
        for event in [*sse.feed(data), *sse.flush()]:
            decoder.feed(event.data)
        if decoder.done or decoder.finished:
            encoder.end()
        else:
            encoder.fail(502, "cut short")
    except (UpstreamFormatError, UpstreamReportedError):
        encoder.fail(502, "bad upstream")
    return encoder


@given(upstream_api=st.sampled_from(UPSTREAM_APIS), data=st.data())
def test_every_stream_leaves_counts_and_the_output_estimate_at_least_zero(upstream_api: str, data: Any) -> None:
    stream = data.draw(fuzzed_stream(upstream_api))
    for inbound_api in PATHS:
        encoder = _encoded(upstream_api, inbound_api, stream)
        # With no usage from the upstream, the output estimate is made from this count.
        assert encoder.emitted_chars >= 0, (inbound_api, encoder.emitted_chars)
        for name in USAGE_FIELDS:
            assert getattr(encoder.final_usage, name) >= 0, (inbound_api, name)


@given(upstream_api=st.sampled_from(UPSTREAM_APIS), data=st.data())
def test_every_body_leaves_counts_at_least_zero(upstream_api: str, data: Any) -> None:
    body = orjson.loads(data.draw(fuzzed_body(upstream_api)))
    if not isinstance(body, dict):
        return
    request = REQUESTS[("openai-chat", False)]
    try:
        result = UPSTREAMS[upstream_api].response_to_ir(body, ToolIndex.of(request.tools))
    except (UpstreamFormatError, UpstreamReportedError):
        return
    for name in USAGE_FIELDS:
        assert getattr(result.usage, name) >= 0, name


def _anthropic_stream_without_message_delta() -> bytes:
    message = {
        "id": "msg_up",
        "type": "message",
        "role": "assistant",
        "model": "up-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(body) + b"\n\n" for name, body in events)


def test_an_anthropic_stream_without_usage_to_a_chat_client_records_no_negative_tokens(
    multi_proxy: Callable[[str], Proxy],
) -> None:
    proxy = multi_proxy("anthropic")
    assert proxy.upstream is not None
    proxy.upstream.script(Reply(200, [_anthropic_stream_without_message_delta()]))
    response = httpx.post(proxy.url + PATHS["openai-chat"], json=client_body("openai-chat", True), timeout=20)
    assert response.status_code == 200 and b"[DONE]" in response.content
    (record,) = proxy.sink.wait(1, timeout=10)
    assert record.output_tokens >= 0 and record.input_tokens >= 0, record
