"""Malformed upstream answers, generated: realistic streams and bodies of each upstream API with
chunks mutated by type (wrong types, missing keys, nulls, huge numbers, odd Unicode, dropped,
duplicated, reordered or cut events), sent to each inbound API, streamed and not.

The bulk runs in process (upstream decoder → IR → client encoder, with the relay's rule that an
upstream protocol error ends the stream in-band); a smaller number goes through the real proxy against a
loopback fake upstream, checking the HTTP answer and the ledger row. Every stream must end as its
client's grammar requires, either completed or with the API's error event.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from switch.protocols.ir import Request, UpstreamFormatError, UpstreamReportedError
from switch.protocols.sse import SseDecoder
from switch.protocols.tools import CustomCallUnwrapper, ToolIndex, unwrap_response
from switch.protocols.wire import MAX_COUNT
from switch.proxy.adapters import ANTHROPIC_INBOUND, CHAT_INBOUND, RESPONSES_INBOUND, InboundApi
from switch.proxy.upstream_apis import UPSTREAMS
from tests.anthropic_grammar import assert_valid_anthropic_stream, parse_events
from tests.chat_stream_grammar import assert_valid_chat_stream
from tests.conftest import UPSTREAM_MODELS, Proxy
from tests.fake_upstream import (
    Reply,
    ToolCall,
    Turn,
    anthropic_message,
    anthropic_stream,
    chat_chunks,
    chat_completion,
    responses_output,
    responses_stream,
    responses_usage,
)
from tests.responses_grammar import assert_valid_responses_stream

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
INBOUNDS: dict[str, InboundApi] = {
    "anthropic": ANTHROPIC_INBOUND,
    "openai-chat": CHAT_INBOUND,
    "openai-responses": RESPONSES_INBOUND,
}
UPSTREAM_APIS = ("openai-chat", "anthropic", "openai-responses")
# Each inbound API as its usual harness calls it, so the ledger row must name that harness.
HARNESS_HEADERS = {
    "anthropic": ({"x-claude-code-session-id": "sess-fuzz"}, "claude-code"),
    "openai-chat": ({"user-agent": "langchain-openai/1.0"}, "langchain"),
    "openai-responses": ({"originator": "codex_cli_rs"}, "codex"),
}
ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL = {"name": "Bash", "description": "run", "parameters": {"type": "object", "properties": {}}}


def client_body(api: str, stream: bool) -> dict[str, Any]:
    """A request with one function tool (and, on Responses, one custom tool)."""
    if api == "anthropic":
        return {
            "model": "claude-fuzz",
            "max_tokens": 100,
            "stream": stream,
            "messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": TOOL["name"], "description": "run", "input_schema": TOOL["parameters"]}],
        }
    if api == "openai-chat":
        body = {
            "model": "chat-fuzz",
            "stream": stream,
            "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": TOOL}],
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body
    return {
        "model": "responses-fuzz",
        "stream": stream,
        "input": "x",
        "tools": [{"type": "function", **TOOL}, {"type": "custom", "name": "apply_patch", "description": "patch"}],
    }


REQUESTS: dict[tuple[str, bool], Request] = {
    (api, stream): INBOUNDS[api].request_to_ir(client_body(api, stream)) for api in PATHS for stream in (True, False)
}

# ---- realistic upstream answers ------------------------------------------------------------------

arguments = st.dictionaries(st.sampled_from(["command", "path", "n"]), st.integers(0, 9) | st.text(max_size=6)).map(
    lambda value: orjson.dumps(value).decode()
)
tool_calls = st.builds(ToolCall, name=st.sampled_from(["Bash", "apply_patch", "Unknown"]), arguments=arguments)
turns = st.builds(
    Turn,
    text=st.text(max_size=20),
    reasoning=st.text(max_size=12),
    tool_calls=st.lists(tool_calls, max_size=2),
    prompt_tokens=st.integers(20, 5000),
    cached_tokens=st.integers(0, 20),
    completion_tokens=st.integers(0, 500),
    fragment=st.integers(1, 9),
)

# An event is (SSE event name or None, JSON payload); `bytes` payloads go on the wire as they are.
Event = tuple[str | None, Any]
DONE = b"[DONE]"


def upstream_events(api: str, turn: Turn) -> list[Event]:
    """A realistic stream of `api` for `turn`, as events to mutate."""
    counter = itertools.count()
    if api == "openai-chat":
        return [(None, chunk) for chunk in chat_chunks(turn, "up-model", counter)] + [(None, DONE)]
    raw = b"".join(
        anthropic_stream(turn, "up-model", counter)
        if api == "anthropic"
        else responses_stream(turn, "up-model", counter)
    )
    decoder = SseDecoder()
    return [(event.event, orjson.loads(event.data)) for event in [*decoder.feed(raw), *decoder.flush()]]


def upstream_body(api: str, turn: Turn) -> Any:
    """A realistic non-streamed answer of `api` for `turn`."""
    counter = itertools.count()
    if api == "openai-chat":
        return chat_completion(turn, "up-model", counter)
    if api == "anthropic":
        return anthropic_message(turn, "up-model", counter)
    output = responses_output(turn, counter)
    return {
        "id": "resp_up",
        "object": "response",
        "model": "up-model",
        "status": "completed",
        "output": output,
        "usage": responses_usage(turn),
    }


def wire(events: list[Event]) -> bytes:
    """The SSE bytes of `events`."""
    out = []
    for name, payload in events:
        data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        out.append((b"event: " + name.encode() + b"\n" if name else b"") + b"data: " + data + b"\n\n")
    return b"".join(out)


# ---- mutations by type -------------------------------------------------------------------------------

odd_values = (
    st.sampled_from(
        [
            None,
            "",
            "oops",
            0,
            -1,
            -(2**63),
            2**63,
            2**64 - 1,
            1.5,
            1e300,
            True,
            [],
            ["oops"],
            [None],
            {},
            {"oops": 1},
            "\u0000",
            "\ufeff\u202e",
            "💥🧨",
            "a\nb\r\n\n",
            "x" * 3000,
        ]
    )
    | st.text(max_size=6)
    | st.integers().filter(lambda n: -(2**63) <= n < 2**64)
)


def node_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path to every node inside a JSON value (the root included)."""
    paths = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            paths.extend(node_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for position, child in enumerate(value):
            paths.extend(node_paths(child, (*prefix, position)))
    return paths


def replace_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return value


def delete_at(value: Any, path: tuple[Any, ...]) -> Any:
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return value


@st.composite
def mutated_value(draw: st.DrawFn, value: Any) -> Any:
    """`value` with one node replaced by an odd value, or one key or item removed."""
    value = copy.deepcopy(value)
    path = draw(st.sampled_from(node_paths(value)))
    if path and draw(st.booleans()) and draw(st.booleans()):
        return delete_at(value, path)
    return replace_at(value, path, draw(odd_values))


@st.composite
def mutated_events(draw: st.DrawFn, events: list[Event]) -> list[Event]:
    """`events` with one to three mutations: by type inside an event, or of the event sequence."""
    events = list(events)
    for _ in range(draw(st.integers(1, 3))):
        if not events:
            break
        kind = draw(st.sampled_from(["value", "value", "value", "value", "drop", "duplicate", "swap", "cut"]))
        position = draw(st.integers(0, len(events) - 1))
        name, payload = events[position]
        if kind == "value" and not isinstance(payload, bytes):
            events[position] = (name, draw(mutated_value(payload)))
        elif kind == "drop":
            del events[position]
        elif kind == "duplicate":
            events.insert(position, events[position])
        elif kind == "swap":
            other = draw(st.integers(0, len(events) - 1))
            events[position], events[other] = events[other], events[position]
        elif kind == "cut":
            data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
            events[position] = (name, data[: draw(st.integers(0, max(0, len(data) - 1)))])
    return events


@st.composite
def fuzzed_stream(draw: st.DrawFn, upstream_api: str) -> bytes:
    return wire(draw(mutated_events(upstream_events(upstream_api, draw(turns)))))


@st.composite
def fuzzed_body(draw: st.DrawFn, upstream_api: str) -> bytes:
    body = upstream_body(upstream_api, draw(turns))
    for _ in range(draw(st.integers(1, 3))):
        body = draw(mutated_value(body))
    return orjson.dumps(body)


# ---- what every client must get -----------------------------------------------------------------------


def assert_count(value: Any) -> None:
    # Totals add up to four counts; anything a 64-bit SQLite column holds is fine.
    assert type(value) is int and 0 <= value <= 4 * MAX_COUNT, value


def assert_client_stream(api: str, stream: bytes) -> bool:
    """Assert `stream` follows `api`'s grammar and ends properly; True when it completed."""
    if api == "anthropic":
        assert_valid_anthropic_stream(stream, allow_error=True)
        names = [name for name, _ in parse_events(stream) if name != "ping"]
        assert names[-1] in ("message_stop", "error"), names[-3:]
        assert names.count("error") + names.count("message_stop") == 1
        if names[-1] == "message_stop":
            usage = parse_events(stream)[-2][1]["usage"]
            for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                assert_count(usage[key])
        return names[-1] == "message_stop"
    if api == "openai-chat":
        chat = assert_valid_chat_stream(stream)
        if chat.usage is not None:
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                assert_count(chat.usage[key])
        return chat.error is None
    result = assert_valid_responses_stream(stream)
    if result.usage is not None:
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            assert_count(result.usage[key])
    return result.status != "failed"


def assert_client_body(api: str, body: dict[str, Any]) -> None:
    """Assert a complete (non-streamed) answer has the shape `api`'s clients parse."""
    if api == "anthropic":
        assert body["type"] == "message" and body["role"] == "assistant"
        for block in body["content"]:
            if block["type"] == "text":
                assert isinstance(block["text"], str)
            elif block["type"] == "thinking":
                assert isinstance(block["thinking"], str) and block["signature"]
            else:
                assert block["type"] == "tool_use" and ANTHROPIC_TOOL_ID.match(block["id"]), block
                assert isinstance(block["name"], str) and isinstance(block["input"], dict)
        usage = body["usage"]
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            assert_count(usage[key])
    elif api == "openai-chat":
        (choice,) = body["choices"]
        message = choice["message"]
        assert message["content"] is None or isinstance(message["content"], str)
        for call in message.get("tool_calls") or []:
            assert isinstance(call["id"], str) and isinstance(call["function"]["arguments"], str)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            assert_count(body["usage"][key])
    else:
        assert body["object"] == "response" and body["status"] in ("completed", "incomplete")
        for item in body["output"]:
            assert item["type"] in ("message", "reasoning", "function_call", "custom_tool_call"), item
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            assert_count(body["usage"][key])


def assert_error_body(api: str, body: dict[str, Any]) -> None:
    if api == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "api_error" and body["error"]["message"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"]


# ---- in process: decoder → IR → encoder --------------------------------------------------------------


def stream_in_process(upstream_api: str, inbound_api: str, data: bytes, split: int) -> bytes:
    """What a client of `inbound_api` receives for upstream stream `data` (read in two pieces)."""
    upstream, inbound = UPSTREAMS[upstream_api], INBOUNDS[inbound_api]
    request = REQUESTS[(inbound_api, True)]
    index = ToolIndex.of(request.tools)
    encoder = inbound.new_encoder(request, 10, "resp_fuzz" if inbound_api == "openai-responses" else "msg_fuzz")
    sink = CustomCallUnwrapper(encoder, index) if upstream.function_only and index.custom else encoder
    decoder = upstream.new_decoder(sink, index)
    sse = SseDecoder()
    # Decoders may raise nothing but the upstream protocol errors: anything else would be a crash the relay
    # only survives through its last-resort handler.
    try:
        for piece in (data[:split], data[split:]):
            for event in sse.feed(piece):
                decoder.feed(event.data)
        for event in sse.flush():
            decoder.feed(event.data)
        if decoder.done or decoder.finished:
            encoder.end()
        else:
            encoder.fail(502, "upstream stream ended before the response was complete")
    except (UpstreamFormatError, UpstreamReportedError) as exc:
        assert exc.message
        encoder.fail(502, exc.message)
    return encoder.take()


def complete_in_process(upstream_api: str, inbound_api: str, data: bytes) -> dict[str, Any] | None:
    """The body a client of `inbound_api` receives for upstream body `data`; None for the 502."""
    upstream, inbound = UPSTREAMS[upstream_api], INBOUNDS[inbound_api]
    request = REQUESTS[(inbound_api, False)]
    index = ToolIndex.of(request.tools)
    parsed = orjson.loads(data)
    if not isinstance(parsed, dict):
        return None  # the relay answers 502 for a body that is not an object
    try:
        result = upstream.response_to_ir(parsed, index)
    except (UpstreamFormatError, UpstreamReportedError) as exc:
        assert exc.message
        return None
    if upstream.function_only:
        result = unwrap_response(result, index)
    return dict(orjson.loads(inbound.response_body(result, request, "resp_fuzz")))


# Enough cases per inbound × upstream pair: 2,000 under the `ci` profile, 20,000 under `slow`.
BULK = settings(max_examples=20 * settings().max_examples)


@pytest.mark.parametrize("upstream_api", UPSTREAM_APIS)
def test_every_mutated_upstream_stream_ends_properly_for_every_client(upstream_api: str) -> None:
    @BULK
    @given(data=fuzzed_stream(upstream_api), split=st.integers(0, 4000))
    def check(data: bytes, split: int) -> None:
        for inbound_api in PATHS:
            completed = assert_client_stream(inbound_api, stream_in_process(upstream_api, inbound_api, data, split))
            event(f"{inbound_api} stream {'completed' if completed else 'failed in-band'}")

    check()


@pytest.mark.parametrize("upstream_api", UPSTREAM_APIS)
def test_every_mutated_upstream_body_answers_well_formed_or_502(upstream_api: str) -> None:
    @BULK
    @given(data=fuzzed_body(upstream_api))
    def check(data: bytes) -> None:
        for inbound_api in PATHS:
            body = complete_in_process(upstream_api, inbound_api, data)
            event(f"{inbound_api} body {'answered' if body is not None else '502'}")
            if body is not None:
                assert_client_body(inbound_api, body)

    check()


# ---- through the real proxy -------------------------------------------------------------------------------


def wait_records(proxy: Proxy, count: int) -> list[Any]:
    records = proxy.sink.wait(count, timeout=10)
    assert len(records) == count, f"expected {count} ledger rows, got {len(records)}"
    return records


@pytest.mark.parametrize("upstream_api", UPSTREAM_APIS)
def test_mutated_upstream_through_the_proxy(upstream_api: str, multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy(upstream_api)
    fake = proxy.upstream
    assert fake is not None
    calls = 0

    @settings(max_examples=max(30, settings().max_examples // 2))
    @given(
        inbound_api=st.sampled_from(list(PATHS)),
        streamed=st.booleans(),
        stream_data=fuzzed_stream(upstream_api),
        body_data=fuzzed_body(upstream_api),
    )
    def check(inbound_api: str, streamed: bool, stream_data: bytes, body_data: bytes) -> None:
        nonlocal calls
        if streamed:
            fake.script(Reply(200, [stream_data[i : i + 300] for i in range(0, len(stream_data), 300)]))
        else:
            fake.script(Reply(200, [body_data], "application/json"))
        headers, harness = HARNESS_HEADERS[inbound_api]
        response = httpx.post(
            proxy.url + PATHS[inbound_api], json=client_body(inbound_api, streamed), headers=headers, timeout=20
        )
        calls += 1
        record = wait_records(proxy, calls)[-1]
        if streamed:
            assert response.status_code == 200
            completed = assert_client_stream(inbound_api, response.content)
        else:
            # 502 for a broken answer; 529 when the mutated answer reads as the upstream's own error.
            assert response.status_code in (200, 502, 529), response.text
            completed = response.status_code == 200
            if completed:
                assert_client_body(inbound_api, response.json())
            else:
                assert_error_body(inbound_api, response.json())
        assert record.harness == harness and record.inbound_api == inbound_api
        assert record.upstream_api == upstream_api and record.provider
        assert record.requested_model == client_body(inbound_api, streamed)["model"]
        assert record.served_model == UPSTREAM_MODELS[upstream_api].split("/", 1)[1]
        assert record.streamed == streamed
        expected = ("completed",) if completed else ("incomplete_stream", "upstream_error")
        assert record.outcome in expected, (record.outcome, record.error)
        assert completed or record.error
        for tokens in (record.input_tokens, record.output_tokens, record.cache_read_tokens, record.reasoning_tokens):
            assert_count(tokens)

    check()
    assert len(wait_records(proxy, calls)) == calls
