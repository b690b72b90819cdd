"""The proxy's endpoints beside the relay: the router, count_tokens, the model list, probes.

`Routes` is the ASGI app under the guard: it sends each model endpoint and each small endpoint
(`/healthz`, `/metrics`, `/v1/models`, the start-up probes) straight to its handler, a WebSocket to the
Responses socket, and the lifespan to the proxy's start-up and shutdown. Every handler takes the call's
`Exchange`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson

from switch.config import Settings
from switch.errors import ClientRequestError
from switch.protocols.anthropic_messages import errors as anthropic_errors
from switch.protocols.anthropic_messages.inbound import request_to_ir as anthropic_request_to_ir
from switch.protocols.ir import RequestFormatError
from switch.protocols.tokens import estimate_input_tokens
from switch.proxy.body_budget import BodyBudget
from switch.proxy.exchange import Exchange, Receive, Scope, Send, new_id, parse_json_body
from switch.proxy.relay import Relay
from switch.routing.classify import ROLES
from switch.routing.presets import PresetManager

log = logging.getLogger("switch.app")

Handler = Callable[[Exchange], Awaitable[None]]
Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]
_NOT_FOUND = orjson.dumps({"type": "error", "error": {"type": "not_found_error", "message": "no such endpoint"}})


class Routes:
    """The proxy's ASGI app: each endpoint straight to its handler, without a framework's routing.

    The model endpoints carry all the traffic, so nothing but a dict lookup sits between the server and
    their handlers, and no middleware wraps their streamed chunks.
    """

    def __init__(
        self,
        relay: Relay,
        routes: dict[tuple[str, str], Handler],
        endpoints: dict[tuple[str, str], Handler],
        budget: BodyBudget,
        upgrades: Any = None,
    ) -> None:
        self.relay = relay
        self.routes = routes
        """The model calls: counted as calls (`in_flight`, `served`) and their bodies held against `budget`."""
        self.endpoints = endpoints
        """Everything else (probes, health, metrics, the model list)."""
        self.in_flight = 0
        self.served = 0
        """Calls and WebSocket sessions begun so far (the heap trimmer's sign that the proxy was busy)."""
        self.budget = budget
        self.upgrades = upgrades
        """Where WebSocket scopes go (the Responses socket); None refuses them."""
        self.lifespan: Lifespan | None = None
        """The proxy's start-up and shutdown (it needs this router: set once both exist)."""

    @property
    def busy(self) -> bool:
        """Whether a call or a WebSocket turn is still running."""
        return bool(self.in_flight or (self.upgrades is not None and self.upgrades.turns))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            key = (scope["method"], scope["path"])
            handler = self.routes.get(key)
            if handler is not None:
                self.in_flight += 1
                self.served += 1
                exchange = Exchange(scope, receive, send)
                exchange.budget = self.budget
                try:
                    await handler(exchange)
                finally:
                    self.in_flight -= 1
                    self.budget.give_back(exchange.held)
                return
            endpoint = self.endpoints.get(key)
            exchange = Exchange(scope, receive, send)
            if endpoint is not None:
                await endpoint(exchange)
            else:
                await self._missing(exchange, scope["path"])
        elif kind == "websocket":
            if self.upgrades is None:
                await send({"type": "websocket.close", "code": 1008})
                return
            self.served += 1
            await self.upgrades(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _missing(self, exchange: Exchange, path: str) -> None:
        """404 for a path nothing serves; 405, with the methods it takes, for one served under another method."""
        allowed = sorted({method for method, known in (*self.routes, *self.endpoints) if known == path})
        if not allowed:
            await exchange.respond(404, _NOT_FOUND)
            return
        message = f"{path} takes {', '.join(allowed)}"
        body = orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
        headers = [(b"content-type", b"application/json"), (b"allow", ", ".join(allowed).encode())]
        await exchange.respond(405, body, headers)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """ASGI's lifespan: the proxy's start-up before the first call, its shutdown after the last."""
        await receive()  # lifespan.startup
        started = False
        try:
            async with self.lifespan(self) if self.lifespan is not None else contextlib.nullcontext():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()  # lifespan.shutdown
        except BaseException:
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": traceback.format_exc()})
            raise
        await send({"type": "lifespan.shutdown.complete"})


def model_routes(relay: Relay, count_tokens: Handler) -> dict[tuple[str, str], Handler]:
    """The hot routes: each model endpoint (with and without `/v1`) to its handler."""
    return {
        ("POST", "/v1/messages"): relay.messages,
        ("POST", "/v1/messages/count_tokens"): count_tokens,
        ("POST", "/v1/chat/completions"): relay.chat_completions,
        ("POST", "/v1/responses"): relay.responses_api,
        ("POST", "/chat/completions"): relay.chat_completions,
        ("POST", "/responses"): relay.responses_api,
    }


async def _count_tokens_error(exchange: Exchange, status: int, message: str) -> None:
    request_id = new_id("req_")
    headers = [(b"content-type", b"application/json"), (b"request-id", request_id.encode())]
    if status < 500:
        headers.append((b"x-should-retry", b"false"))
    await exchange.respond(status, anthropic_errors.error_body(status, message, request_id), headers)


def count_tokens_handler(settings: Settings) -> Handler:
    """Anthropic's count_tokens, answered with switch's own estimate of the prompt."""

    async def count_tokens(exchange: Exchange) -> None:
        try:
            body = parse_json_body(await exchange.read_body(settings.server.max_body_bytes))
            if isinstance(body, dict):
                # count_tokens takes no max_tokens; whatever the client sent there is irrelevant.
                body = {**body, "max_tokens": 1}
            request = anthropic_request_to_ir(body)
            tokens = estimate_input_tokens(request)
        except ClientRequestError as exc:
            await _count_tokens_error(exchange, exc.status, exc.message)
            return
        except RequestFormatError as exc:
            await _count_tokens_error(exchange, 400, exc.message)
            return
        except Exception as exc:
            log.exception("switch failed counting the tokens of a request body")
            message = f"switch could not parse this request body ({type(exc).__name__} in the request parser)"
            await _count_tokens_error(exchange, 400, message)
            return
        await exchange.respond(200, orjson.dumps({"input_tokens": tokens}))

    return count_tokens


def _model_entry(model_id: str, display_name: str, created: int, stamp: str) -> dict[str, Any]:
    return {
        "id": model_id,
        "type": "model",
        "object": "model",
        "display_name": display_name,
        "created_at": stamp,
        "created": created,
        "owned_by": "switch",
    }


def models_endpoint(presets: PresetManager, started: float) -> Handler:
    """`GET /v1/models`: one `claude-switch-<role>` (and `-<family>`) model per route of the active preset."""

    async def models(exchange: Exchange) -> None:
        created = int(started)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
        preset = presets.active
        routes = preset.routes_for("claude-code")
        entries = []
        for role in ROLES:
            chain = preset.chain("claude-code", role)
            entries.append(_model_entry(f"claude-switch-{role}", f"{role}: {chain[0]} ({preset.name})", created, stamp))
        for family, chain in routes.families.items():
            name = f"{family}: {chain[0]} ({preset.name})"
            entries.append(_model_entry(f"claude-switch-{family}", name, created, stamp))
        payload = {
            "object": "list",
            "data": entries,
            "has_more": False,
            "first_id": entries[0]["id"],
            "last_id": entries[-1]["id"],
        }
        await exchange.respond(200, orjson.dumps(payload))

    return models


async def ok(exchange: Exchange) -> None:
    """An empty 200: the probes harnesses send to `/` and `/api/hello` before their first call."""
    await exchange.respond(200, b"", [])


def readable(method_paths: dict[str, Handler]) -> dict[tuple[str, str], Handler]:
    """`GET` endpoints by path, each also served for `HEAD` (its headers, no body), as HTTP wants."""
    return {(method, path): handler for path, handler in method_paths.items() for method in ("GET", "HEAD")}
