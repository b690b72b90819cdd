"""The protocols' own error types, as the caller sees them through the real proxy: a body that breaks
its API or asks for what the upstream cannot take is a 400 in the caller's format naming the field;
an upstream that reports its own failure mid-answer is the upstream's error (529, `overloaded_error`),
not a broken stream. Every call is recorded.
"""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.conftest import FAKE_CLIENT_KEY, Proxy
from tests.fake_upstream import Reply

IN_BAND_ERROR = [
    b'data: {"choices":[{"index":0,"delta":{"content":"partial "}}]}\n\n',
    b'data: {"error":{"message":"the model is overloaded, try again"}}\n\n',
]


def test_wrong_field_type_is_a_400_naming_the_field_in_openai_format(kimi_proxy: Proxy) -> None:
    chat = openai.OpenAI(base_url=kimi_proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="m", messages=[{"role": "robot", "content": "x"}])  # type: ignore[misc, list-item]
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["param"] == "messages[0].role"
    assert body["type"] == "invalid_request_error"
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "rejected"


def test_feature_the_upstream_cannot_take_is_a_400_recorded_as_rejected(kimi_proxy: Proxy) -> None:
    response = httpx.post(
        kimi_proxy.url + "/v1/messages",
        json={
            "model": "m",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
            "output_config": {"format": {"type": "regex", "pattern": "a+"}},
        },
        timeout=30,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "structured output of type 'regex'" in error["message"]
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "rejected"
    assert kimi_proxy.upstream is not None and not kimi_proxy.upstream.received


def test_upstream_error_inside_a_stream_is_an_in_band_overloaded_error(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Reply(200, IN_BAND_ERROR))
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    text = httpx.post(kimi_proxy.url + "/v1/messages", json=body, timeout=30).text
    assert "event: error" in text
    assert '"overloaded_error"' in text and "the model is overloaded" in text
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "upstream_error", (record.outcome, record.error)


def test_upstream_error_inside_a_non_streamed_answer_is_a_529(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Reply(200, IN_BAND_ERROR))
    claude = anthropic.Anthropic(base_url=kimi_proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "upstream_error", (record.outcome, record.error)
