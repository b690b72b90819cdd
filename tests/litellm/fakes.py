"""Real loopback stand-ins for two non-native APIs LiteLLM speaks: Ollama's /api/chat and Gemini's generateContent.

Each answers the `Turn`s queued with `script` (text, reasoning, tool calls, usage), streamed or not as
the request asks, in that API's own wire format (Ollama: NDJSON; Gemini: SSE with `alt=sse`), or a raw
`Reply` (an error status). Everything received is kept in `received`, headers included, for assertions
on which key reached which server.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson

from tests.fake_upstream import Received, Reply, Turn, read_body


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class _Scripted:
    """What both fakes share: a queue of answers, a record of requests, and the ASGI plumbing."""

    def __init__(self) -> None:
        self.queue: list[Turn | Reply] = []
        self.received: list[Received] = []
        self.counter = itertools.count()

    def script(self, *answers: Turn | Reply) -> None:
        self.queue.extend(answers)

    def next_answer(self) -> Turn | Reply:
        return self.queue.pop(0) if self.queue else Turn(text="Hello from the fake.")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode()
        self.received.append(Received(scope["path"] + ("?" + query if query else ""), headers, body))
        answer = self.next_answer()
        if isinstance(answer, Turn):
            answer = self.render(answer, orjson.loads(body) if body else {}, scope["path"], query)
        if answer.delay_before:
            await asyncio.sleep(answer.delay_before)  # the scripted upstream being slow, not a wait for a condition
        headers_out = [(b"content-type", answer.content_type.encode())]
        headers_out += [(k.encode(), v.encode()) for k, v in answer.headers.items()]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers_out})
        for chunk in answer.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def render(self, turn: Turn, request: dict[str, Any], path: str, query: str) -> Reply:
        raise NotImplementedError


class FakeOllama(_Scripted):
    """Ollama's chat API: POST /api/chat, NDJSON lines when `stream` is true, one JSON object when not."""

    def render(self, turn: Turn, request: dict[str, Any], path: str, query: str) -> Reply:
        if path != "/api/chat":
            return Reply(404, [b'{"error":"not found"}'], "application/json")
        model = request.get("model", "")
        calls = [{"function": {"name": c.name, "arguments": orjson.loads(c.arguments)}} for c in turn.tool_calls]
        done = {
            "model": model,
            "created_at": "2026-01-01T00:00:00Z",
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": turn.prompt_tokens,
            "eval_count": turn.completion_tokens,
        }
        if not request.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text}
            if turn.reasoning:
                message["thinking"] = turn.reasoning
            if calls:
                message["tool_calls"] = calls
            return Reply(200, [orjson.dumps({**done, "message": message})], "application/json")
        lines: list[dict[str, Any]] = []
        for piece in _pieces(turn.reasoning, turn.fragment):
            lines.append(
                {"model": model, "message": {"role": "assistant", "content": "", "thinking": piece}, "done": False}
            )
        for piece in _pieces(turn.text, turn.fragment):
            lines.append({"model": model, "message": {"role": "assistant", "content": piece}, "done": False})
        if calls:
            # Ollama sends each tool call whole, in one line.
            lines.append(
                {"model": model, "message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": False}
            )
        lines.append({**done, "message": {"role": "assistant", "content": ""}})
        return Reply(200, [orjson.dumps(line) + b"\n" for line in lines], "application/x-ndjson")


class FakeGemini(_Scripted):
    """Gemini's API: POST /models/M:generateContent, or :streamGenerateContent?alt=sse for a stream."""

    def render(self, turn: Turn, request: dict[str, Any], path: str, query: str) -> Reply:
        usage = {
            "promptTokenCount": turn.prompt_tokens,
            "candidatesTokenCount": turn.completion_tokens,
            "totalTokenCount": turn.prompt_tokens + turn.completion_tokens + turn.reasoning_tokens,
            "cachedContentTokenCount": turn.cached_tokens,
            "thoughtsTokenCount": turn.reasoning_tokens if turn.reasoning else 0,
        }
        calls = [{"functionCall": {"name": c.name, "args": orjson.loads(c.arguments)}} for c in turn.tool_calls]
        if path.endswith(":generateContent"):
            parts: list[dict[str, Any]] = []
            if turn.reasoning:
                parts.append({"text": turn.reasoning, "thought": True})
            if turn.text:
                parts.append({"text": turn.text})
            parts += calls
            body = {
                "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": usage,
                "modelVersion": path.split("/")[-1].split(":")[0],
            }
            return Reply(200, [orjson.dumps(body)], "application/json")
        if not path.endswith(":streamGenerateContent") or "alt=sse" not in query:
            return Reply(
                404, [b'{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}'], "application/json"
            )
        chunks: list[list[dict[str, Any]]] = [
            [{"text": p, "thought": True}] for p in _pieces(turn.reasoning, turn.fragment)
        ]
        chunks += [[{"text": p}] for p in _pieces(turn.text, turn.fragment)]
        if calls:
            chunks.append(calls)
        events: list[bytes] = []
        for number, chunk_parts in enumerate(chunks or [[{"text": ""}]]):
            last = number == max(len(chunks), 1) - 1
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": chunk_parts}, "index": 0}
            event: dict[str, Any] = {"candidates": [candidate]}
            if last:
                candidate["finishReason"] = "STOP"
                event["usageMetadata"] = usage
            events.append(b"data: " + orjson.dumps(event) + b"\r\n\r\n")
        return Reply(200, events, "text/event-stream")
