"""Client bodies with the right keys but wrong JSON types (issue #14): each gets a 400 in the caller's
own format naming the field, so SDKs do not retry it, and exactly one ledger row that still says who
called (harness, session) and with which model. Callers are the real SDKs, with their default retries.
"""

from __future__ import annotations

from typing import Any, NoReturn

import anthropic
import httpx
import openai
import pytest

from switch.proxy import adapters, relay, upstream_apis
from tests.conftest import FAKE_CLIENT_KEY, Proxy, load_capture

SESSION = "b92b615c-8b6c-43de-9583-f9649bf7ba82"
CLAUDE_CODE_HEADERS = {"x-claude-code-session-id": SESSION, "x-app": "cli"}
DEEP_AGENTS_SYSTEM = {"role": "system", "content": "You are a Deep Agents assistant that plans and delegates."}


def anthropic_client(proxy: Proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=2, default_headers=CLAUDE_CODE_HEADERS
    )


def openai_client(proxy: Proxy, headers: dict[str, str] | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=2, default_headers=headers)


def claude_code_body() -> dict[str, Any]:
    return load_capture("claude_code_plain/01_POST_v1_messages.json")["body"]


def only_record(proxy: Proxy) -> Any:
    records = proxy.sink.wait(1)
    assert len(records) == 1, [(r.outcome, r.http_status) for r in records]
    return records[0]


def assert_rejected(proxy: Proxy, harness: str, model: str, api: str) -> None:
    record = only_record(proxy)
    assert (record.outcome, record.http_status, record.inbound_api) == ("rejected", 400, api)
    assert (record.harness, record.requested_model) == (harness, model)
    assert proxy.upstream is not None and proxy.upstream.received == []


def test_anthropic_effort_given_as_an_object_is_a_400_naming_it(kimi_proxy: Proxy) -> None:
    body = claude_code_body()
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(kimi_proxy).messages.create(
            model=body["model"],
            max_tokens=1024,
            messages=body["messages"],
            system=body["system"],
            extra_body={"output_config": {"effort": {"level": "high"}}},
        )
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("output_config.effort must be one of")
    assert "not an object" in error["message"]
    assert_rejected(kimi_proxy, "claude-code", body["model"], "anthropic")
    assert only_record(kimi_proxy).session_id == SESSION


def test_chat_tool_calls_entry_given_as_a_string_is_a_400_with_its_param(kimi_proxy: Proxy) -> None:
    messages: Any = [
        DEEP_AGENTS_SYSTEM,
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": None, "tool_calls": ["call_1"]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(kimi_proxy).chat.completions.create(model="gpt-5.5", messages=messages)
    assert caught.value.param == "messages[2].tool_calls[0]"
    assert caught.value.type == "invalid_request_error"
    assert "messages[2].tool_calls[0] must be an object, not a string" in caught.value.message
    assert_rejected(kimi_proxy, "langchain", "gpt-5.5", "openai-chat")


def test_anthropic_content_block_given_as_a_number_is_a_400_naming_it(kimi_proxy: Proxy) -> None:
    body = claude_code_body()
    messages: Any = [{"role": "user", "content": [{"type": "text", "text": "say hi"}, 42]}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(kimi_proxy).messages.create(model=body["model"], max_tokens=64, messages=messages)
    assert caught.value.body["error"]["message"] == (  # type: ignore[index]
        "messages[0].content[1] must be an object, not an integer"
    )
    assert_rejected(kimi_proxy, "claude-code", body["model"], "anthropic")


def test_chat_content_part_given_as_a_number_is_a_400_with_its_param(kimi_proxy: Proxy) -> None:
    messages: Any = [DEEP_AGENTS_SYSTEM, {"role": "user", "content": [{"type": "text", "text": "hi"}, 7.5]}]
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(kimi_proxy).chat.completions.create(model="gpt-5.5", messages=messages)
    assert caught.value.param == "messages[1].content[1]"
    assert_rejected(kimi_proxy, "langchain", "gpt-5.5", "openai-chat")


def test_responses_content_part_given_as_a_number_is_a_400_with_its_param(kimi_proxy: Proxy) -> None:
    codex = {"originator": "codex_exec", "session_id": SESSION}
    items: Any = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}, 3]}]
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(kimi_proxy, codex).responses.create(model="gpt-5.5", input=items)
    assert caught.value.param == "input[0].content[1]"
    assert_rejected(kimi_proxy, "codex", "gpt-5.5", "openai-responses")
    assert only_record(kimi_proxy).session_id == SESSION


def test_rejected_call_with_a_bad_max_tokens_keeps_who_called(kimi_proxy: Proxy) -> None:
    body = {**claude_code_body(), "max_tokens": -1}
    response = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers=CLAUDE_CODE_HEADERS)
    assert response.status_code == 400 and response.headers["x-should-retry"] == "false"
    assert response.json()["error"]["message"] == "max_tokens must be between 1 and 2147483647, not -1"
    assert_rejected(kimi_proxy, "claude-code", body["model"], "anthropic")


def test_count_tokens_with_effort_given_as_an_object_is_a_400_naming_it(kimi_proxy: Proxy) -> None:
    body = claude_code_body()
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(kimi_proxy).messages.count_tokens(
            model=body["model"],
            messages=body["messages"],
            extra_body={"output_config": {"effort": ["high"]}},
        )
    assert caught.value.body["error"]["message"].startswith("output_config.effort must be one of")  # type: ignore[index]
    # count_tokens takes no max_tokens, so a bogus one is no reason to refuse.
    counted = httpx.post(
        kimi_proxy.url + "/v1/messages/count_tokens", json={**body, "max_tokens": "ten"}, headers=CLAUDE_CODE_HEADERS
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


# A switch bug in the parser or translator cannot be provoked with real input (the parsers above
# validate what they read), so these inject one, to check what the caller and the ledger then see.


def _boom(*_args: Any) -> NoReturn:
    raise KeyError("a field the code assumed")


def test_a_parser_bug_is_a_400_naming_the_step_not_a_500(kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters.ANTHROPIC_INBOUND, "request_to_ir", _boom)
    body = claude_code_body()
    response = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers=CLAUDE_CODE_HEADERS)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "KeyError in the request parser" in error["message"]
    assert response.headers["x-should-retry"] == "false"
    assert_rejected(kimi_proxy, "claude-code", body["model"], "anthropic")


def test_a_request_translator_bug_is_a_400_naming_the_step(kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream_apis.CHAT_UPSTREAM, "request_body", _boom)
    body = claude_code_body()
    response = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers=CLAUDE_CODE_HEADERS)
    assert response.status_code == 400, response.text
    assert "KeyError in the request translator" in response.json()["error"]["message"]
    record = only_record(kimi_proxy)
    assert (record.outcome, record.harness, record.requested_model, record.provider) == (
        "rejected",
        "claude-code",
        body["model"],
        "baseten",
    )


def test_a_bug_after_routing_is_recorded_with_the_call_it_was_serving(
    kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upstream_apis.CHAT_UPSTREAM, "auth_headers", _boom)
    body = claude_code_body()
    response = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers=CLAUDE_CODE_HEADERS)
    assert response.status_code == 500 and response.json()["error"]["type"] == "api_error"
    record = only_record(kimi_proxy)
    assert record.outcome == "proxy_error" and record.http_status == 500
    assert (record.harness, record.session_id, record.requested_model) == ("claude-code", SESSION, body["model"])
    assert (record.provider, record.served_model) == ("baseten", "moonshotai/Kimi-K3")


def test_a_classifier_bug_still_serves_the_call(kimi_proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay, "classify", _boom)
    response = httpx.post(
        kimi_proxy.url + "/v1/messages",
        json={"model": "claude-opus-5-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 200, response.text
    record = only_record(kimi_proxy)
    assert (record.outcome, record.harness, record.role) == ("completed", "other", "orchestrator")


def _nested(levels: int) -> Any:
    value: Any = {"type": "string"}
    for _ in range(levels):
        value = {"type": "object", "properties": {"x": value}}
    return value


# JSON nested deeper than the encoder re-encodes (255 levels) but within what the decoder reads (1024).
TOO_DEEP = _nested(200)


def test_tool_schema_nested_too_deep_to_translate_is_a_400(kimi_proxy: Proxy) -> None:
    body = {
        "model": "gpt-5.5",
        "messages": [DEEP_AGENTS_SYSTEM, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "deep", "parameters": TOO_DEEP}}],
    }
    response = httpx.post(kimi_proxy.url + "/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert_rejected(kimi_proxy, "langchain", "gpt-5.5", "openai-chat")


def test_native_chat_stream_nested_too_deep_to_re_encode_is_still_served(
    start_proxy: Any, fake_chat: tuple[Any, str]
) -> None:
    fake, url = fake_chat
    proxy = start_proxy(f'[defaults]\nmodel = "native"\n[providers.openai]\nbase_url = "{url}"\n')
    body = {
        "model": "gpt-5.5",
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": TOO_DEEP,
    }
    response = httpx.post(proxy.url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer sk-x"})
    assert response.status_code == 200, response.text
    assert response.text.rstrip().endswith("data: [DONE]")
    record = only_record(proxy)
    assert (record.outcome, record.provider, record.requested_model) == ("completed", "openai", "gpt-5.5")
    assert fake.received[0].json["metadata"] == TOO_DEEP
