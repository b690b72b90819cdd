"""A chunk of the wrong shape from the upstream, on each inbound API, through the real proxy with SDK
callers: the client gets its API's in-band error and terminating event (or a 502 in its format),
and the ledger row keeps the route, the models and the tokens seen. Pass-through calls with odd
usage values are relayed untouched and recorded without crashing.
"""

from __future__ import annotations

import itertools
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.wire import MAX_COUNT
from switch.proxy.adapters import ANTHROPIC_INBOUND, CHAT_INBOUND, RESPONSES_INBOUND
from tests.anthropic_grammar import assert_valid_anthropic_stream, parse_events
from tests.chat_stream_grammar import assert_valid_chat_stream
from tests.conftest import FAKE_CLIENT_KEY, Proxy
from tests.fake_upstream import Reply, Turn, chat_chunks
from tests.responses_grammar import assert_valid_responses_stream

OOPS = b'data: {"choices": ["oops"]}\n\n'
EARLY_USAGE = {"prompt_tokens": 700, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 200}}


def oops_stream() -> Reply:
    """A Kimi-style stream that reports usage early, sends some text, then a chunk of the wrong shape."""
    chunks = chat_chunks(Turn(text="partial answer before the bad chunk"), "kimi", itertools.count())
    chunks[1]["usage"] = EARLY_USAGE
    good = [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks]
    return Reply(200, [*good[:4], OOPS, *good[4:], b"data: [DONE]\n\n"])


def assert_row(proxy: Proxy, harness: str, requested_model: str, streamed: bool) -> None:
    (record,) = proxy.sink.wait(1)
    assert record.outcome == "incomplete_stream", (record.outcome, record.error)
    assert "choices[0] is not an object" in (record.error or "")
    assert (record.harness, record.requested_model, record.streamed) == (harness, requested_model, streamed)
    assert (record.provider, record.served_model, record.upstream_api) == (
        "baseten",
        "moonshotai/Kimi-K3",
        "openai-chat",
    )
    assert record.usage_reported
    assert (record.input_tokens, record.cache_read_tokens, record.output_tokens) == (500, 200, 9)


def test_bad_chat_chunk_mid_stream_ends_an_anthropic_stream_with_an_error_event(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(oops_stream())
    body = {
        "model": "claude-sonnet-5",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "x"}],
    }
    headers = {"x-claude-code-session-id": "sess-1"}
    raw = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers=headers, timeout=20)
    assert raw.status_code == 200
    assert_valid_anthropic_stream(raw.content, allow_error=True)
    events = parse_events(raw.content)
    assert [name for name, _ in events][-1] == "error", "the error event ends the stream"
    assert events[-1][1]["error"]["type"] == "api_error"
    assert "partial" in raw.text  # what came before the bad chunk reached the client
    assert_row(kimi_proxy, "claude-code", "claude-sonnet-5", True)

    kimi_proxy.upstream.script(oops_stream())
    client = anthropic.Anthropic(base_url=kimi_proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError, match="choices\\[0\\] is not an object"):
        for _ in client.messages.create(**body):
            pass


def test_bad_chat_chunk_mid_stream_ends_a_chat_stream_with_an_error_chunk_and_done(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(oops_stream())
    body = {"model": "gpt-chat", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    headers = {"user-agent": "langchain-openai/1.0"}
    raw = httpx.post(kimi_proxy.url + "/v1/chat/completions", json=body, headers=headers, timeout=20)
    assert raw.status_code == 200
    stream = assert_valid_chat_stream(raw.content)
    assert stream.error is not None and "choices[0] is not an object" in stream.error["message"]
    assert stream.text.startswith("partial")
    assert_row(kimi_proxy, "langchain", "gpt-chat", True)

    kimi_proxy.upstream.script(oops_stream())
    client = openai.OpenAI(base_url=kimi_proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(openai.APIError, match="choices\\[0\\] is not an object"):
        for _ in client.chat.completions.create(**body):
            pass


def test_bad_chat_chunk_mid_stream_ends_a_responses_stream_with_response_failed(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(oops_stream())
    body = {"model": "gpt-codex", "stream": True, "input": "x"}
    headers = {"originator": "codex_cli_rs"}
    raw = httpx.post(kimi_proxy.url + "/v1/responses", json=body, headers=headers, timeout=20)
    assert raw.status_code == 200
    stream = assert_valid_responses_stream(raw.content)
    assert stream.status == "failed" and stream.error is not None
    assert "choices[0] is not an object" in stream.error["message"]
    assert_row(kimi_proxy, "codex", "gpt-codex", True)

    kimi_proxy.upstream.script(oops_stream())
    client = openai.OpenAI(base_url=kimi_proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    events = list(client.responses.create(**body))
    assert events[-1].type == "response.failed"


@pytest.mark.parametrize(
    ("path", "body", "headers", "harness"),
    [
        (
            "/v1/messages",
            {"model": "claude-sonnet-5", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}]},
            {"x-claude-code-session-id": "s"},
            "claude-code",
        ),
        (
            "/v1/chat/completions",
            {"model": "gpt-chat", "messages": [{"role": "user", "content": "x"}]},
            {"user-agent": "langchain-openai/1.0"},
            "langchain",
        ),
        ("/v1/responses", {"model": "gpt-codex", "input": "x"}, {"originator": "codex_cli_rs"}, "codex"),
    ],
)
def test_bad_chat_body_is_a_502_in_the_callers_format_with_the_tokens_reported(
    kimi_proxy: Proxy, path: str, body: dict[str, Any], headers: dict[str, str], harness: str
) -> None:
    assert kimi_proxy.upstream is not None
    bad = {"id": "c", "choices": ["oops"], "usage": EARLY_USAGE}
    kimi_proxy.upstream.script(Reply(200, [orjson.dumps(bad)], "application/json"))
    response = httpx.post(kimi_proxy.url + path, json=body, headers=headers, timeout=20)
    assert response.status_code == 502
    error = response.json()["error"]
    assert "choices[0] is not an object" in error["message"]
    if path == "/v1/messages":
        assert response.json()["type"] == "error" and error["type"] == "api_error"
    else:
        assert set(error) == {"message", "type", "param", "code"}
    assert_row(kimi_proxy, harness, body["model"], False)


# ---- native pass-through -------------------------------------------------------------------------------


def _sse(name: str | None, payload: Any) -> bytes:
    return (b"event: " + name.encode() + b"\n" if name else b"") + b"data: " + orjson.dumps(payload) + b"\n\n"


ODD_NATIVE_STREAMS = {
    "/v1/messages": [
        _sse("message_start", {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": "x"}}}),
        _sse("message_delta", {"type": "message_delta", "delta": "oops", "usage": {"output_tokens": 2**64 - 1}}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": {"odd": 1}}, "usage": None}),
        _sse("message_stop", {"type": "message_stop"}),
    ],
    "/v1/chat/completions": [
        _sse(None, {"choices": ["oops"], "usage": {"prompt_tokens": "x", "completion_tokens": -4}}),
        _sse(None, {"choices": {"0": {"finish_reason": "stop"}}, "usage": {"prompt_tokens": 2**63}}),
        _sse(None, {"choices": [{"finish_reason": ["stop"]}], "usage": {"completion_tokens": 7}}),
        b"data: [DONE]\n\n",
    ],
    "/v1/responses": [
        _sse("response.created", {"type": "response.created", "response": "oops"}),
        _sse("response.completed", {"type": "response.completed", "response": {"status": 5, "usage": [1]}}),
    ],
}
NATIVE_BODIES = {
    "/v1/messages": {"model": "claude-x", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}]},
    "/v1/chat/completions": {"model": "gpt-x", "messages": [{"role": "user", "content": "x"}]},
    "/v1/responses": {"model": "gpt-x", "input": "x"},
}


@pytest.mark.parametrize("path", list(ODD_NATIVE_STREAMS))
def test_pass_through_relays_odd_usage_untouched_and_records_the_call(native_proxy: Proxy, path: str) -> None:
    assert native_proxy.upstream is not None
    stream = b"".join(ODD_NATIVE_STREAMS[path])
    native_proxy.upstream.script(Reply(200, [stream]))
    body = {**NATIVE_BODIES[path], "stream": True}
    if path == "/v1/chat/completions":
        body["stream_options"] = {"include_usage": True}  # so the bytes are relayed unchanged
    response = httpx.post(native_proxy.url + path, json=body, headers={"x-api-key": FAKE_CLIENT_KEY}, timeout=20)
    assert response.status_code == 200 and response.content == stream
    (record,) = native_proxy.sink.wait(1)
    assert record.outcome == "completed", (record.outcome, record.error)
    assert record.stop_reason is None or isinstance(record.stop_reason, str)
    for tokens in (record.input_tokens, record.output_tokens, record.cache_read_tokens, record.cache_write_tokens):
        assert type(tokens) is int and 0 <= tokens <= MAX_COUNT
    if path == "/v1/chat/completions":
        assert record.output_tokens == 7  # the one well-formed count still counts

    odd_body = orjson.dumps({"usage": {"input_tokens": "x"}, "choices": {"a": 1}, "stop_reason": [1]})
    native_proxy.upstream.script(Reply(200, [odd_body], "application/json"))
    plain = httpx.post(native_proxy.url + path, json=NATIVE_BODIES[path], headers={"x-api-key": FAKE_CLIENT_KEY})
    assert plain.status_code == 200
    assert native_proxy.sink.wait(2)[1].outcome == "completed"


scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from([-1, 2**63, 2**64 - 1, 1.5, "x", "stop"])
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
# Usage objects and the containers around them, shaped like the real thing but with any values, so
# the sniffer's parsing paths are reached with odd types (free-form JSON would rarely get there).
COUNT_KEYS = ["input_tokens", "output_tokens", "prompt_tokens", "completion_tokens", "cache_read_input_tokens"]
usages = st.dictionaries(st.sampled_from(COUNT_KEYS), scalars, max_size=3) | json_values
stops = st.fixed_dictionaries({}, optional={"stop_reason": json_values, "finish_reason": json_values})
choices = st.lists(stops | json_values, max_size=2) | json_values
payloads = st.fixed_dictionaries(
    {},
    optional={
        "usage": usages,
        "choices": choices,
        "message": st.fixed_dictionaries({}, optional={"usage": usages}) | json_values,
        "delta": stops | json_values,
        "response": st.fixed_dictionaries({}, optional={"usage": usages, "status": json_values}) | json_values,
        "stop_reason": json_values,
        "status": json_values,
        "type": st.sampled_from(["response.completed", "message_delta"]),
    },
)
EVENT_NAMES = [None, "message_start", "message_delta", "message_stop", "response.completed"]


@given(
    api=st.sampled_from([ANTHROPIC_INBOUND, CHAT_INBOUND, RESPONSES_INBOUND]),
    events=st.lists(st.tuples(st.sampled_from(EVENT_NAMES), payloads | json_values), max_size=5),
    strip_usage=st.booleans(),
)
def test_usage_sniffer_takes_only_well_typed_values_from_any_json(
    api: Any, events: list[tuple[str | None, Any]], strip_usage: bool
) -> None:
    stream = b"".join(_sse(name, payload) for name, payload in events)
    for is_sse, data in ((True, stream), (False, orjson.dumps(events[0][1]) if events else b"")):
        sniffer = api.new_sniffer(is_sse, strip_usage and is_sse)
        forwarded = sniffer.feed(data) + sniffer.flush()
        sniffer.close()
        if not sniffer.strip_usage:
            assert forwarded == data
        usage = sniffer.usage
        for tokens in (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens):
            assert type(tokens) is int and 0 <= tokens <= MAX_COUNT
        assert sniffer.stop_reason is None or isinstance(sniffer.stop_reason, str)


def test_cut_off_stream_for_a_non_streamed_call_is_a_502_not_a_partial_answer(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    chunks = chat_chunks(Turn(text="half of an answer"), "kimi", itertools.count())
    chunks[1]["usage"] = EARLY_USAGE
    cut = [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks[:4]]  # no finish, no [DONE]
    kimi_proxy.upstream.script(Reply(200, cut))
    body = {"model": "gpt-chat", "messages": [{"role": "user", "content": "x"}]}
    response = httpx.post(kimi_proxy.url + "/v1/chat/completions", json=body, timeout=20)
    assert response.status_code == 502
    assert "ended before the response was complete" in response.json()["error"]["message"]
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "incomplete_stream" and record.usage_reported
    assert (record.input_tokens, record.cache_read_tokens, record.output_tokens) == (500, 200, 9)
