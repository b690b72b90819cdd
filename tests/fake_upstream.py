"""A scriptable fake of an OpenAI-compatible chat upstream (Kimi-style), served for real.

Each test queues `Turn`s (what the model says) or raw `Reply`s (status, bytes, faults); the fake
answers streamed or not, as the request asks, splitting reasoning, text and tool-call arguments
into fragments like Kimi on vLLM does (`functions.<name>:<n>` ids, usage after the finish chunk).
Everything received is kept in `received` for assertions.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class ToolCall:
    name: str
    arguments: str
    call_id: str | None = None


@dataclass
class Turn:
    """One model answer."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 120
    cached_tokens: int = 20
    completion_tokens: int = 30
    reasoning_tokens: int = 10
    finish_reason: str | None = None
    fragment: int = 7


@dataclass
class Reply:
    """A raw answer: status and body chunks, with faults."""

    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    content_type: str = "text/event-stream"
    delay_before: float = 0.0
    delay_between: float = 0.0
    break_after: int | None = None
    stall_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


async def read_body(receive: Any) -> bytes:
    """The whole request body of an ASGI request."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def read_head(connection: socket.socket) -> bytes | None:
    """A request's bytes read off a blocking socket up to the end of its head (some body may follow); None: closed."""
    head = b""
    while b"\r\n\r\n" not in head:
        piece = connection.recv(65536)
        if not piece:
            return None
        head += piece
    return head


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def chat_chunks(turn: Turn, model: str, counter: itertools.count[int]) -> list[dict[str, Any]]:
    """The chunk objects of a streamed answer."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model}
    chunks: list[dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    for piece in _pieces(turn.reasoning, turn.fragment):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"reasoning_content": piece}}]})
    for piece in _pieces(turn.text, turn.fragment):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
    for index, call in enumerate(turn.tool_calls):
        call_id = call.call_id or f"functions.{call.name}:{next(counter)}"
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": call.name, "arguments": ""},
                                }
                            ]
                        },
                    }
                ],
            }
        )
        for piece in _pieces(call.arguments, turn.fragment):
            chunks.append(
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"tool_calls": [{"index": index, "function": {"arguments": piece}}]},
                        }
                    ],
                }
            )
    finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": usage_of(turn)})
    return chunks


def usage_of(turn: Turn) -> dict[str, Any]:
    return {
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
    }


def chat_completion(turn: Turn, model: str, counter: itertools.count[int]) -> dict[str, Any]:
    """The body of a non-streamed answer."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.call_id or f"functions.{call.name}:{next(counter)}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in turn.tool_calls
        ]
    finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_of(turn),
    }


class FakeChatUpstream:
    """The ASGI app. Queue answers with `script`; unscripted calls get a short text answer."""

    def __init__(
        self,
        require_reasoning_on_tool_turns: bool = True,
        responder: Callable[[dict[str, Any]], Turn | Reply] | None = None,
    ) -> None:
        self.responder = responder
        self.queue: list[Turn | Reply] = []
        self.received: list[Received] = []
        self.require_reasoning = require_reasoning_on_tool_turns
        self.counter = itertools.count()
        self.sent_bytes = 0  # body bytes handed to the server so far (send blocks when the reader is slow)
        self.disconnects = 0  # requests whose caller (the proxy) closed the connection before the end

    def script(self, *answers: Turn | Reply) -> None:
        self.queue.extend(answers)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append(Received(scope["path"], headers, body))
        request = orjson.loads(body) if body else {}
        if self.queue:
            answer: Turn | Reply = self.queue.pop(0)
        elif self.responder is not None:
            answer = self.responder(request)
        else:
            answer = Turn(text="Hello from the fake upstream.")
        if isinstance(answer, Turn):
            problem = self._kimi_rejects(request)
            if problem:
                answer = Reply(
                    400,
                    [orjson.dumps({"error": {"message": problem, "type": "invalid_request_error"}})],
                    "application/json",
                )
            elif request.get("stream"):
                chunks = [
                    b"data: " + orjson.dumps(c) + b"\n\n"
                    for c in chat_chunks(answer, request.get("model", ""), self.counter)
                ]
                answer = Reply(200, [*chunks, b"data: [DONE]\n\n"])
            else:
                answer = Reply(
                    200,
                    [orjson.dumps(chat_completion(answer, request.get("model", ""), self.counter))],
                    "application/json",
                )
        gone = asyncio.Event()
        watcher = asyncio.create_task(self._watch_disconnect(receive, gone))
        try:
            await self._play(answer, send, gone)
        finally:
            watcher.cancel()

    async def _watch_disconnect(self, receive: Any, gone: asyncio.Event) -> None:
        if (await receive())["type"] == "http.disconnect":
            self.disconnects += 1
            gone.set()

    def _kimi_rejects(self, request: dict[str, Any]) -> str | None:
        for index, message in enumerate(request.get("messages", [])):
            if message.get("role") == "assistant" and message.get("tool_calls") and self.require_reasoning:
                if "reasoning_content" not in message:
                    return (
                        "thinking is enabled but reasoning_content is missing in assistant "
                        f"tool call message at index {index}"
                    )
            if message.get("role") == "tool" and not message.get("content"):
                return "tool message must have content"
        return None

    async def _play(self, reply: Reply, send: Any, gone: asyncio.Event | None = None) -> None:
        # The sleeps below are the scripted upstream behaviour (slow, stalling), not waits for a condition.
        if reply.delay_before:
            await asyncio.sleep(reply.delay_before)
        headers = [(b"content-type", reply.content_type.encode())]
        headers += [(k.encode(), v.encode()) for k, v in reply.headers.items()]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        for index, chunk in enumerate(reply.chunks):
            if gone is not None and gone.is_set():
                return  # the caller hung up: stop generating, as a real server would
            if reply.break_after is not None and index >= reply.break_after:
                raise ConnectionResetError("fake upstream breaks the connection")
            if reply.stall_after is not None and index >= reply.stall_after:
                await asyncio.sleep(3600)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            self.sent_bytes += len(chunk)
            if reply.delay_between:
                await asyncio.sleep(reply.delay_between)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


ANTHROPIC_STREAM = b"".join(
    [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_native","type":"message",'
        b'"role":"assistant","model":"claude-opus-5-5","content":[],"stop_reason":null,"stop_sequence":null,'
        b'"usage":{"input_tokens":812,"cache_creation_input_tokens":100,"cache_read_input_tokens":4000,'
        b'"output_tokens":1}}}\n\n',
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n',
        b'event: ping\ndata: {"type": "ping"}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Native hello"}}\n\n',
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        b'"stop_sequence":null},"usage":{"output_tokens":57}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
)


class FakeAnthropicUpstream:
    """A fake Anthropic API: canned streamed or JSON answers; records what it received."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.queue: list[Reply] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path = scope["path"] + ("?" + scope["query_string"].decode() if scope["query_string"] else "")
        self.received.append(Received(path, headers, body))
        if self.queue:
            reply = self.queue.pop(0)
        elif orjson.loads(body).get("stream"):
            reply = Reply(200, [ANTHROPIC_STREAM[i : i + 50] for i in range(0, len(ANTHROPIC_STREAM), 50)])
        else:
            message_body = {
                "id": "msg_native",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [{"type": "text", "text": "Native hello"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 11, "output_tokens": 3, "cache_read_input_tokens": 0},
            }
            reply = Reply(200, [orjson.dumps(message_body)], "application/json", headers={"request-id": "req_native"})
        headers_out = [(b"content-type", reply.content_type.encode())]
        headers_out += [(k.encode(), v.encode()) for k, v in reply.headers.items()]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers_out})
        for chunk in reply.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if reply.delay_between:
                await asyncio.sleep(reply.delay_between)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def _anthropic_block(index: int, content_block: dict[str, Any], deltas: list[dict[str, Any]]) -> list[bytes]:
    """One content block's events: its start, a delta event per delta, its stop."""
    start = {"type": "content_block_start", "index": index, "content_block": content_block}
    events = [_sse("content_block_start", start)]
    events += [_sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
    events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def anthropic_stream(turn: Turn, model: str, counter: itertools.count[int]) -> list[bytes]:
    """An Anthropic Messages stream for a turn."""
    usage = {
        "input_tokens": turn.prompt_tokens - turn.cached_tokens,
        "cache_read_input_tokens": turn.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": 1,
    }
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events = [_sse("message_start", {"type": "message_start", "message": message})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if turn.reasoning:
        thinking = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(turn.reasoning, turn.fragment)]
        signature = {"type": "signature_delta", "signature": "anthropic-sig"}
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, [*thinking, signature]))
    if turn.text:
        text = [{"type": "text_delta", "text": piece} for piece in _pieces(turn.text, turn.fragment)]
        blocks.append(({"type": "text", "text": ""}, text))
    for call in turn.tool_calls:
        block = {
            "type": "tool_use",
            "id": call.call_id or f"toolu_fake{next(counter)}",
            "name": call.name,
            "input": {},
        }
        arguments = [
            {"type": "input_json_delta", "partial_json": piece} for piece in _pieces(call.arguments, turn.fragment)
        ]
        blocks.append((block, arguments))
    for index, (content_block, deltas) in enumerate(blocks):
        events += _anthropic_block(index, content_block, deltas)
    stop = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}[
        turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
    ]
    events.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": turn.completion_tokens},
            },
        )
    )
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def anthropic_message(turn: Turn, model: str, counter: itertools.count[int]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.reasoning:
        content.append({"type": "thinking", "thinking": turn.reasoning, "signature": "anthropic-sig"})
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.call_id or f"toolu_fake{next(counter)}",
                "name": call.name,
                "input": orjson.loads(call.arguments),
            }
        )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": turn.prompt_tokens - turn.cached_tokens,
            "cache_read_input_tokens": turn.cached_tokens,
            "cache_creation_input_tokens": 0,
            "output_tokens": turn.completion_tokens,
        },
    }


def responses_usage(turn: Turn) -> dict[str, Any]:
    return {
        "input_tokens": turn.prompt_tokens,
        "input_tokens_details": {"cached_tokens": turn.cached_tokens},
        "output_tokens": turn.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    }


def responses_output(turn: Turn, counter: itertools.count[int]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if turn.reasoning:
        output.append(
            {
                "id": "rs_fake",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": turn.reasoning}],
                "encrypted_content": "openai-encrypted",
            }
        )
    if turn.text:
        output.append(
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for call in turn.tool_calls:
        output.append(
            {
                "id": f"fc_{next(counter)}",
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id or f"call_fake{next(counter)}",
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return output


def responses_stream(turn: Turn, model: str, counter: itertools.count[int]) -> list[bytes]:
    """An OpenAI Responses stream for a turn."""
    seq = itertools.count(1)
    base = {"id": "resp_fake", "object": "response", "model": model, "status": "in_progress", "output": []}
    events = [_sse("response.created", {"type": "response.created", "sequence_number": next(seq), "response": base})]
    output = responses_output(turn, counter)
    for index, item in enumerate(output):
        kind = item["type"]
        skeleton = (
            {**item, "summary": []}
            if kind == "reasoning"
            else {**item, "content": []}
            if kind == "message"
            else {**item, "arguments": ""}
        )
        events.append(
            _sse(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": skeleton,
                },
            )
        )
        # Each kind streams its own text in its own delta event, which names the part it extends.
        if kind == "reasoning":
            name, text, part = "response.reasoning_summary_text.delta", turn.reasoning, {"summary_index": 0}
        elif kind == "message":
            name, text, part = "response.output_text.delta", turn.text, {"content_index": 0}
        else:
            name, text, part = "response.function_call_arguments.delta", item["arguments"], {}
        for piece in _pieces(text, turn.fragment):
            delta = {"type": name, "sequence_number": next(seq), "item_id": item["id"], "output_index": index}
            events.append(_sse(name, {**delta, **part, "delta": piece}))
        events.append(
            _sse(
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": item,
                },
            )
        )
    final = {**base, "status": "completed", "output": output, "usage": responses_usage(turn)}
    events.append(
        _sse(
            "response.completed",
            {"type": "response.completed", "sequence_number": next(seq), "response": final},
        )
    )
    return events


class FakeUpstream(FakeChatUpstream):
    """One fake serving chat (`/v1/chat/completions`), Anthropic (`/v1/messages`) and Responses
    (`/v1/responses`), each rendering the scripted turns in its own format."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"].endswith("/chat/completions"):
            await super().__call__(scope, receive, send)
            return
        body = await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append(Received(scope["path"], headers, body))
        request = orjson.loads(body) if body else {}
        answer = self.queue.pop(0) if self.queue else Turn(text="Hello from the fake upstream.")
        if isinstance(answer, Turn):
            model = request.get("model", "")
            if scope["path"].endswith("/messages"):
                if request.get("stream"):
                    answer = Reply(200, anthropic_stream(answer, model, self.counter))
                else:
                    answer = Reply(
                        200,
                        [orjson.dumps(anthropic_message(answer, model, self.counter))],
                        "application/json",
                    )
            elif request.get("stream"):
                answer = Reply(200, responses_stream(answer, model, self.counter))
            else:
                body_out = {
                    "id": "resp_fake",
                    "object": "response",
                    "model": model,
                    "status": "completed",
                    "output": responses_output(answer, self.counter),
                    "usage": responses_usage(answer),
                }
                answer = Reply(200, [orjson.dumps(body_out)], "application/json")
        await self._play(answer, send)


Play = Callable[["socket.socket"], None]
"""What a `RawUpstream` does with one connection once it has read the request: writes bytes, stalls, hangs up."""


class RawUpstream:
    """A loopback TCP server playing scripted raw bytes, for faults an HTTP server cannot make (trickled or
    oversized status lines and headers). Unscripted requests get a short, well-formed chat answer."""

    def __init__(self) -> None:
        self.queue: list[Play] = []
        self.requests = 0
        self.sent = 0  # bytes the plays got into the socket before the proxy hung up
        self._server = socket.create_server(("127.0.0.1", 0))
        self._closing = threading.Event()
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def script(self, *plays: Play) -> None:
        self.queue.extend(plays)

    def __enter__(self) -> RawUpstream:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._closing.set()
        self._server.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                connection, _address = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            head = read_head(connection)
            if head is None:
                return
            length = int(re.search(rb"content-length: *(\d+)", head, re.I).group(1))  # type: ignore[union-attr]
            body = head.partition(b"\r\n\r\n")[2]
            while len(body) < length:
                body += connection.recv(65536)
            self.requests += 1
            play = self.queue.pop(0) if self.queue else well_formed_chat
            try:
                play(_Counting(connection, self))
            except OSError:
                pass  # the proxy hung up: what the test is usually waiting for


class _Counting:
    """A socket that counts what a play got sent."""

    def __init__(self, sock: socket.socket, upstream: RawUpstream) -> None:
        self._sock = sock
        self._upstream = upstream

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)
        self._upstream.sent += len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _chat_head_end_and_body() -> bytes:
    """The rest of a non-streamed chat answer after its status line (and any headers already sent)."""
    body = orjson.dumps(chat_completion(Turn(text="raw answer"), "m", itertools.count()))
    return b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body


def well_formed_chat(sock: socket.socket) -> None:
    """A complete non-streamed chat answer."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n" + _chat_head_end_and_body())


def trickled_headers(seconds: float, interval: float = 0.05) -> Play:
    """A status line, then a header one byte per `interval` for `seconds`, then a good answer (if still heard)."""

    def play(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nx-trickle: ")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sock.sendall(b"a")
            time.sleep(interval)  # the scripted trickle itself, not a wait for a condition
        sock.sendall(b"\r\n" + _chat_head_end_and_body())

    return play


def endless_headers(total: int, piece: int = 64 * 1024) -> Play:
    """A status line, then about `total` bytes of header lines (until the proxy hangs up), then a good answer."""

    def play(sock: socket.socket) -> None:
        size = min(piece, total)
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        line = b"x-pad: " + b"b" * (size - 9) + b"\r\n"
        for _ in range(max(1, total // size)):
            sock.sendall(line)
        sock.sendall(_chat_head_end_and_body())

    return play
