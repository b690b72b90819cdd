"""The Responses API over a WebSocket on `/v1/responses`, as Codex prefers it.

One connection per session; each `response.create` message is one turn. A turn is served by the
relay exactly as a `POST /v1/responses` with `stream: true` would be (classification, routing,
budgets, translation, fallback, the ledger row): the turn runs on a stand-in HTTP exchange whose
streamed Server-Sent Events are sent back one WebSocket text message each, and whose error answer
becomes the protocol's `error` event. See docs/protocols/responses-websocket.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from switch.proxy.adapters import RESPONSES_INBOUND
from switch.proxy.exchange import Exchange, Message, Receive, Scope, Send, new_id
from switch.proxy.guard import refuse_upgrade
from switch.proxy.meter import Meter
from switch.routing.classify import classify

if TYPE_CHECKING:
    from switch.config import Server
    from switch.proxy.relay import Relay

log = logging.getLogger("switch.responses_ws")

PATHS = frozenset({"/v1/responses", "/responses"})
# Closing codes (RFC 6455 §7.4.1): normal, going away (idle), policy (bad frames), too big.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_UNSUPPORTED = 1003
CLOSE_TOO_BIG = 1009
TERMINAL_EVENTS = frozenset({b"response.completed", b"response.failed", b"response.incomplete", b"error"})
OFF_MESSAGE = (
    "switch serves the Responses API over WebSocket only with [server] websockets = true; use HTTP "
    "(POST /v1/responses) instead"
)
BUSY_MESSAGE = "a response is already in progress on this connection; wait for it to complete (or send response.cancel)"
TURN_METADATA = b"x-codex-turn-metadata"
# Headers of the upgrade request that describe the WebSocket, not the turns sent over it.
_UPGRADE_HEADERS = frozenset(
    {
        b"upgrade",
        b"connection",
        b"sec-websocket-key",
        b"sec-websocket-version",
        b"sec-websocket-extensions",
        b"sec-websocket-protocol",
        b"content-length",
        # Per turn, Codex puts it in the body's `client_metadata` instead (the upgrade's says "prewarm").
        TURN_METADATA,
    }
)


def error_event(status: int, message: str, kind: str, code: str | None = None, param: str | None = None) -> bytes:
    """A protocol `error` event: the HTTP status Codex maps it to, and the OpenAI error object."""
    error: dict[str, Any] = {"type": kind, "code": code, "message": message, "param": param}
    return orjson.dumps({"type": "error", "status": status, "error": error})


class _SseToMessages:
    """Splits the relay's Server-Sent Events into the `data` payloads sent one message each."""

    __slots__ = ("pending", "terminal")

    def __init__(self) -> None:
        self.pending = b""
        self.terminal = False

    def feed(self, data: bytes) -> list[bytes]:
        """The complete events' payloads in `data` (plus what was left over from the last chunk)."""
        buffer = self.pending + data if self.pending else data
        payloads: list[bytes] = []
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            if end < 0:
                break
            # The usual block, `event: NAME\ndata: JSON`, is cut out in place; anything else is parsed line by line.
            at = buffer.find(b"\ndata: ", start, end)
            if at >= 0 and buffer.find(b"\n", at + 7, end) < 0 and buffer.startswith(b"event:", start):
                payload: bytes | None = buffer[at + 7 : end]
                if not self.terminal and buffer[start + 6 : at].strip() in TERMINAL_EVENTS:
                    self.terminal = True
            else:
                payload = _data_of(buffer[start:end])
                if payload is not None and not self.terminal and _event_type(payload) in TERMINAL_EVENTS:
                    self.terminal = True
            start = end + 2
            if payload is not None:
                payloads.append(payload)
        self.pending = buffer[start:]
        return payloads


def _data_of(block: bytes) -> bytes | None:
    # One event block: `event:` and `data:` lines; comments (`: ping`) carry nothing for a WebSocket.
    lines = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
    if not lines:
        return None
    return lines[0] if len(lines) == 1 else b"\n".join(lines)


def _event_type(payload: bytes) -> bytes:
    # `{"type":"response.completed",...}`: the encoders write the type first; a parse is the fallback.
    if payload.startswith(b'{"type":"'):
        end = payload.find(b'"', 9)
        if end > 0:
            return payload[9:end]
    try:
        decoded = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return b""
    kind = decoded.get("type") if isinstance(decoded, dict) else None
    return kind.encode() if isinstance(kind, str) else b""


class _Turn:
    """One `response.create` served on a stand-in HTTP exchange; its answer goes out as messages."""

    def __init__(self, socket: _Socket, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.socket = socket
        self.body = body
        self.request_headers = headers
        self.read = False
        self.left = asyncio.Event()
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.streaming = False
        self.events = _SseToMessages()
        self.error_body = b""
        self.cancelled = False

    async def receive(self) -> Message:
        if not self.read:
            self.read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        # The relay's disconnect watch parks here: the socket closing, or a `response.cancel`, ends the turn.
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            self.headers = message.get("headers", [])
            self.streaming = self.status == 200 and any(
                name == b"content-type" and value.startswith(b"text/event-stream") for name, value in self.headers
            )
            return
        data = message.get("body", b"")
        if self.streaming:
            payloads = self.events.feed(data)
            if payloads:
                await self.socket.send_texts(payloads)
        else:
            self.error_body += data
        if not message.get("more_body", False) and not self.streaming:
            await self.socket.send_text(self.as_error_event())

    def as_error_event(self) -> bytes:
        """The relay's whole (error) answer as the protocol's `error` event, with the status Codex acts on."""
        try:
            parsed = orjson.loads(self.error_body)
        except orjson.JSONDecodeError:
            parsed = None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if not isinstance(error, dict):
            error = {"type": "server_error", "message": self.error_body.decode("utf-8", "replace")[:300]}
        if error.get("param") == "previous_response_id" and not error.get("code"):
            # Codex retries the whole input (without the id) on this code instead of ending the turn.
            error = {**error, "code": "previous_response_not_found"}
        event: dict[str, Any] = {"type": "error", "status": self.status or 500, "error": error}
        wanted = {b"retry-after", b"x-switch-route", b"request-id", b"x-request-id"}
        headers = {name.decode(): value.decode("latin-1") for name, value in self.headers if name in wanted}
        if headers:
            event["headers"] = headers
        return orjson.dumps(event)


class _Socket:
    """One accepted connection: reads client messages, runs one turn at a time."""

    def __init__(self, endpoint: ResponsesSocket, scope: Scope, receive: Receive, send: Send) -> None:
        self.endpoint = endpoint
        self.scope = scope
        self.receive = receive
        self.send = send
        self.direct = _sansio_protocol(send)
        self.closed = False
        self.turn: _Turn | None = None
        self.task: asyncio.Task[None] | None = None
        headers = [(name, value) for name, value in scope["headers"] if name not in _UPGRADE_HEADERS]
        headers.append((b"content-type", b"application/json"))
        self.turn_headers = headers

    async def send_text(self, payload: bytes) -> None:
        """Send one event (or protocol error) as a text message."""
        await self.send_texts([payload])

    async def send_texts(self, payloads: list[bytes]) -> None:
        """Send events as one text message each; on uvicorn's sans-I/O protocol, in one socket write.

        A streamed chunk holds a few dozen events: uvicorn's `send` would cost a message dict, a decode, an
        encode and a write (a syscall) per event; here the frames of a chunk go out together, as the same
        chunk does over HTTP, after the same wait while the client's buffer is full."""
        if self.closed:
            return
        direct = self.direct
        if direct is None or not all(payload.isascii() for payload in payloads):
            for payload in payloads:
                # Text frames must be UTF-8: bytes passed through from an upstream are made so.
                await self.send({"type": "websocket.send", "text": payload.decode("utf-8", "replace")})
            return
        if not direct.writable.is_set():
            await direct.writable.wait()
        if direct.close_sent or direct.transport.is_closing():
            return
        # Imported here: the proxy loads the WebSocket library only once a WebSocket reaches it (this one has).
        from websockets.exceptions import InvalidState

        try:
            for payload in payloads:
                direct.conn.send_text(payload)
        except InvalidState:  # the client's close frame arrived: the disconnect follows
            return
        direct.transport.write(b"".join(direct.conn.data_to_send()))

    async def close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            await self.send({"type": "websocket.close", "code": code, "reason": reason[:120]})

    async def serve(self) -> None:
        settings = self.endpoint.settings()
        idle = settings.websocket_idle_timeout
        limit = settings.max_body_bytes
        try:
            while not self.closed:
                busy = self.task is not None and not self.task.done()
                try:
                    message = await asyncio.wait_for(self.receive(), None if busy else idle)
                except TimeoutError:
                    await self.close(CLOSE_GOING_AWAY, f"idle for {idle:g} s ([server] websocket_idle_timeout)")
                    break
                if message["type"] == "websocket.disconnect":
                    self.closed = True
                    break
                if message["type"] != "websocket.receive":
                    continue
                text = message.get("text")
                raw = text.encode("utf-8", "surrogatepass") if text is not None else message.get("bytes") or b""
                if text is None:
                    await self.close(CLOSE_UNSUPPORTED, "binary messages are not part of this protocol; send JSON text")
                    break
                if len(raw) > limit:
                    await self.close(CLOSE_TOO_BIG, f"message of {len(raw)} bytes exceeds the {limit}-byte limit")
                    break
                await self.on_message(raw)
        finally:
            self.closed = True
            if self.turn is not None:
                self.turn.left.set()
            if self.task is not None:
                # The relay notices the departure, cancels the upstream call, and records the row.
                await asyncio.gather(self.task, return_exceptions=True)

    async def on_message(self, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            await self.send_text(error_event(400, f"message is not valid JSON: {exc.msg}", "invalid_request_error"))
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(kind, str):
            text = 'each message must be a JSON object with a string "type" (e.g. "response.create")'
            await self.send_text(error_event(400, text, "invalid_request_error", param="type"))
            return
        if kind == "response.create":
            await self.create(message)
        elif kind == "response.cancel":
            if self.turn is not None and self.task is not None and not self.task.done():
                self.turn.cancelled = True
                self.turn.left.set()
        elif kind == "response.processed":
            # Codex's acknowledgement that it handled a response: nothing to do.
            return
        else:
            text = f"unknown message type {kind[:80]!r}; expected response.create"
            await self.send_text(error_event(400, text, "invalid_request_error", code="unknown_message_type"))

    async def create(self, message: dict[str, Any]) -> None:
        if self.task is not None and not self.task.done():
            await self.send_text(error_event(400, BUSY_MESSAGE, "invalid_request_error", code="response_in_progress"))
            return
        body = {key: value for key, value in message.items() if key not in ("type", "generate")}
        nested = body.pop("response", None)
        if isinstance(nested, dict):
            # The OpenAI realtime-style shape (`{"type": "response.create", "response": {...}}`) as well.
            body = {**nested, **body}
        body["stream"] = True  # every turn over a WebSocket is streamed
        if message.get("generate") is False:
            await self.warm_up(body)
            return
        client = body.get("client_metadata")
        metadata = client.get(TURN_METADATA.decode()) if isinstance(client, dict) else None
        headers = self.turn_headers
        if isinstance(metadata, str):
            headers = [*headers, (TURN_METADATA, metadata.encode("utf-8", "replace"))]
        turn = _Turn(self, orjson.dumps(body), headers)
        self.turn = turn
        self.task = asyncio.create_task(self.run(turn))

    async def run(self, turn: _Turn) -> None:
        scope: Scope = {
            "type": "http",
            "method": "POST",
            "path": self.scope.get("path", "/v1/responses"),
            "query_string": b"",
            "headers": turn.request_headers,
            "client": self.scope.get("client"),
            "switch.transport": "websocket",
        }
        exchange = Exchange(scope, turn.receive, turn.send)
        self.endpoint.turns += 1
        try:
            await self.endpoint.serve_turn(exchange)
        finally:
            self.endpoint.turns -= 1
        if turn.cancelled:
            # The relay recorded the turn as cancelled; the client learns its turn is over.
            text = "the response was cancelled by response.cancel"
            await self.send_text(error_event(499, text, "invalid_request_error", code="response_cancelled"))
        elif turn.streaming and not turn.events.terminal and not turn.left.is_set():
            # The stream ended without a terminal event: say so, or Codex would wait for one until its timeout.
            text = "the upstream stream ended before the response completed"
            await self.send_text(error_event(502, text, "server_error", code="incomplete_stream"))

    async def warm_up(self, body: dict[str, Any]) -> None:
        """`generate: false`: no model call; the answer is an empty response Codex can chain from."""
        response_id = new_id("resp_")
        self.endpoint.remember(response_id, body)
        response = {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "model": body.get("model", ""),
            "output": [],
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        }
        created = {**response, "status": "in_progress"}
        await self.send_text(orjson.dumps({"type": "response.created", "response": created}))
        await self.send_text(orjson.dumps({"type": "response.completed", "response": response}))


class ResponsesSocket:
    """The `/v1/responses` WebSocket endpoint: each turn is served by `relay.responses_api`."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.connections = 0
        self.turns = 0
        """Turns running now (a stopping proxy waits for their rows, as for HTTP calls)."""

    def settings(self) -> Server:
        """The `[server]` settings now (a config reload swaps them)."""
        return self.relay.settings.server

    async def serve_turn(self, exchange: Exchange) -> None:
        """One turn, on the relay's Responses entry (the same path as `POST /v1/responses`)."""
        await self.relay.responses_api(exchange)

    def remember(self, response_id: str, body: dict[str, Any]) -> None:
        """Keep a warm-up's conversation under `response_id`, so the next turn can chain from it."""
        request = RESPONSES_INBOUND.request_to_ir(body)
        previous = request.provider_data.get("previous_response_id")
        history = self.relay.responses.get(str(previous)) if previous else ()
        self.relay.responses.put(response_id, (*(history or ()), *request.messages))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        if scope["path"] not in PATHS:
            await refuse_upgrade(scope, send, 404, _error_body(f"no WebSocket endpoint at {scope['path']}"))
            return
        if not self.settings().websockets:
            # 426, never 403: Codex falls back to HTTP at once on it, and retries a 403 for seconds.
            await refuse_upgrade(scope, send, 426, _error_body(OFF_MESSAGE, "upgrade_required"))
            refusal_recorder(self.relay.sink)(scope, 426, OFF_MESSAGE)
            return
        await send({"type": "websocket.accept"})
        self.connections += 1
        try:
            await _Socket(self, scope, receive, send).serve()
        except Exception:
            log.exception("switch failed serving a Responses WebSocket")
        finally:
            self.connections -= 1


_SANSIO = "uvicorn.protocols.websockets.websockets_sansio_impl"
# uvicorn's WebSocketsSansIOProtocol fields used to write frames (pyproject pins uvicorn to versions that have them).
_SANSIO_FIELDS = ("conn", "transport", "writable", "close_sent")


def _sansio_protocol(send: Send) -> Any:
    """uvicorn's sans-I/O WebSocket protocol behind `send`, when frames may be written to it directly; else None."""
    protocol = getattr(send, "__self__", None)
    if protocol is None or type(protocol).__module__ != _SANSIO:
        return None
    return protocol if all(hasattr(protocol, name) for name in _SANSIO_FIELDS) else None


def _error_body(message: str, code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"type": "invalid_request_error", "code": code, "message": message, "param": None}})


def refusal_recorder(sink: Any) -> Callable[[Scope, int, str], None]:
    """Records a refused upgrade as a `rejected` Responses call (no model, no cost), like a refused request."""

    def record(scope: Scope, status: int, message: str) -> None:
        exchange = Exchange({**scope, "switch.transport": "websocket"}, _never, _never)
        meter = Meter(exchange, "openai-responses", sink)
        try:
            info = classify(exchange.headers, None)
            meter.harness, meter.role, meter.session_id = info.harness, info.role, info.session_id
        except Exception:  # attribution is best effort (as in the relay)
            log.exception("could not classify a refused upgrade")
        meter.streamed = True
        meter.finish("rejected", message, status=status)

    return record


async def _never(_message: Any = None) -> Any:
    raise RuntimeError("a refused upgrade has no body to read or send")


__all__ = ["PATHS", "ResponsesSocket", "error_event", "refusal_recorder"]
