"""A fast fake OpenAI-compatible chat upstream for benchmarks (an ASGI app, or its own process).

Streams `CHUNKS` content chunks (one `send` each, yielding to the loop between them), then the
finish chunk, the usage chunk and `[DONE]`; non-streamed requests get one JSON completion.
Standalone: `upstream_server.py PORT [--fail-every N]`. With `--fail-every N`, every Nth request
fails, in turn: HTTP 500 before any byte, a connection reset mid-stream, a stream that stops
without its finish chunk. `GET /stats` tells how many requests came and how many were failed.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson
import uvicorn

CHUNKS = 100
_BASE = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def _event(extra: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps({**_BASE, **extra}) + b"\n\n"


STREAM_CHUNKS = [
    _event({"choices": [{"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}]}) for i in range(CHUNKS)
]
STREAM_TAIL = [
    _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    _event(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 13000,
                "completion_tokens": 100,
                "total_tokens": 13100,
                "prompt_tokens_details": {"cached_tokens": 12000},
            },
        }
    ),
    b"data: [DONE]\n\n",
]
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " * 50}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 13000, "completion_tokens": 100, "total_tokens": 13100},
    }
)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        return
    if scope["method"] == "GET" and scope["path"] == "/stats":
        payload = orjson.dumps({"requests": STATS["requests"], "injected": STATS["injected"]})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    STATS["requests"] += 1
    if FAIL_EVERY and STATS["requests"] % FAIL_EVERY == 0:
        STATS["injected"] += 1
        await _fail(STATS["injected"] % 3, send)
        return
    if b'"stream":true' in body:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for chunk in STREAM_CHUNKS:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(0)  # let other work run between tokens, as a real stream does
        for chunk in STREAM_TAIL:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    else:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(COMPLETION)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": COMPLETION})


async def _fail(kind: int, send: Any) -> None:
    if kind == 0:
        error = b'{"error":{"message":"injected failure","type":"server_error"}}'
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(error)).encode())]
        await send({"type": "http.response.start", "status": 500, "headers": headers})
        await send({"type": "http.response.body", "body": error})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for chunk in STREAM_CHUNKS[:10]:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    if kind == 1:
        raise ConnectionResetError("injected reset mid-stream")  # uvicorn drops the connection
    await send({"type": "http.response.body", "body": b"", "more_body": False})


STATS = {"requests": 0, "injected": 0}
FAIL_EVERY = 0

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--fail-every", type=int, default=0)
    arguments = parser.parse_args()
    FAIL_EVERY = arguments.fail_every
    uvicorn.run(app, host="127.0.0.1", port=arguments.port, log_level="critical", access_log=False)
