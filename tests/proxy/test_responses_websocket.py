"""The Responses API over a WebSocket on /v1/responses (Codex's preferred transport), driven with the
`websockets` client against the real proxy on loopback: each turn goes through the relay as an HTTP call
does, events come back one message each, errors as `error` events, and upgrades are guarded like HTTP."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.chat_grammar import assert_valid_chat_request
from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream, Reply, ToolCall, Turn, chat_chunks
from tests.proxy.test_responses_and_chat import TOOLS
from tests.servers import wait_until

BETA = {"OpenAI-Beta": "responses_websockets=2026-02-06", "originator": "codex_exec"}
TERMINAL = {"response.completed", "response.failed", "response.incomplete", "error"}


def ws_url(proxy: Proxy, path: str = "/v1/responses") -> str:
    return proxy.url.replace("http://", "ws://") + path


@contextmanager
def socket(proxy: Proxy, headers: dict[str, str] | None = None) -> Iterator[ClientConnection]:
    with connect(ws_url(proxy), additional_headers={**BETA, **(headers or {})}, open_timeout=10) as ws:
        yield ws


def receive(ws: ClientConnection) -> dict[str, Any]:
    message = ws.recv(timeout=15)
    assert isinstance(message, str)
    event = orjson.loads(message)
    assert isinstance(event, dict) and isinstance(event["type"], str)
    return event


def one_turn(ws: ClientConnection, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Send `response.create` and collect events up to the terminal one."""
    ws.send(orjson.dumps({"type": "response.create", **body}).decode())
    events = [receive(ws)]
    while events[-1]["type"] not in TERMINAL:
        events.append(receive(ws))
    return events


def create(**body: Any) -> dict[str, Any]:
    return {"model": "gpt-5.5", "instructions": "You are Codex.", "store": False, "stream": True, **body}


def _sse_events(stream: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in stream.split(b"\n") if line.startswith(b"data: ")]


def _shape(events: list[dict[str, Any]]) -> list[Any]:
    """Event types with their deltas: what must match between HTTP SSE and WebSocket (ids differ)."""
    return [(event["type"], event.get("delta"), event.get("item", {}).get("type")) for event in events]


def test_a_tool_loop_over_a_websocket_is_a_chat_call_per_turn_recorded_as_websocket(kimi_proxy: Proxy) -> None:
    upstream = kimi_proxy.upstream
    assert upstream is not None
    upstream.script(
        Turn(reasoning="List first.", tool_calls=[ToolCall("exec_command", '{"cmd": "ls"}', "call_1")]),
        Turn(text="There is a.txt."),
    )
    with socket(kimi_proxy) as ws:
        first = one_turn(ws, create(input="what is here?", tools=TOOLS))
        assert first[0]["type"] == "response.created" and first[-1]["type"] == "response.completed"
        kinds = {event["type"] for event in first}
        assert {"response.output_item.added", "response.function_call_arguments.delta"} <= kinds
        calls = [item for item in first[-1]["response"]["output"] if item["type"] == "function_call"]
        assert calls and calls[0]["name"] == "exec_command"
        # Codex's second turn over the same socket: only the new items, chained by previous_response_id.
        output = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "a.txt"}
        second = one_turn(
            ws, create(input=[output], tools=TOOLS, store=True, previous_response_id=first[-1]["response"]["id"])
        )
        assert second[-1]["type"] == "response.completed", second[-1]
        assert "".join(e["delta"] for e in second if e["type"] == "response.output_text.delta") == "There is a.txt."
    sent = upstream.received[1].json
    assert_valid_chat_request(sent)
    roles = [message["role"] for message in sent["messages"]]
    assert roles == ["system", "user", "assistant", "tool"] and sent["messages"][-1]["content"] == "a.txt"
    rows = kimi_proxy.sink.wait(2)
    assert [row.transport for row in rows] == ["websocket", "websocket"]
    assert {(row.inbound_api, row.upstream_api, row.outcome, row.harness) for row in rows} == {
        ("openai-responses", "openai-chat", "completed", "codex")
    }
    assert all(row.streamed and row.output_tokens == 30 for row in rows)


def test_a_websocket_turn_is_translated_exactly_as_the_same_call_over_http(kimi_proxy: Proxy) -> None:
    upstream = kimi_proxy.upstream
    assert upstream is not None
    answer = Turn(reasoning="Think.", text="Done.", tool_calls=[ToolCall("exec_command", '{"cmd": "pwd"}', "c9")])
    upstream.script(answer, answer)
    body = create(input="where am I?", tools=TOOLS)
    with socket(kimi_proxy) as ws:
        over_ws = one_turn(ws, body)
    reply = httpx.post(kimi_proxy.url + "/v1/responses", json=body, headers=BETA, timeout=15)
    assert reply.status_code == 200
    over_http = _sse_events(reply.content)
    assert _shape(over_ws) == _shape(over_http)
    assert upstream.received[0].json == upstream.received[1].json
    rows = kimi_proxy.sink.wait(2)
    assert [row.transport for row in rows] == ["websocket", "http"]


def test_a_warm_up_calls_no_model_and_the_next_turn_chains_from_it(kimi_proxy: Proxy) -> None:
    upstream = kimi_proxy.upstream
    assert upstream is not None
    with socket(kimi_proxy) as ws:
        warm = one_turn(ws, {**create(input="hello", tools=TOOLS), "generate": False})
        assert [event["type"] for event in warm] == ["response.created", "response.completed"]
        assert not upstream.received
        then = one_turn(ws, create(input="and now?", previous_response_id=warm[-1]["response"]["id"]))
        assert then[-1]["type"] == "response.completed"
    texts = [message["content"] for message in upstream.received[0].json["messages"] if message["role"] == "user"]
    assert texts == ["hello", "and now?"]
    assert len(kimi_proxy.sink.wait(1)) == 1


def test_errors_are_error_events_and_the_socket_keeps_serving(kimi_proxy: Proxy) -> None:
    upstream = kimi_proxy.upstream
    assert upstream is not None
    upstream.script(Reply(429, [b'{"error": {"message": "slow down", "type": "rate_limit"}}'], "application/json"))
    with socket(kimi_proxy) as ws:
        ws.send("{not json")
        assert receive(ws)["error"]["message"].startswith("message is not valid JSON")
        ws.send('["response.create"]')
        assert receive(ws)["error"]["param"] == "type"
        ws.send('{"type": "conversation.item.create"}')
        assert receive(ws)["error"]["code"] == "unknown_message_type"
        ws.send('{"type": "response.processed", "response_id": "resp_1"}')  # acknowledged silently
        bad = one_turn(ws, create(input=[{"type": "nonsense"}]))
        assert bad[-1]["type"] == "error" and bad[-1]["status"] == 400
        missing = one_turn(ws, create(input="x", previous_response_id="resp_gone"))
        assert missing[-1]["error"]["code"] == "previous_response_not_found"
        limited = one_turn(ws, create(input="hi"))
        assert limited[-1]["type"] in ("error", "response.failed")
        fine = one_turn(ws, create(input="hi"))
        assert fine[-1]["type"] == "response.completed"
    outcomes = [row.outcome for row in kimi_proxy.sink.wait(4)]
    assert outcomes[:2] == ["rejected", "rejected"] and outcomes[-1] == "completed"


def slow_stream_started(proxy: Proxy, ws: ClientConnection) -> FakeChatUpstream:
    """Script a slow 400-character answer and start a turn on it."""
    upstream = proxy.upstream
    assert upstream is not None
    chunks = [b"data: " + orjson.dumps(c) + b"\n\n" for c in chat_chunks(Turn(text="x" * 400), "m", upstream.counter)]
    upstream.script(Reply(200, chunks, delay_between=0.2))
    ws.send(orjson.dumps({"type": "response.create", **create(input="long")}).decode())
    return upstream


def test_a_second_create_while_one_streams_is_refused_and_cancel_ends_the_turn(kimi_proxy: Proxy) -> None:
    with socket(kimi_proxy) as ws:
        upstream = slow_stream_started(kimi_proxy, ws)
        assert receive(ws)["type"] == "response.created"
        ws.send(orjson.dumps({"type": "response.create", **create(input="again")}).decode())
        while (event := receive(ws))["type"] != "error":
            pass
        assert event["error"]["code"] == "response_in_progress"
        ws.send('{"type": "response.cancel"}')
        while (event := receive(ws))["type"] not in TERMINAL:
            pass
        assert event["error"]["code"] == "response_cancelled"
        wait_until(lambda: upstream.disconnects == 1, what="the upstream call to be cancelled")
        assert one_turn(ws, create(input="short"))[-1]["type"] == "response.completed"
    rows = kimi_proxy.sink.wait(2)
    assert rows[0].outcome == "client_cancelled" and rows[0].transport == "websocket"


def test_a_client_that_hangs_up_mid_stream_cancels_the_upstream_call(kimi_proxy: Proxy) -> None:
    with socket(kimi_proxy) as ws:
        upstream = slow_stream_started(kimi_proxy, ws)
        while receive(ws)["type"] != "response.output_text.delta":
            pass
    wait_until(lambda: upstream.disconnects == 1, what="the upstream call to be cancelled")
    wait_until(lambda: len(kimi_proxy.sink.records) == 1, what="the cancelled turn's row")
    row = kimi_proxy.sink.records[0]
    assert (row.outcome, row.transport, row.upstream_api) == ("client_cancelled", "websocket", "openai-chat")


def test_too_big_binary_and_idle_sockets_are_closed_with_a_reason(
    fake_chat: tuple[FakeChatUpstream, str], start_proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    proxy = start_proxy(
        f'[providers.baseten]\nbase_url = "{fake_chat[1]}"\n', max_body_bytes=2048, websocket_idle_timeout=0.5
    )
    with socket(proxy) as ws:
        ws.send(orjson.dumps({"type": "response.create", **create(input="z" * 4096)}).decode())
        with pytest.raises(ConnectionClosed) as big:
            ws.recv(timeout=10)
    assert big.value.rcvd is not None and big.value.rcvd.code == 1009 and "2048-byte limit" in big.value.rcvd.reason
    with socket(proxy) as ws:
        ws.send(b'{"type": "response.create"}')
        with pytest.raises(ConnectionClosed) as binary:
            ws.recv(timeout=10)
    assert binary.value.rcvd is not None and binary.value.rcvd.code == 1003
    with socket(proxy) as ws, pytest.raises(ConnectionClosed) as idle:
        ws.recv(timeout=10)
    assert idle.value.rcvd is not None and idle.value.rcvd.code == 1001
    assert "websocket_idle_timeout" in idle.value.rcvd.reason


def _refused(proxy: Proxy, headers: dict[str, str], path: str = "/v1/responses") -> tuple[int, dict[str, Any]]:
    with pytest.raises(InvalidStatus) as caught:
        with connect(ws_url(proxy, path), additional_headers={**BETA, **headers}, open_timeout=10):
            pass
    response = caught.value.response
    return response.status_code, orjson.loads(response.body or b"{}")


def test_websockets_off_is_a_readable_426_and_recorded(
    fake_chat: tuple[FakeChatUpstream, str], start_proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = start_proxy(f'[server]\nwebsockets = false\n[providers.baseten]\nbase_url = "{fake_chat[1]}"\n')
    status, body = _refused(proxy, {})
    assert status == 426 and "websockets = true" in body["error"]["message"]
    row = proxy.sink.wait(1)[0]
    assert (row.outcome, row.http_status, row.transport, row.harness) == ("rejected", 426, "websocket", "codex")
    # HTTP keeps serving.
    assert httpx.get(proxy.url + "/healthz").status_code == 200


def test_the_upgrade_is_guarded_like_http_and_refusals_are_recorded(
    fake_chat: tuple[FakeChatUpstream, str], start_proxy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    plain = start_proxy(f'[providers.baseten]\nbase_url = "{fake_chat[1]}"\n')
    status, body = _refused(plain, {"Origin": "https://evil.example"})
    assert status == 403 and "Origin" in body["error"]["message"]
    status, body = _refused(plain, {"Host": "attacker.example:8742"})
    assert status == 403 and "loopback" in body["error"]["message"]
    status, _body = _refused(plain, {}, "/v1/realtime")
    assert status == 404
    token = "tok-" + "7" * 24
    guarded = start_proxy(
        f'[server]\naccess_token = "{token}"\n[providers.baseten]\nbase_url = "{fake_chat[1]}"\n', sink=None
    )
    status, body = _refused(guarded, {})
    assert status == 401 and token not in orjson.dumps(body).decode()
    with socket(guarded, {"x-switch-token": token}) as ws:
        assert one_turn(ws, create(input="hi"))[-1]["type"] == "response.completed"
    refused = [row for row in plain.sink.records if row.outcome == "rejected"]
    assert [row.http_status for row in refused] == [403, 403]
    assert all(row.transport == "websocket" for row in refused)
    assert [row.http_status for row in guarded.sink.wait(2)] == [401, 200]


MESSAGE_KINDS = st.sampled_from(["response.create", "response.cancel", "response.processed", "session.update", ""])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
BODY_KEYS = st.sampled_from(["model", "input", "instructions", "tools", "previous_response_id", "generate", "stream"])
MESSAGES = st.one_of(
    st.text(max_size=60),
    JSON_VALUES.map(json.dumps),  # json, not orjson: integers past 64 bits and infinities too
    st.builds(
        lambda kind, body: json.dumps({"type": kind, **body}),
        MESSAGE_KINDS,
        st.dictionaries(BODY_KEYS, JSON_VALUES, max_size=5),
    ),
)
MARKER = '{"type": "x.marker"}'


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=MESSAGES)
def test_malformed_messages_get_a_protocol_error_never_a_crash(
    kimi_proxy: Proxy, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    with socket(kimi_proxy) as ws:
        ws.send(message)
        ws.send(MARKER)
        while True:
            event = receive(ws)
            if event["type"] == "error" and "x.marker" in event["error"]["message"]:
                break
            assert event["type"].startswith(("response.", "error"))
            if event["type"] == "error":
                assert isinstance(event["status"], int) and event["error"]["message"]
    assert not [r for r in caplog.records if r.name.startswith("switch") and r.levelno >= logging.ERROR]


SSE_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["response.created", "response.output_text.delta", "response.completed", None, "ping"]),
        JSON_VALUES.map(lambda value: json.dumps(value, separators=(",", ":"))),
    ),
    max_size=8,
)


@given(events=SSE_EVENTS, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=6))
def test_the_sse_splitter_yields_each_event_payload_whatever_the_chunking(
    events: list[tuple[str | None, str]], cuts: list[int]
) -> None:
    from switch.proxy.responses_ws import _SseToMessages

    stream = b""
    wanted = []
    for name, data in events:
        if name == "ping":
            stream += b": ping\n\n"  # a comment: no message
            continue
        stream += ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()
        wanted.append(data.encode())
    splitter = _SseToMessages()
    got: list[bytes] = []
    previous = 0
    for cut in sorted({min(cut, len(stream)) for cut in cuts} | {len(stream)}):
        got += splitter.feed(stream[previous:cut])
        previous = cut
    assert got == wanted and splitter.pending == b""
    assert splitter.terminal == any(name == "response.completed" for name, _data in events)
