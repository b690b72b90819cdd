"""A simulated Kimi-style chat completions upstream, for `switch demo` (no key, no network).

It answers like Kimi served on vLLM: reasoning in `reasoning_content` deltas, tool calls with
`functions.<name>:<n>` ids, usage after the finish chunk with cached prompt tokens, and a 400 when an
earlier assistant tool-call turn comes back without its `reasoning_content` (what the real one does with
thinking on). Every answer says it is simulated.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# Seconds before the first token, per simulated model: the bigger model thinks longer.
FIRST_TOKEN_DELAY = {"kimi-sim": 0.25, "kimi-sim-fast": 0.1, "kimi-sim-mini": 0.05}
CHUNK_DELAY = 0.004
FRAGMENT = 12
# Prompt-cache memory: prefix digests seen so far, forgotten all at once past this many.
CACHE_LIMIT = 10_000
BYTES_PER_TOKEN = 4


def missing_reasoning(messages: list[Any]) -> str | None:
    """Kimi's refusal when an assistant tool-call turn lacks its reasoning, else None."""
    for index, message in enumerate(messages):
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and message.get("tool_calls")
            and not message.get("reasoning_content")
        ):
            return (
                f"thinking is enabled but reasoning_content is missing in assistant tool call message at index {index}"
            )
    return None


def _tokens(text: str) -> int:
    return max(1, len(text) // BYTES_PER_TOKEN)


def _pieces(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


class Answer:
    """What the simulated model says to one request."""

    def __init__(self, reasoning: str, text: str, tool: tuple[str, str] | None) -> None:
        self.reasoning = reasoning
        self.text = text
        self.tool = tool  # (name, JSON arguments)


def answer_for(model: str, messages: list[Any], tools: list[Any]) -> Answer:
    """A deterministic answer: call the first tool while no tool result is in the conversation, else reply."""
    has_result = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
    asked = _last_user_text(messages).strip().replace("\n", " ")[:60]
    if tools and not has_result:
        function = tools[0].get("function") if isinstance(tools[0], dict) else None
        name = str(function.get("name") or "tool") if isinstance(function, dict) else "tool"
        return Answer(
            f"The user asked: {asked!r}. I should look before answering, so I call {name} first.",
            "",
            (name, json.dumps({"command": "ls"}) if name.lower() in ("bash", "shell", "exec_command") else "{}"),
        )
    return Answer(
        f"Answering {asked!r} directly; nothing else to look up.",
        f"[simulated answer from demo/{model}] Done: this reply came from switch's built-in demo upstream, "
        "not a real model.",
        None,
    )


class SimulatedKimi:
    """The ASGI app: POST /v1/chat/completions (streamed or not) and GET /v1/models."""

    def __init__(self, paced: bool = True) -> None:
        self.paced = paced  # False: answer at once (tests)
        self.ids = itertools.count()
        self.seen_prefixes: set[bytes] = set()
        self.requests = 0
        self.refusals = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] == "GET" and scope["path"].endswith("/models"):
            models = [{"id": name, "object": "model", "owned_by": "switch-demo"} for name in FIRST_TOKEN_DELAY]
            await self._json(send, 200, {"object": "list", "data": models})
            return
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await self._json(send, 404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        self.requests += 1
        try:
            request = json.loads(body)
        except ValueError:
            await self._json(send, 400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not messages:
            await self._json(send, 400, {"error": {"message": "messages is required", "type": "invalid_request_error"}})
            return
        problem = missing_reasoning(messages)
        if problem is not None:
            self.refusals += 1
            await self._json(send, 400, {"error": {"message": problem, "type": "invalid_request_error"}})
            return
        model = str(request.get("model", "kimi-sim"))
        tools = request.get("tools") if isinstance(request.get("tools"), list) else []
        answer = answer_for(model, messages, tools)
        usage = self._usage(messages, tools, answer)
        call_id = f"functions.{answer.tool[0]}:{next(self.ids)}" if answer.tool else ""
        if self.paced:
            await asyncio.sleep(FIRST_TOKEN_DELAY.get(model, 0.1))  # simulated thinking time, not a wait
        if request.get("stream"):
            await self._stream(send, model, answer, call_id, usage)
        else:
            await self._json(send, 200, self._completion(model, answer, call_id, usage))

    def _usage(self, messages: list[Any], tools: list[Any], answer: Answer) -> dict[str, Any]:
        # A prefix of the conversation seen before is a cache hit, as on a real prefix cache.
        encoded_tools = json.dumps(tools, sort_keys=True).encode()
        digest = hashlib.sha256(encoded_tools)
        prompt_bytes, cached_bytes = len(encoded_tools), 0
        prefixes: list[bytes] = []
        for message in messages:
            encoded = json.dumps(message, sort_keys=True).encode()
            digest.update(encoded)
            prompt_bytes += len(encoded)
            prefixes.append(digest.digest())
            if prefixes[-1] in self.seen_prefixes:
                cached_bytes = prompt_bytes
        if len(self.seen_prefixes) > CACHE_LIMIT:
            self.seen_prefixes.clear()
        self.seen_prefixes.update(prefixes)
        prompt = max(1, prompt_bytes // BYTES_PER_TOKEN)
        reasoning = _tokens(answer.reasoning)
        output = reasoning + _tokens(answer.text + (answer.tool[1] if answer.tool else ""))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": min(prompt, cached_bytes // BYTES_PER_TOKEN)},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }

    @staticmethod
    def _completion(model: str, answer: Answer, call_id: str, usage: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
        message["reasoning_content"] = answer.reasoning
        if answer.tool:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": answer.tool[0], "arguments": answer.tool[1]}}
            ]
        return {
            "id": "chatcmpl-demo",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if answer.tool else "stop"}],
            "usage": usage,
        }

    async def _stream(self, send: Send, model: str, answer: Answer, call_id: str, usage: dict[str, Any]) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        base = {"id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": 0, "model": model}

        async def chunk(choices: list[Any], **extra: Any) -> None:
            data = json.dumps({**base, "choices": choices, **extra}, separators=(",", ":"))
            await send({"type": "http.response.body", "body": f"data: {data}\n\n".encode(), "more_body": True})
            if self.paced:
                await asyncio.sleep(CHUNK_DELAY)  # simulated generation speed

        await chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        for piece in _pieces(answer.reasoning):
            await chunk([{"index": 0, "delta": {"reasoning_content": piece}}])
        for piece in _pieces(answer.text):
            await chunk([{"index": 0, "delta": {"content": piece}}])
        if answer.tool:
            name, arguments = answer.tool
            start = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
            await chunk([{"index": 0, "delta": {"tool_calls": [start]}}])
            for piece in _pieces(arguments):
                await chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}}])
        await chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls" if answer.tool else "stop"}])
        await chunk([], usage=usage)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    @staticmethod
    async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": json.dumps(body).encode(), "more_body": False})
