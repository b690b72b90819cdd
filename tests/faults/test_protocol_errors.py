"""The protocols' own error types (`ProtocolError` and its kinds in the IR) reach the caller as what
they are, wherever a protocol raises them: a refused request is a 400 in the caller's format that
names the field, an upstream answer that breaks its API is a 502 (or an in-band error once the
stream has started) that says what broke, and the ledger row keeps the usage reported before it.

A protocol raising these cannot be provoked with real input until every protocol raises them, so
these inject one where each protocol is called, through the same adapter the proxy uses.
"""

from __future__ import annotations

from typing import Any, NoReturn

import anthropic
import openai
import pytest

from switch.protocols.ir import RequestFormatError, StreamSink, UnsupportedFeatureError, UpstreamFormatError, Usage
from switch.protocols.tools import ToolIndex
from switch.proxy import adapters, upstream_apis
from tests.conftest import FAKE_CLIENT_KEY, Proxy
from tests.fake_upstream import Turn


def raising(error: Exception) -> Any:
    def boom(*_args: Any) -> NoReturn:
        raise error

    return boom


def only_record(proxy: Proxy) -> Any:
    records = proxy.sink.wait(1)
    assert len(records) == 1, [(r.outcome, r.http_status) for r in records]
    return records[0]


def anthropic_client(proxy: Proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)


def test_a_request_format_error_is_a_400_naming_the_field(kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    error = RequestFormatError("messages[0].role must be user, assistant, system or tool", param="messages[0].role")
    monkeypatch.setattr(adapters.CHAT_INBOUND, "request_to_ir", raising(error))
    sdk = openai.OpenAI(base_url=kimi_proxy.url + "/v1", api_key="sk-test", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    body: Any = caught.value.body
    assert (body["message"], body["param"]) == (error.message, "messages[0].role")
    assert caught.value.response.headers["x-should-retry"] == "false"
    record = only_record(kimi_proxy)
    assert (record.outcome, record.http_status, record.inbound_api) == ("rejected", 400, "openai-chat")
    assert kimi_proxy.upstream is not None and kimi_proxy.upstream.received == []


def test_an_unsupported_feature_is_a_400_saying_what_the_upstream_cannot_take(
    kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = UnsupportedFeatureError("document blocks cannot be sent to an openai-chat upstream", param="messages")
    monkeypatch.setattr(upstream_apis.CHAT_UPSTREAM, "request_body", raising(error))
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(kimi_proxy).messages.create(
            model="claude-opus-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    assert error.message in str(caught.value)
    record = only_record(kimi_proxy)
    assert (record.outcome, record.http_status, record.provider) == ("rejected", 400, "baseten")
    assert kimi_proxy.upstream is not None and kimi_proxy.upstream.received == []


def test_a_malformed_upstream_answer_is_a_502_that_says_so_and_keeps_its_usage(
    kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported = Usage(input_tokens=700, cache_read_tokens=200, output_tokens=9)
    error = UpstreamFormatError("upstream sent a malformed response: choices[0] is not an object", usage=reported)
    monkeypatch.setattr(upstream_apis.CHAT_UPSTREAM, "response_to_ir", raising(error))
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text="an answer switch will not read"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        anthropic_client(kimi_proxy).messages.create(
            model="claude-opus-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 502 and error.message in str(caught.value)
    record = only_record(kimi_proxy)
    assert (record.outcome, record.http_status) == ("incomplete_stream", 502)
    assert record.usage_reported
    assert (record.input_tokens, record.cache_read_tokens, record.output_tokens) == (700, 200, 9)


class BrokenDecoder:
    """A stream decoder that finds the upstream's first event malformed."""

    done = False
    finished = False
    upstream_id: str | None = None
    upstream_model: str | None = None

    def __init__(self, sink: StreamSink, index: ToolIndex) -> None:
        self.sink = sink

    def feed(self, data: bytes) -> None:
        raise UpstreamFormatError("upstream sent a malformed stream chunk: choices is not an array")


def test_a_malformed_upstream_stream_ends_the_callers_stream_with_an_error_that_says_so(
    kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upstream_apis.CHAT_UPSTREAM, "new_decoder", BrokenDecoder)
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text="a stream switch will not read"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with anthropic_client(kimi_proxy).messages.stream(
            model="claude-opus-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            stream.get_final_message()
    assert "choices is not an array" in str(caught.value)
    record = only_record(kimi_proxy)
    assert record.outcome == "incomplete_stream" and record.streamed
    assert record.error is not None and "choices is not an array" in record.error
