"""The body a translated call sends upstream, or the caller's refusal when the request cannot be sent."""

from __future__ import annotations

import logging

from switch.documents import for_upstream, has_documents
from switch.protocols.ir import Request
from switch.proxy.failures import REQUEST_ERRORS, Attempt, rejection, send_error
from switch.proxy.upstream_apis import ReasoningLookup, UpstreamApi
from switch.routing.resolve import Target

log = logging.getLogger("switch.relay")


async def upstream_body(
    attempt: Attempt, request: Request, upstream: UpstreamApi, target: Target, reasoning: ReasoningLookup
) -> bytes | None:
    """`request` as `upstream`'s body for `target`; None once a refusal is answered and recorded."""
    inbound = attempt.inbound
    upstream_name = upstream.wire
    try:
        # Only a request holding a document pays for this (a PDF's text for a chat upstream).
        sent = await for_upstream(request, upstream_name) if has_documents(request) else request
        return upstream.request_body(sent, target, reasoning)
    except REQUEST_ERRORS as exc:
        refused = rejection(exc)
        await send_error(
            attempt.exchange, inbound, refused.status, refused.message, attempt.request_id, param=refused.param
        )
        attempt.meter.finish("rejected", refused.message)
        return None
    except Exception as exc:
        log.exception("switch failed translating a %s request for %s", inbound.name, upstream_name)
        message = (
            f"switch could not translate this request for the {upstream_name} upstream "
            f"({type(exc).__name__} in the request translator); see the switch log"
        )
        await send_error(attempt.exchange, inbound, 400, message, attempt.request_id)
        attempt.meter.finish("rejected", message)
        return None
