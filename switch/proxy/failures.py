"""The one place where an error becomes an outcome, an HTTP status and a fallback trigger.

Transport errors (`switch.errors.UpstreamError` and its kinds) and protocol errors (the IR's
`ProtocolError` types, and the `ClientRequestError`/`UpstreamError` that protocols raised before
them) are all mapped here, so every path a call can take answers and records a failure alike.
An attempt that failed before any byte reached the client may hand over to the next target.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from switch.errors import ClientRequestError, UpstreamError
from switch.ledger.record import Outcome
from switch.protocols.ir import ProtocolError, RequestFormatError, UpstreamReportedError, Usage
from switch.protocols.ir import UpstreamFormatError as IrUpstreamFormatError
from switch.protocols.overflow import Overflow, overflow_of, sizes
from switch.proxy.adapters import InboundApi
from switch.proxy.exchange import Exchange
from switch.proxy.meter import Meter
from switch.proxy.transport import UpstreamAnswer

log = logging.getLogger("switch.relay")

CLIENT_LEFT = "the client closed the connection before the answer"
SHUTTING_DOWN = "switch is shutting down; this call was cut short"

REQUEST_ERRORS = (ClientRequestError, RequestFormatError)
"""What a request parser or translator raises for a body it refuses: the caller gets a 4xx."""
RESPONSE_ERRORS = (UpstreamError, ProtocolError)
"""What reading an upstream's answer raises when the upstream or its content failed."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A client body refused before routing: the status, message and field to answer with."""

    status: int
    message: str
    param: str | None = None
    retry_after: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """An attempt that failed before any byte reached the client, so the next target may serve."""

    status: int
    message: str
    outcome: Outcome
    trigger: str
    retry_after: str | None = None
    overflow: Overflow | None = None
    """Set when the upstream refused the prompt as longer than its window (answered in the caller's terms)."""
    client_message: str | None = None
    """What the caller is told, where it differs from `message` (which the ledger keeps)."""


@dataclass(slots=True)
class Attempt:
    """One try at serving a call on one target: what any path needs to answer, fall back and record."""

    exchange: Exchange
    inbound: InboundApi
    meter: Meter
    request_id: str
    can_fall_back: bool
    fallback_on: Collection[str]
    input_estimate: int = 0
    """switch's estimate of the prompt's tokens, where the relay made one (0: none made)."""
    can_outgrow: Callable[[], bool] = lambda: False
    """Whether a later target might hold a prompt this one refuses as too long (a larger or unknown window);
    asked only when one does."""

    def prompt_estimate(self) -> int:
        """The prompt's estimated tokens: the relay's estimate, else the body's bytes over four."""
        return self.input_estimate or max(1, len(self.exchange.body) // 4)


def rejection(error: ClientRequestError | RequestFormatError) -> Rejection:
    """The 4xx answer for a request body a parser or translator refused."""
    if isinstance(error, ClientRequestError):
        return Rejection(error.status, error.message, error.param)
    return Rejection(400, error.message, error.param)


def error_status(error: UpstreamError | ProtocolError) -> tuple[int, Outcome]:
    """The status to answer and the outcome to record for a failed upstream exchange."""
    if isinstance(error, UpstreamError):
        kind = error.kind
        if kind == "timeout":
            return 504, "transport_error"
        if kind in ("connect", "broken"):
            return 502, "transport_error"
        if kind == "in_band":
            return 529, "upstream_error"
        if kind == "local":
            return 502, "proxy_error"  # switch could not make the call (LiteLLM would not load)
        if kind == "empty":
            return 502, "incomplete_stream"
        return 502, "incomplete_stream" if kind == "protocol" else "upstream_error"
    if isinstance(error, IrUpstreamFormatError):
        return 502, "incomplete_stream"
    if isinstance(error, UpstreamReportedError):
        return 529, "upstream_error"  # the upstream said it failed, well-formed: as an in-band error event
    return 502, "upstream_error"


def reported_usage(error: UpstreamError | ProtocolError) -> Usage | None:
    """Usage the upstream reported before its answer broke, if any."""
    usage = getattr(error, "usage", None)
    return usage if isinstance(usage, Usage) else None


def attach_usage(error: UpstreamError | ProtocolError, usage: Usage) -> None:
    """Note usage the upstream reported before its answer broke, on an error type that carries it."""
    if hasattr(error, "usage"):
        error.usage = usage


def connect_trigger(error: UpstreamError) -> str:
    """The fallback trigger for an upstream that could not be reached or did not answer."""
    if error.kind == "timeout":
        return "timeout"
    # Reached, but it failed without a status (a LiteLLM provider error) or ended before its first chunk.
    return "5xx" if error.kind in ("failed", "empty") else "connect"


def body_trigger(error: UpstreamError | ProtocolError) -> str:
    """The fallback trigger for an answer that broke after its headers (reset, stall, garbage) before any byte
    reached the client: a stall counts as a timeout, a dropped connection as one that failed, the rest as a 5xx."""
    if isinstance(error, UpstreamError):
        if error.kind == "timeout":
            return "timeout"
        if error.kind in ("connect", "broken"):
            return "connect"
    return "5xx"


def status_trigger(status: int) -> str | None:
    """The fallback trigger an upstream's HTTP status sets off, if any."""
    if status >= 500:
        return "5xx"
    if status == 429:
        return "429"
    return None


def transport_failure(error: UpstreamError, provider: str) -> Failure:
    """A failure to reach `provider` or get its answer's headers."""
    status, outcome = error_status(error)
    return Failure(status, f"upstream {provider}: {error.message}", outcome, connect_trigger(error))


def silent_failure(provider: str) -> Failure:
    """An upstream that sent nothing within the time-to-first-token limit."""
    return Failure(
        504, f"upstream {provider} sent nothing within the time-to-first-token limit", "transport_error", "timeout"
    )


def scrub(text: str, key: str | None) -> str:
    """`text` without `key` in it."""
    return text.replace(key, "***") if key and key in text else text


def unreadable(upstream_name: str) -> str:
    """Log an unforeseen decoding failure (the current exception) and say what the client is told."""
    # Decoders check what they read; reaching here means an upstream shape no check foresaw. The
    # call still ends like any protocol breakage, and the traceback is kept for a fix.
    log.warning("could not read an %s upstream response", upstream_name, exc_info=True)
    return f"upstream sent an {upstream_name} response switch could not read"


async def status_failure(
    error_message: Callable[[bytes], str], response: UpstreamAnswer, provider: str, key: str | None
) -> Failure:
    """The failure for an upstream that answered with an error status (its body read, key scrubbed)."""
    status = response.status_code
    try:
        raw = await response.read(1 << 20)
    except UpstreamError:
        raw = b""
    message = scrub(error_message(raw), key)
    return answered_failure(status, message, provider, response.headers.get("retry-after"))


def answered_failure(status: int, message: str, provider: str, retry_after: str | None = None) -> Failure:
    """The failure for an upstream's error answer: a context overflow (whatever its status), else its status."""
    text = f"upstream {provider} returned {status}: {message}"
    overflow = overflow_of(status, message)
    if overflow is not None:
        return Failure(400, text, "context_overflow", "context_window", overflow=overflow)
    trigger = status_trigger(status) or "status"
    return Failure(status, text, "upstream_error", trigger, retry_after)


def overflow_failure(attempt: Attempt, overflow: Overflow | None, detail: str) -> Failure:
    """The failure a caller sees for a prompt over its target's window, in the words its harness acts on."""
    target = attempt.meter.target
    window = target.context_window if target is not None else None
    prompt_tokens, limit = sizes(overflow, attempt.prompt_estimate(), window)
    message = attempt.inbound.overflow_message(prompt_tokens, limit)
    recorded = f"{message} ({detail})" if detail else message
    return Failure(400, recorded, "context_overflow", "context_window", client_message=message)


async def send_error(
    exchange: Exchange,
    inbound: InboundApi,
    status: int,
    message: str,
    request_id: str,
    retry_after: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> None:
    """Answer with an error in the caller's API format."""
    headers = inbound.error_headers(status, request_id)
    if retry_after:
        headers.append((b"retry-after", retry_after.encode("latin-1")))
    await exchange.respond(status, inbound.error_body(status, message, request_id, param, code), headers)


async def send_overflow(attempt: Attempt, failure: Failure) -> None:
    """Answer a context overflow: the harness's own wording first (it parses it), the details after."""
    inbound = attempt.inbound
    message = failure.client_message or failure.message
    await send_error(
        attempt.exchange, inbound, 400, message, attempt.request_id, None, inbound.overflow_param, inbound.overflow_code
    )


async def fail(attempt: Attempt, failure: Failure) -> Failure | None:
    """Record a failed attempt; answer the client unless the next target may serve instead."""
    movable = attempt.can_outgrow() if failure.trigger == "context_window" else attempt.can_fall_back
    if movable and failure.trigger in attempt.fallback_on:
        log.info("falling back after %s: %s", failure.trigger, failure.message)
        attempt.meter.finish(failure.outcome, failure.message, status=failure.status)
        return failure
    if failure.outcome == "context_overflow":
        answer = failure if failure.client_message else overflow_failure(attempt, failure.overflow, failure.message)
        await send_overflow(attempt, answer)
        attempt.meter.finish("context_overflow", answer.message)
        return None
    await send_error(
        attempt.exchange, attempt.inbound, failure.status, failure.message, attempt.request_id, failure.retry_after
    )
    attempt.meter.finish(failure.outcome, failure.message)
    return None


def cancelled_outcome(task: asyncio.Task[Any], exchange: Exchange, meter: Meter) -> Outcome:
    """Why a stream's task was cancelled: the client left, or the server is stopping (see `Relay._watched`).

    A stopping server still owes the client an in-band end, which the caller sends when this
    returns `incomplete_stream`.
    """
    task.uncancel()
    if exchange.disconnected:
        return "client_cancelled"
    meter.error = SHUTTING_DOWN
    return "incomplete_stream"
