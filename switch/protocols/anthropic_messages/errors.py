"""Anthropic error bodies, events and headers, and the status → error-type mapping."""

from __future__ import annotations

import orjson

from switch.protocols.error_headers import json_error_headers

REQUEST_ID_HEADER = b"request-id"

_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """The Anthropic error type for an HTTP status."""
    if status in _TYPES:
        return _TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(status: int, message: str, request_id: str) -> bytes:
    """The JSON body Anthropic returns for an error."""
    return orjson.dumps(
        {
            "type": "error",
            "error": {"type": error_type(status), "message": message},
            "request_id": request_id,
        }
    )


def error_event(status: int, message: str) -> bytes:
    """The in-band `error` event for a failure after the stream has started."""
    payload = orjson.dumps({"type": "error", "error": {"type": error_type(status), "message": message}})
    return b"event: error\ndata: " + payload + b"\n\n"


def error_headers(status: int, request_id: str) -> list[tuple[bytes, bytes]]:
    """The headers of an error answer: JSON, the request id, and whether a retry may help."""
    return json_error_headers(status, request_id, REQUEST_ID_HEADER)
