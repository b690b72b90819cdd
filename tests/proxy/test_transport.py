"""The transport seam: the translated path sends through whatever `Transport` the relay holds.

Here an in-memory transport stands in for the upstream: what is checked (the body switch writes for a
chat upstream, the key header, the answer translated back and recorded) needs no socket. The loopback
tests elsewhere cover the HTTP/1 client itself.
"""

from __future__ import annotations

from typing import Any

import anthropic
import orjson
import pytest

from switch.errors import UpstreamError
from switch.proxy.failures import transport_failure
from switch.proxy.transport import UpstreamAnswer, UpstreamRequest, WholeAnswer
from tests.conftest import FAKE_BASETEN_KEY, Proxy


class MemoryTransport:
    """Answers every request with one chat completion, keeping what was sent."""

    def __init__(self, answer: WholeAnswer) -> None:
        self.answer = answer
        self.sent: list[UpstreamRequest] = []

    async def send(self, request: UpstreamRequest) -> UpstreamAnswer:
        self.sent.append(request)
        return self.answer

    async def aclose(self) -> None:
        pass


def _completion(text: str) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-memory",
            "object": "chat.completion",
            "model": "moonshotai/Kimi-K3",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        }
    )


def _with_transport(proxy: Proxy, transport: Any) -> None:
    relay = proxy.app.app.relay
    relay.http = transport


def test_a_translated_call_goes_through_the_relays_transport(kimi_proxy: Proxy) -> None:
    memory = MemoryTransport(WholeAnswer(200, _completion("from memory")))
    _with_transport(kimi_proxy, memory)
    client = anthropic.Anthropic(base_url=kimi_proxy.url, api_key="k", max_retries=0)
    message = client.messages.create(model="m", max_tokens=40, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "from memory"  # type: ignore[union-attr]
    (sent,) = memory.sent
    body = orjson.loads(sent.body)
    assert sent.url.endswith("/chat/completions") and body["model"] == "moonshotai/Kimi-K3"
    assert body["messages"][-1] == {"role": "user", "content": "hi"}
    assert ("authorization", f"Bearer {FAKE_BASETEN_KEY}") in sent.headers
    assert kimi_proxy.upstream is not None and kimi_proxy.upstream.received == []  # nothing reached the socket
    (record,) = kimi_proxy.sink.wait(1)
    assert (record.outcome, record.provider, record.input_tokens, record.output_tokens) == (
        "completed",
        "baseten",
        11,
        3,
    )


def test_an_error_answer_from_a_transport_is_mapped_like_an_http_one(kimi_proxy: Proxy) -> None:
    refusal = orjson.dumps({"error": {"message": f"bad key {FAKE_BASETEN_KEY}"}})
    _with_transport(kimi_proxy, MemoryTransport(WholeAnswer(401, refusal)))
    client = anthropic.Anthropic(base_url=kimi_proxy.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client.messages.create(model="m", max_tokens=40, messages=[{"role": "user", "content": "hi"}])
    assert "upstream baseten returned 401: bad key ***" in str(caught.value)
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "upstream_error" and FAKE_BASETEN_KEY not in (record.error or "")


@pytest.mark.parametrize(
    ("kind", "status", "outcome", "trigger"),
    [
        ("timeout", 504, "transport_error", "timeout"),
        ("connect", 502, "transport_error", "connect"),
        ("failed", 502, "upstream_error", "5xx"),  # a LiteLLM provider error without a status
        ("empty", 502, "incomplete_stream", "5xx"),  # a stream that ended before its first chunk
        ("local", 502, "proxy_error", "connect"),  # switch could not make the call (LiteLLM would not load)
    ],
)
def test_every_transport_failure_kind_maps_to_one_outcome_and_trigger(
    kind: str, status: int, outcome: str, trigger: str
) -> None:
    failure = transport_failure(UpstreamError("went wrong", kind=kind), "gem")
    assert (failure.status, failure.outcome, failure.trigger) == (status, outcome, trigger)
    assert failure.message == "upstream gem: went wrong"
