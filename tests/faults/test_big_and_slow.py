"""Very large answers and very slow readers: a 50 MB upstream answer reaches every inbound API intact,
and a client reading one byte per second holds the upstream back instead of filling the proxy's memory."""

from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream, Reply
from tests.faults.test_upstream_faults import PATHS, body_for
from tests.ledger.test_ledger_proxy import rows
from tests.servers import free_port, send_post, serve, serve_process, wait_until

FIFTY_MB = 50 * 1024 * 1024
USAGE = {"prompt_tokens": 11, "completion_tokens": 13_107_200, "total_tokens": 13_107_211}


def big_answer(total: int, stream: bool) -> tuple[Reply, str]:
    """An upstream chat answer carrying `total` characters of text, and that text."""
    pieces = [f"{index:09d}" + "abcdefghij" * 99 + "\n" for index in range(total // 1000)]
    text = "".join(pieces)
    if not stream:
        body = orjson.dumps(
            {
                "id": "chatcmpl-big",
                "object": "chat.completion",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": USAGE,
            }
        )
        return Reply(200, [body[i : i + (1 << 20)] for i in range(0, len(body), 1 << 20)], "application/json"), text
    events = [b'data: {"choices":[{"index":0,"delta":{"content":' + orjson.dumps(p) + b"}}]}\n\n" for p in pieces]
    events.append(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    events.append(b'data: {"choices":[],"usage":' + orjson.dumps(USAGE) + b"}\n\ndata: [DONE]\n\n")
    sends = [b"".join(events[i : i + 64]) for i in range(0, len(events), 64)]  # ~64 KB per write
    return Reply(200, sends), text


def streamed_text(api: str, body: bytes) -> tuple[str, bool]:
    """The text a streaming client reassembles, and whether the stream ended normally."""
    parts: list[str] = []
    finished = False
    for line in body.split(b"\n"):
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            finished = finished or line == b"data: [DONE]"
            continue
        event = orjson.loads(line[6:])
        if api == "anthropic":
            if event["type"] == "content_block_delta" and event["delta"]["type"] == "text_delta":
                parts.append(event["delta"]["text"])
            finished = finished or event["type"] == "message_stop"
        elif api == "openai-chat":
            for choice in event.get("choices", []):
                parts.append(choice["delta"].get("content") or "")
        else:
            if event["type"] == "response.output_text.delta":
                parts.append(event["delta"])
            finished = finished or event["type"] == "response.completed"
    return "".join(parts), finished


def whole_text(api: str, payload: dict[str, Any]) -> str:
    if api == "anthropic":
        return "".join(block["text"] for block in payload["content"] if block["type"] == "text")
    if api == "openai-chat":
        return str(payload["choices"][0]["message"]["content"])
    return "".join(
        part["text"]
        for item in payload["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("api", list(PATHS))
def test_fifty_megabyte_answer_arrives_intact(kimi_proxy: Proxy, api: str, stream: bool) -> None:
    assert kimi_proxy.upstream is not None
    reply, text = big_answer(FIFTY_MB, stream)
    kimi_proxy.upstream.script(reply)
    response = httpx.post(kimi_proxy.url + PATHS[api], json=body_for(api, stream), timeout=120)
    assert response.status_code == 200
    if stream:
        received, finished = streamed_text(api, response.content)
        assert finished
    else:
        received = whole_text(api, response.json())
    assert len(received) == len(text) and digest(received) == digest(text)
    record = kimi_proxy.sink.wait(1)[0]
    assert record.outcome == "completed" and record.usage_reported
    assert record.output_tokens == USAGE["completion_tokens"] and record.input_tokens == 11


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def dechunk(raw: bytes) -> bytes:
    """The body of a chunked HTTP/1.1 response (`raw` starts after the blank line)."""
    body = bytearray()
    position = 0
    while True:
        line_end = raw.index(b"\r\n", position)
        size = int(raw[position:line_end], 16)
        if size == 0:
            return bytes(body)
        body += raw[line_end + 2 : line_end + 2 + size]
        position = line_end + 2 + size + 2


def test_one_byte_per_second_reader_keeps_proxy_memory_bounded_then_gets_everything(isolated_home: Path) -> None:
    fake = FakeChatUpstream()
    port = free_port()
    with serve(fake) as url:
        # A 2 s upstream read timeout: the slow phase below lasts longer, and must not count as the
        # upstream stalling (the proxy itself stopped reading it).
        (isolated_home / "config.toml").write_text(
            f'[server]\nread_timeout = 2.0\n[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8"
        )
        with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}) as proxy:
            warm = httpx.post(f"http://127.0.0.1:{port}/v1/messages", json=body_for("anthropic", True), timeout=10)
            assert warm.status_code == 200
            wait_until(lambda: len(rows(isolated_home)) == 1)  # the writer has loaded its price table
            reply, text = big_answer(FIFTY_MB, True)
            fake.script(reply)
            fake.sent_bytes = 0
            rss_before = rss_bytes(proxy.pid)
            request = orjson.dumps(body_for("anthropic", True))
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", port))
                send_post(sock, "/v1/messages", request)
                received = bytearray()
                for _ in range(6):
                    received += sock.recv(1)
                    time.sleep(1.0)  # the slow reader under test, not a wait for a condition
                offered_while_slow = fake.sent_bytes
                rss_while_slow = rss_bytes(proxy.pid)
                sock.settimeout(30)
                while not received.endswith(b"\r\n0\r\n\r\n"):
                    chunk = sock.recv(1 << 20)
                    assert chunk, "proxy closed the stream early"
                    received += chunk
            assert received.startswith(b"HTTP/1.1 200")
            body = dechunk(bytes(received[received.index(b"\r\n\r\n") + 4 :]))
            streamed, finished = streamed_text("anthropic", body)
            assert finished and b"event: error" not in body
            assert digest(streamed) == digest(text)
            # The upstream was held back (53 MB on offer) and the proxy did not buffer what it had read.
            assert offered_while_slow < 24 * 1024 * 1024, offered_while_slow
            assert rss_while_slow - rss_before < 16 * 1024 * 1024, (rss_before, rss_while_slow)
            wait_until(lambda: len(rows(isolated_home)) == 2)
            last = rows(isolated_home)[-1]
            assert last["outcome"] == "completed" and last["output_tokens"] == USAGE["completion_tokens"]
