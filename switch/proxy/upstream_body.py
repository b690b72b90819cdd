"""The body a translated call sends upstream, or the caller's refusal when the request cannot be sent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from switch.documents import for_upstream, has_documents
from switch.protocols.ir import Request
from switch.proxy.failures import REQUEST_ERRORS, Attempt, rejection, send_error

Written = TypeVar("Written")

log = logging.getLogger("switch.relay")


async def upstream_body(
    attempt: Attempt, request: Request, upstream_name: str, write: Callable[[Request], Written]
) -> Written | None:
    """What `write` makes of `request` for `upstream_name`; None once a refusal is answered and recorded."""
    inbound = attempt.inbound
    try:
        # Only a request holding a document pays for this (a PDF's text for a chat upstream).
        sent = await for_upstream(request, upstream_name) if has_documents(request) else request
        return write(sent)
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
