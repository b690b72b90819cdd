"""Upstream faults on every inbound API, streamed and not: the client always gets a well-formed answer
or error in its own format, the call is recorded once with the right outcome, the proxy keeps serving."""

from __future__ import annotations

import gzip
import socket
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import Reply, Turn, chat_chunks

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}


def body_for(api: str, stream: bool) -> dict[str, Any]:
    if api == "anthropic":
        return {"model": "m", "max_tokens": 50, "stream": stream, "messages": [{"role": "user", "content": "x"}]}
    if api == "openai-chat":
        return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "x"}]}
    return {"model": "m", "stream": stream, "input": "x"}


def sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks]


GOOD = chat_chunks(Turn(text="fine answer"), "m", iter(range(99)))  # type: ignore[arg-type]
ERROR_BODIES = {
    "json": (b'{"error":{"message":"upstream says no"}}', "application/json"),
    "html": (b"<html><body><h1>Bad gateway</h1></body></html>", "text/html"),
    "empty": (b"", "application/json"),
}


def status_reply(status: int, kind: str) -> Callable[[bool], Reply]:
    body, content_type = ERROR_BODIES[kind]
    return lambda _streamed: Reply(status, [body] if body else [], content_type)


FAULTS: dict[str, tuple[Callable[[bool], Reply], str, int | None]] = {
    # name: (reply for streamed?, expected outcome, expected status when not streamed (None: 200 completed))
    **{
        f"http_{status}_{kind}": (status_reply(status, kind), "upstream_error", status)
        for status in (500, 502, 503, 529, 429)
        for kind in ERROR_BODIES
    },
    "reset_mid_body": (
        lambda s: (
            Reply(200, sse(GOOD[:3]) + sse(GOOD[3:]), break_after=2)
            if s
            else Reply(200, [b'{"id":"x","choices":[{"mess', b"age"], "application/json", break_after=1)
        ),
        "transport_error",
        502,
    ),
    "stall_before_first_byte": (lambda s: Reply(200, sse(GOOD), delay_before=3), "transport_error", 504),
    "stall_mid_stream": (lambda s: Reply(200, [*sse(GOOD[:3]), *sse(GOOD[3:])], stall_after=2), "transport_error", 504),
    "truncated_json": (
        lambda s: Reply(200, [*sse(GOOD[:3]), b'data: {"choices":[{"delta":{"cont\n\n']),
        "incomplete_stream",
        502,
    ),
    "no_terminating_event": (lambda s: Reply(200, sse(GOOD[:3])), "incomplete_stream", None),
    "missing_data_prefix": (
        lambda s: Reply(200, [orjson.dumps(c) + b"\n\n" for c in GOOD] + [b"[DONE]\n\n"]),
        "incomplete_stream",
        502,
    ),
    "garbage_lines": (
        lambda s: Reply(200, [b": comment\n", b"garbage line without colon\n\n", *sse(GOOD), b"data: [DONE]\n\n"]),
        "completed",
        None,
    ),
    "invalid_utf8": (
        lambda s: Reply(200, [*sse(GOOD[:2]), b'data: {"choices":[{"delta":{"content":"\xff\xfe"}}]}\n\n']),
        "incomplete_stream",
        502,
    ),
    "gzip_body": (
        lambda s: Reply(
            200, [gzip.compress(b"".join([*sse(GOOD), b"data: [DONE]\n\n"]))], headers={"content-encoding": "gzip"}
        ),
        "completed",
        None,
    ),
    "ignores_stream_true": (
        lambda s: Reply(
            200,
            [
                orjson.dumps(
                    {
                        "id": "c",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "fine answer"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
                    }
                )
            ],
            "application/json",
        ),
        "completed",
        None,
    ),
}


def assert_error_shape(api: str, payload: Any) -> None:
    if api == "anthropic":
        assert payload["type"] == "error" and set(payload["error"]) >= {"type", "message"}
    else:
        assert set(payload["error"]) == {"message", "type", "param", "code"}


def assert_stream_well_formed(api: str, text: str, completed: bool) -> None:
    if api == "anthropic":
        assert text.startswith("event: message_start")
        assert ("event: message_stop" in text) == completed and (("event: error" in text) != completed)
    elif api == "openai-chat":
        assert text.rstrip().endswith("data: [DONE]")  # the stream is terminated either way
        assert ('data: {"error"' in text) != completed
    else:
        assert '"type":"response.created"' in text
        assert ('"type":"response.completed"' in text) == completed
        assert ('"type":"response.failed"' in text) != completed


STREAM_ONLY = {
    "stall_mid_stream",
    "no_terminating_event",
    "truncated_json",
    "invalid_utf8",
    "garbage_lines",
    "missing_data_prefix",
}
CASES = [
    (api, stream, fault)
    for api in PATHS
    for stream in (True, False)
    for fault in FAULTS
    if stream or fault not in STREAM_ONLY
]


@pytest.mark.parametrize(("api", "stream", "fault"), CASES)
def test_upstream_fault(kimi_proxy: Proxy, api: str, stream: bool, fault: str) -> None:
    make, outcome, status = FAULTS[fault]
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(make(stream))
    response = httpx.post(kimi_proxy.url + PATHS[api], json=body_for(api, stream), timeout=20)
    records = kimi_proxy.sink.wait(1)
    assert len(records) == 1 and records[0].outcome == outcome, (records[0].outcome, records[0].error)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        assert response.status_code == 200
        assert_stream_well_formed(api, response.text, outcome == "completed")
    elif outcome == "completed":
        assert response.status_code == 200 and "fine answer" in response.text
    else:
        assert response.status_code == status, response.text
        assert_error_shape(api, response.json())
    assert FAKE_BASETEN_KEY not in response.text
    kimi_proxy.upstream.script(Turn(text="still serving"))
    again = httpx.post(kimi_proxy.url + PATHS[api], json=body_for(api, False), timeout=20)
    assert again.status_code == 200


def test_connection_refused_on_every_api(start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "http://127.0.0.1:{port}/v1"\n')
    for api in PATHS:
        for stream in (True, False):
            response = httpx.post(proxy.url + PATHS[api], json=body_for(api, stream), timeout=20)
            assert response.status_code == 502
            assert_error_shape(api, response.json())
    assert [r.outcome for r in proxy.sink.wait(6)] == ["transport_error"] * 6
