"""A call served natively: the caller's own API and credentials, its bytes passed through untouched.

Only usage, the stop reason and timings are read on the way, by the inbound API's own sniffer.
A chat stream is asked for its usage chunk (which the caller does not see unless it asked too).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from switch.config import Settings
from switch.errors import UpstreamError
from switch.ledger.record import Outcome
from switch.proxy.adapters import ANTHROPIC_INBOUND
from switch.proxy.failures import (
    RESPONSE_ERRORS,
    SHUTTING_DOWN,
    Attempt,
    Failure,
    cancelled_outcome,
    error_status,
    fail,
    scrub,
    silent_failure,
    status_failure,
    status_trigger,
    transport_failure,
)
from switch.proxy.plan_quota import PlanQuotas
from switch.proxy.scrubbing import StreamScrubber, client_secret, credential_of
from switch.proxy.transport import Transport, UpstreamRequest
from switch.routing.classify import forced_role
from switch.routing.resolve import Target

_HOP_BY_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
    }
)
_FORWARDED_RESPONSE_HEADERS = frozenset(
    {"content-type", "request-id", "retry-after", "x-should-retry", "content-encoding", "x-request-id"}
)

# A ChatGPT login's requests carry this header; its bearer token is for ChatGPT's backend, not the public API.
CHATGPT_ACCOUNT_HEADER = "chatgpt-account-id"
CHATGPT_LOGIN = (
    "Codex is logged in with ChatGPT: its token works only for ChatGPT's own backend, and OpenAI's public API (the "
    "native route of this preset) does not accept it. Log Codex in with an OpenAI API key (`codex login "
    "--with-api-key`), or route Codex to another target (`switch use kimi-k3`)"
)
NO_CREDENTIALS = (
    "Codex sent no credentials for the native OpenAI route. Log Codex in with an OpenAI API key (`codex login "
    "--with-api-key`) and run `switch codex on` again (its provider sets requires_openai_auth = true, which makes "
    "Codex send its key)"
)


def native_credential_problem(inbound_api: str, harness: str, headers: dict[str, str], base_url: str) -> str | None:
    """Why a Codex call cannot succeed on OpenAI's public API with what Codex sent, else None."""
    if inbound_api != "openai-responses" or harness != "codex":
        return None
    if CHATGPT_ACCOUNT_HEADER in headers and "chatgpt.com" not in base_url:
        return CHATGPT_LOGIN
    if not headers.get("authorization"):
        return NO_CREDENTIALS
    return None


ERROR_BODY_KEPT = 64 * 1024
"""Bytes of a native error answer kept to read its message for the ledger (the caller gets them all)."""

# switch's own model names (`switch/auto`, `switch/<role>`): a harness wired to switch sends them, and no
# native provider knows them.
SWITCH_PREFIX = "switch/"


class PassThroughPath:
    """Serves a call on the caller's own API at its native provider."""

    def __init__(self, settings: Settings, transport: Transport, quotas: PlanQuotas | None = None) -> None:
        self.settings = settings
        self.transport = transport
        self.quotas = quotas or PlanQuotas()

    def _native_model(self, inbound_api: str, requested: Any) -> str | None:
        """The real model to send instead of a `switch/...` name, which only switch understands; else None."""
        if not isinstance(requested, str) or not (requested.startswith(SWITCH_PREFIX) or forced_role(requested)):
            return None
        # The native estimate is priced at the same model: what the harness would have used without switch.
        pricing = self.settings.pricing
        return pricing.baseline_anthropic if inbound_api == ANTHROPIC_INBOUND.name else pricing.baseline_openai

    async def serve(self, attempt: Attempt, target: Target, body: dict[str, Any]) -> Failure | None:
        """Forward one attempt; `body` is the client's, already parsed. A `Failure` lets the next target serve."""
        exchange, inbound, meter = attempt.exchange, attempt.inbound, attempt.meter
        problem = native_credential_problem(inbound.name, meter.harness, exchange.headers, target.base_url)
        if problem is not None:
            return await fail(attempt, Failure(401, problem, "rejected", "no_key"))
        headers = [
            (name, value)
            for name, value in exchange.headers.items()
            if name not in _HOP_BY_HOP and not name.startswith("x-switch-")
        ]
        headers.append(("accept-encoding", "identity"))
        path = exchange.path
        if target.base_url.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        query = exchange.scope.get("query_string", b"").decode("latin-1")
        url = target.base_url + path + ("?" + query if query else "")
        sent = exchange.body
        native_model = self._native_model(inbound.name, body.get("model"))
        if native_model is not None:
            try:
                sent = orjson.dumps({**body, "model": native_model})
            except orjson.JSONEncodeError:
                pass  # nested deeper than the encoder goes: sent as it came, and the provider says what it thinks
            else:
                body = {**body, "model": native_model}
                meter.target = target = replace(target, model=native_model)
        strip_usage = False
        if meter.streamed:
            metered = inbound.metered_body(body)
            if metered is not None:
                sent, strip_usage = metered, True
        ttft_timeout = self.settings.routing.ttft_timeout
        secret = client_secret(exchange.headers)
        try:
            response = await self.transport.send(
                UpstreamRequest(
                    url, headers, sent, target, header_timeout=ttft_timeout if attempt.can_fall_back else None
                )
            )
        except UpstreamError as exc:
            return await fail(attempt, transport_failure(exc, target.provider))
        self.quotas.observe(target.provider, exchange.headers, response.status_code, response.headers)
        if attempt.can_fall_back:
            trigger = status_trigger(response.status_code)
            if trigger in attempt.fallback_on:
                failure = await status_failure(inbound.error_message, response, target.provider, secret)
                response.close()
                return await fail(attempt, failure)
            if not await response.wait_body(ttft_timeout):
                response.close()
                return await fail(attempt, silent_failure(target.provider))
        response.decode_content(False)
        response_headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in response.headers.items()
            if name in _FORWARDED_RESPONSE_HEADERS
            or name.startswith(("anthropic-", "openai-", "x-ratelimit-", "x-codex-"))
        ]
        sniffer = None
        if "content-encoding" not in response.headers:
            is_sse = "text/event-stream" in response.headers.get("content-type", "")
            sniffer = inbound.new_sniffer(is_sse, strip_usage and is_sse)
        # A compressed body passes as it came (it cannot be read for the key without inflating it).
        scrubber = StreamScrubber(secret) if secret and "content-encoding" not in response.headers else None
        outcome: Outcome = "completed" if response.status_code < 400 else "upstream_error"
        # An error answer passes through untouched; its start is kept so the ledger says what went wrong.
        error_body: list[bytes] | None = [] if response.status_code >= 400 else None
        kept = 0
        delivered_end = False  # the chunk holding the stream's last event has been handed to the client
        task = exchange.task()
        stop_guard: Callable[[], None] = lambda: None  # noqa: E731
        try:
            await exchange.start_stream(response_headers, response.status_code)
            # The native upstream sends its own pings; only a departed client needs watching.
            stop_guard = exchange.guard_stream(task, self.settings.server.ping_interval)
            async for chunk in response.chunks():
                if meter.first_token_at is None:
                    meter.first_token_at = time.perf_counter()
                else:
                    meter.last_token_at = time.perf_counter()
                if sniffer is not None:
                    chunk = sniffer.feed(chunk)
                if scrubber is not None:
                    chunk = scrubber.feed(chunk)
                if error_body is not None and kept < ERROR_BODY_KEPT:
                    error_body.append(chunk[: ERROR_BODY_KEPT - kept])
                    kept += len(error_body[-1])
                await exchange.send_chunk(chunk)
                delivered_end = sniffer is not None and sniffer.ended
            rest = sniffer.flush() if sniffer is not None else b""
            if scrubber is not None:
                rest = scrubber.feed(rest) + scrubber.flush()
            await exchange.end_stream(rest)
        except asyncio.CancelledError:
            outcome = cancelled_outcome(task, exchange, meter)
            if outcome == "client_cancelled" and delivered_end:
                # It left after the stream's last event reached it, before the upstream ended the body:
                # openai-python closes the response at `[DONE]`. It had the whole answer.
                outcome = "completed"
            elif outcome == "incomplete_stream":
                in_band = inbound.error_event(503, SHUTTING_DOWN) if sniffer is not None and sniffer.is_sse else b""
                await exchange.end_stream(in_band)
        except RESPONSE_ERRORS as exc:
            _status, outcome = error_status(exc)
            meter.error = exc.message
            in_band = scrubber.flush() if scrubber is not None else b""
            if sniffer is not None and sniffer.is_sse and inbound.name == ANTHROPIC_INBOUND.name:
                # Anthropic's SDKs raise on an in-band `error` event: the caller learns why the stream broke.
                in_band += inbound.error_event(502, exc.message)
            await exchange.end_stream(in_band)
        finally:
            stop_guard()
            response.close()
        if sniffer is not None:
            sniffer.close()
            meter.usage = sniffer.usage
            meter.usage_reported = sniffer.usage_seen
            meter.stop_reason = sniffer.stop_reason
            if outcome == "completed" and sniffer.is_sse and sniffer.seen_events and not sniffer.ended:
                outcome = "incomplete_stream"
        if error_body is not None and meter.error is None:
            raw = b"" if "content-encoding" in response.headers else b"".join(error_body)
            meter.error = self._error_text(attempt, target.provider, response.status_code, raw)
        meter.finish(outcome)
        return None

    @staticmethod
    def _error_text(attempt: Attempt, provider: str, status: int, raw: bytes) -> str:
        """What the ledger keeps of a native error answer: its message, in the translated paths' words."""
        message = scrub(attempt.inbound.error_message(raw), credential_of(attempt.exchange.headers))
        return f"upstream {provider} returned {status}: {message}"
