"""Bad client input on every inbound API: a clear error in the caller's own format with the right
status, the call recorded as rejected, nothing sent upstream, and the proxy keeps serving."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import Proxy, kimi_proxy_on
from tests.fake_upstream import FakeChatUpstream
from tests.faults.test_upstream_faults import PATHS, assert_error_shape, body_for

MiB = 1024 * 1024
BAD_INPUT: dict[str, dict[str, tuple[bytes, str]]] = {
    # api: case: (body, a word the error message must contain)
    "anthropic": {
        "invalid_json": (b'{"model": "m", "max_tokens": 5, "messages": [', "JSON"),
        "wrong_type": (b'{"model": "m", "max_tokens": "ten", "messages": []}', "max_tokens"),
        "missing_field": (b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}', "max_tokens"),
        "not_an_object": (b'["model", "m"]', "object"),
    },
    "openai-chat": {
        "invalid_json": (b'{"model": "m", "messages": [', "JSON"),
        "wrong_type": (b'{"model": "m", "messages": "hello"}', "messages"),
        "missing_field": (b'{"model": "m"}', "messages"),
        "not_an_object": (b'"hello"', "object"),
    },
    "openai-responses": {
        "invalid_json": (b'{"model": "m", "input": [', "JSON"),
        "wrong_type": (b'{"model": "m", "input": 42}', "input"),
        "missing_field": (b'{"input": "hello"}', "model"),
        "not_an_object": (b"42", "object"),
    },
}
CASES = [(api, case) for api, cases in BAD_INPUT.items() for case in cases]


@pytest.mark.parametrize(("api", "case"), CASES)
def test_bad_input_is_a_400_in_the_callers_format_and_recorded(kimi_proxy: Proxy, api: str, case: str) -> None:
    body, word = BAD_INPUT[api][case]
    response = httpx.post(kimi_proxy.url + PATHS[api], content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    payload = response.json()
    assert_error_shape(api, payload)
    assert word in payload["error"]["message"]
    record = kimi_proxy.sink.wait(1)[0]
    assert record.outcome == "rejected" and record.http_status == 400 and record.inbound_api == api
    assert kimi_proxy.upstream is not None and kimi_proxy.upstream.received == []
    assert httpx.post(kimi_proxy.url + PATHS[api], json=body_for(api, False)).status_code == 200


def big_request(api: str, size: int) -> tuple[bytes, str]:
    text = "0123456789abcdef" * (size // 16)
    body: dict[str, Any] = body_for(api, False)
    if api == "openai-responses":
        body["input"] = text
    else:
        body["messages"][0]["content"] = text
    return orjson.dumps(body), text


@pytest.mark.parametrize("api", list(PATHS))
def test_twenty_megabyte_request_is_relayed_and_one_over_the_limit_is_413(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    api: str,
) -> None:
    # 20 MiB of text is about 5.8M tokens: a model whose window holds it, so only the body limit is tested.
    window = '[models."baseten/moonshotai/Kimi-K3"]\ncontext_window = 10000000\n'
    kimi_proxy = kimi_proxy_on(fake_chat, start_proxy, monkeypatch, "switch", window)
    body, text = big_request(api, 20 * MiB)  # under the documented 32 MiB default ([server] max_body_bytes)
    response = httpx.post(
        kimi_proxy.url + PATHS[api], content=body, headers={"content-type": "application/json"}, timeout=60
    )
    assert response.status_code == 200, response.text[:300]
    forwarded = kimi_proxy.upstream.received[-1].json
    assert forwarded["messages"][-1]["content"] in (text, [{"type": "text", "text": text}])
    too_big, _ = big_request(api, 33 * MiB)
    refused = httpx.post(
        kimi_proxy.url + PATHS[api], content=too_big, headers={"content-type": "application/json"}, timeout=60
    )
    assert refused.status_code == 413
    assert_error_shape(api, refused.json())
    assert "limit" in refused.json()["error"]["message"]
    records = kimi_proxy.sink.wait(2)
    assert [(r.outcome, r.http_status) for r in records] == [("completed", 200), ("rejected", 413)]
    assert len(kimi_proxy.upstream.received) == 1
