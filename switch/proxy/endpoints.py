"""The proxy's endpoints beside the relay: the hot-route dispatcher, count_tokens, the model list, probes.

`HotRoutes` sends the model endpoints straight to their handlers; everything else (these small
endpoints, `/healthz`, `/metrics`) goes through Starlette.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

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


class HotRoutes:
    """Dispatches the proxy endpoints straight to their handlers; everything else goes to Starlette.

    The model endpoints carry all the traffic, so they skip Starlette's routing and middleware,
    whose wrappers would otherwise sit around every streamed chunk.
    """

    def __init__(
        self, routes: dict[tuple[str, str], Handler], fallback: Any, budget: BodyBudget, upgrades: Any = None
    ) -> None:
        self.routes = routes
        self.fallback = fallback
        self.in_flight = 0
        self.served = 0
        """Calls and WebSocket sessions begun so far (the heap trimmer's sign that the proxy was busy)."""
        self.budget = budget
        self.upgrades = upgrades
        """Where WebSocket scopes go (the Responses socket); None refuses them through the fallback."""

    @property
    def busy(self) -> bool:
        """Whether a call or a WebSocket turn is still running."""
        return bool(self.in_flight or (self.upgrades is not None and self.upgrades.turns))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            handler = self.routes.get((scope["method"], scope["path"]))
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
        elif scope["type"] == "websocket" and self.upgrades is not None:
            self.served += 1
            await self.upgrades(scope, receive, send)
            return
        await self.fallback(scope, receive, send)


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


def models_endpoint(presets: PresetManager, started: float) -> Callable[[Request], Awaitable[Response]]:
    """`GET /v1/models`: one `claude-switch-<role>` (and `-<family>`) model per route of the active preset."""

    async def models(_request: Request) -> Response:
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
        return Response(orjson.dumps(payload), media_type="application/json")

    return models


async def ok(_request: Request) -> Response:
    """An empty 200: the probes harnesses send to `/` and `/api/hello` before their first call."""
    return Response(b"", status_code=200)
