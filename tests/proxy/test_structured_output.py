"""Structured output carried across APIs: each official SDK's structured-output helper (and LangChain's
`with_structured_output`) through the real proxy to a fake upstream of another API, which answers JSON
matching the schema. The test checks the parsed object the caller got and the format the upstream
received; a form the upstream's API cannot express is a 400 in the caller's own format, recorded, with
nothing sent upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from switch.protocols.ir import OutputFormat, RequestFormatError, UnsupportedFeatureError
from switch.protocols.structured import (
    DEFAULT_SCHEMA_NAME,
    read_anthropic_format,
    read_openai_format,
    write_anthropic_format,
    write_openai_format,
)
from tests.conftest import FAKE_CLIENT_KEY, Proxy
from tests.fake_upstream import Turn


class Weather(BaseModel):
    city: str
    celsius: int


ANSWER = '{"city": "Paris", "celsius": 21}'
PARSED = Weather(city="Paris", celsius=21)
# The strict JSON schema the OpenAI and Anthropic SDKs both derive from `Weather`.
WEATHER_SCHEMA = {
    "type": "object",
    "title": "Weather",
    "properties": {
        "city": {"type": "string", "title": "City"},
        "celsius": {"type": "integer", "title": "Celsius"},
    },
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
UPSTREAM_PATHS = {
    "openai-chat": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "openai-responses": "/v1/responses",
}
PROMPT = "Weather in Paris as JSON"


def _openai(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)


def _anthropic(proxy: Proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)


def _received(proxy: Proxy, upstream_api: str) -> dict[str, Any]:
    assert proxy.upstream is not None
    (received,) = proxy.upstream.received
    assert received.path == UPSTREAM_PATHS[upstream_api]
    body: dict[str, Any] = received.json
    return body


def _started(multi_proxy: Callable[[str], Proxy], upstream_api: str) -> Proxy:
    proxy = multi_proxy(upstream_api)
    assert proxy.upstream is not None
    proxy.upstream.script(Turn(text=ANSWER))
    return proxy


# ---- what each upstream API must receive for the caller's json_schema ----------------------------


def expect_chat(name: str, strict: bool | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"name": name, "schema": WEATHER_SCHEMA}
    if strict is not None:
        fields["strict"] = strict
    return {"response_format": {"type": "json_schema", "json_schema": fields}}


def expect_responses(name: str, strict: bool | None) -> dict[str, Any]:
    fmt: dict[str, Any] = {"type": "json_schema", "name": name, "schema": WEATHER_SCHEMA}
    if strict is not None:
        fmt["strict"] = strict
    return {"text": {"format": fmt}}


def expect_anthropic(name: str, strict: bool | None) -> dict[str, Any]:
    return {"output_config": {"format": {"type": "json_schema", "schema": WEATHER_SCHEMA}}}


EXPECT = {"openai-chat": expect_chat, "openai-responses": expect_responses, "anthropic": expect_anthropic}


def assert_format(body: dict[str, Any], upstream_api: str, name: str, strict: bool | None) -> None:
    expected = EXPECT[upstream_api](name, strict)
    for key, value in expected.items():
        assert body.get(key) == value, (key, body.get(key))
    if upstream_api == "openai-chat":
        assert "text" not in body and "output_config" not in body


# ---- official SDK helpers as callers -------------------------------------------------------------


@pytest.mark.parametrize("upstream_api", ["openai-chat", "anthropic"])
def test_responses_parse_text_format(multi_proxy: Callable[[str], Proxy], upstream_api: str) -> None:
    proxy = _started(multi_proxy, upstream_api)
    response = _openai(proxy).responses.parse(model="gpt-test", input=PROMPT, text_format=Weather)
    assert response.output_parsed == PARSED
    assert_format(_received(proxy, upstream_api), upstream_api, "Weather", True)


def test_responses_stream_text_format_to_chat(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = _started(multi_proxy, "openai-chat")
    with _openai(proxy).responses.stream(model="gpt-test", input=PROMPT, text_format=Weather) as stream:
        response = stream.get_final_response()
    assert response.output_parsed == PARSED
    body = _received(proxy, "openai-chat")
    assert body["stream"] is True
    assert_format(body, "openai-chat", "Weather", True)


@pytest.mark.parametrize("upstream_api", ["openai-responses", "anthropic"])
def test_chat_parse_response_format(multi_proxy: Callable[[str], Proxy], upstream_api: str) -> None:
    proxy = _started(multi_proxy, upstream_api)
    completion = _openai(proxy).chat.completions.parse(
        model="gpt-test", messages=[{"role": "user", "content": PROMPT}], response_format=Weather
    )
    assert completion.choices[0].message.parsed == PARSED
    assert_format(_received(proxy, upstream_api), upstream_api, "Weather", True)


def test_chat_stream_response_format_to_anthropic(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = _started(multi_proxy, "anthropic")
    with _openai(proxy).chat.completions.stream(
        model="gpt-test", messages=[{"role": "user", "content": PROMPT}], response_format=Weather
    ) as stream:
        completion = stream.get_final_completion()
    assert completion.choices[0].message.parsed == PARSED
    body = _received(proxy, "anthropic")
    assert body["stream"] is True
    assert_format(body, "anthropic", "Weather", True)


@pytest.mark.parametrize("upstream_api", ["openai-chat", "openai-responses"])
def test_anthropic_parse_output_format(multi_proxy: Callable[[str], Proxy], upstream_api: str) -> None:
    proxy = _started(multi_proxy, upstream_api)
    message = _anthropic(proxy).messages.parse(
        model="claude-test",
        max_tokens=1024,
        messages=[{"role": "user", "content": PROMPT}],
        output_format=Weather,
    )
    assert message.parsed_output == PARSED
    # Anthropic names no schema and has no strict flag: the default name, and the upstream's default strictness.
    assert_format(_received(proxy, upstream_api), upstream_api, DEFAULT_SCHEMA_NAME, None)


def test_anthropic_beta_output_format_field_to_chat(multi_proxy: Callable[[str], Proxy]) -> None:
    # The structured-outputs beta spelled it as a top-level `output_format`.
    proxy = _started(multi_proxy, "openai-chat")
    answer = httpx.post(
        proxy.url + "/v1/messages",
        headers={"anthropic-beta": "structured-outputs-2025-11-13"},
        json={
            "model": "claude-test",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": PROMPT}],
            "output_format": {"type": "json_schema", "schema": WEATHER_SCHEMA},
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert Weather.model_validate_json(answer.json()["content"][0]["text"]) == PARSED
    assert_format(_received(proxy, "openai-chat"), "openai-chat", DEFAULT_SCHEMA_NAME, None)


def test_json_object_from_chat_to_responses(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = _started(multi_proxy, "openai-responses")
    completion = _openai(proxy).chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": PROMPT}],
        response_format={"type": "json_object"},
    )
    assert Weather.model_validate_json(completion.choices[0].message.content or "") == PARSED
    assert _received(proxy, "openai-responses")["text"] == {"format": {"type": "json_object"}}


def test_json_object_from_responses_to_chat(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = _started(multi_proxy, "openai-chat")
    response = _openai(proxy).responses.create(model="gpt-test", input=PROMPT, text={"format": {"type": "json_object"}})
    assert Weather.model_validate_json(response.output_text) == PARSED
    assert _received(proxy, "openai-chat")["response_format"] == {"type": "json_object"}


# ---- LangChain's with_structured_output as the caller --------------------------------------------


def test_langchain_chat_openai_responses_api_json_schema_to_chat(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = _started(multi_proxy, "openai-chat")
    model = ChatOpenAI(
        model="gpt-test",
        base_url=proxy.url + "/v1",
        api_key=FAKE_CLIENT_KEY,  # type: ignore[arg-type]
        use_responses_api=True,
        max_retries=0,
    )
    assert model.with_structured_output(Weather, method="json_schema").invoke(PROMPT) == PARSED
    assert_format(_received(proxy, "openai-chat"), "openai-chat", "Weather", True)


def test_langchain_chat_openai_completions_json_schema_to_responses(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = _started(multi_proxy, "openai-responses")
    model = ChatOpenAI(
        model="gpt-test",
        base_url=proxy.url + "/v1",
        api_key=FAKE_CLIENT_KEY,  # type: ignore[arg-type]
        use_responses_api=False,
        max_retries=0,
    )
    assert model.with_structured_output(Weather, method="json_schema").invoke(PROMPT) == PARSED
    assert_format(_received(proxy, "openai-responses"), "openai-responses", "Weather", True)


def test_langchain_chat_anthropic_json_schema_to_chat(multi_proxy: Callable[[str], Proxy]) -> None:
    # ChatAnthropic's default method is forced tool calling (a tool call, covered by the tool tests);
    # method="json_schema" is the one that uses Anthropic's structured-output parameter.
    proxy = _started(multi_proxy, "openai-chat")
    model = ChatAnthropic(
        model_name="claude-test",
        base_url=proxy.url,
        api_key=FAKE_CLIENT_KEY,  # type: ignore[arg-type]
        max_retries=0,
        timeout=30,
        stop=None,
    )
    assert model.with_structured_output(Weather, method="json_schema").invoke(PROMPT) == PARSED
    assert_format(_received(proxy, "openai-chat"), "openai-chat", DEFAULT_SCHEMA_NAME, None)


# ---- forms an upstream cannot express: a clear 400 in the caller's format, nothing sent ----------


def _assert_rejected(proxy: Proxy) -> None:
    (record,) = proxy.sink.wait(1)
    assert record.outcome == "rejected"
    assert record.http_status == 400
    assert proxy.upstream is not None and not proxy.upstream.received


def test_chat_json_object_to_anthropic_is_a_400(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("anthropic")
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(proxy).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": PROMPT}], response_format={"type": "json_object"}
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert "json_object" in body["message"] and "JSON schema" in body["message"]
    _assert_rejected(proxy)


def test_responses_json_object_to_anthropic_is_a_400(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("anthropic")
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(proxy).responses.create(model="gpt-test", input=PROMPT, text={"format": {"type": "json_object"}})
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert "json_object" in body["message"]
    _assert_rejected(proxy)


def test_chat_json_schema_without_schema_to_anthropic_is_a_400(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("anthropic")
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(proxy).chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": PROMPT}],
            response_format={"type": "json_schema", "json_schema": {"name": "Weather"}},
        )
    assert "schema" in str(caught.value)
    _assert_rejected(proxy)


@pytest.mark.parametrize("upstream_api", ["openai-chat", "openai-responses"])
def test_anthropic_unknown_format_type_is_a_400(multi_proxy: Callable[[str], Proxy], upstream_api: str) -> None:
    proxy = multi_proxy(upstream_api)
    with pytest.raises(anthropic.BadRequestError) as caught:
        _anthropic(proxy).messages.create(
            model="claude-test",
            max_tokens=100,
            messages=[{"role": "user", "content": PROMPT}],
            extra_body={"output_config": {"format": {"type": "regex", "pattern": "a+"}}},
        )
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "regex" in str(caught.value)
    _assert_rejected(proxy)


def test_malformed_response_format_is_a_400_naming_the_field(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("openai-responses")
    with pytest.raises(openai.BadRequestError) as caught:
        _openai(proxy).chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": PROMPT}],
            response_format={"type": "json_schema", "json_schema": {"name": "W", "schema": "not an object"}},  # type: ignore[typeddict-item]
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == "response_format.json_schema.schema"
    _assert_rejected(proxy)


# ---- the OpenAI wire shapes, as properties -------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
format_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["json_schema", "json_object", "text", "regex"]) | json_values},
    optional={
        "json_schema": json_values,
        "name": json_values,
        "schema": json_values,
        "strict": json_values,
        "description": json_values,
    },
)


@given(value=json_values | format_like, nested=st.booleans())
def test_any_format_value_reads_or_is_a_request_error(value: Any, nested: bool) -> None:
    try:
        read = read_openai_format(value, "response_format", nested)
    except RequestFormatError as exc:
        assert exc.param is not None and exc.param.startswith("response_format")
        return
    assert read is None or isinstance(read, OutputFormat)


schemas = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
output_formats = st.builds(
    OutputFormat,
    kind=st.just("json_schema"),
    schema=st.none() | schemas,
    name=st.none() | st.text(min_size=1, max_size=16),
    strict=st.none() | st.booleans(),
    description=st.none() | st.text(max_size=16),
) | st.just(OutputFormat("json_object"))


@given(output_format=output_formats, nested=st.booleans())
def test_written_format_reads_back_the_same(output_format: OutputFormat, nested: bool) -> None:
    wire = write_openai_format(output_format, nested, "openai-chat")
    expected = output_format
    if output_format.kind == "json_schema" and output_format.name is None:
        expected = OutputFormat(
            "json_schema", output_format.schema, DEFAULT_SCHEMA_NAME, output_format.strict, output_format.description
        )
    assert read_openai_format(wire, "response_format", nested) == expected


@given(kind=st.text(max_size=12).filter(lambda kind: kind not in ("json_schema", "json_object")))
def test_other_format_types_are_refused_by_openai_writers(kind: str) -> None:
    with pytest.raises(UnsupportedFeatureError):
        write_openai_format(OutputFormat(kind), True, "openai-chat")


@given(
    body=st.fixed_dictionaries(
        {},
        optional={
            "output_config": json_values | st.fixed_dictionaries({}, optional={"format": json_values | format_like}),
            "output_format": json_values | format_like,
        },
    )
)
def test_any_anthropic_format_reads_or_is_a_request_error(body: dict[str, Any]) -> None:
    try:
        read = read_anthropic_format(body)
    except RequestFormatError as exc:
        assert exc.param is not None and exc.param.startswith(("output_config.format", "output_format"))
        return
    assert read is None or isinstance(read, OutputFormat)


@given(schema=schemas)
def test_anthropic_format_reads_back_the_same(schema: dict[str, Any]) -> None:
    output_format = OutputFormat("json_schema", schema)
    wire = write_anthropic_format(output_format)
    assert read_anthropic_format({"output_config": {"format": wire}}) == output_format
