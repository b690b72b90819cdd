"""OpenAI-style errors: reading an upstream's body, writing our own bodies and headers."""

from __future__ import annotations

from typing import Any

import orjson

from switch.protocols.error_headers import json_error_headers

REQUEST_ID_HEADER = b"x-request-id"

_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def message_of(body: bytes, limit: int = 2000) -> str:
    """The human-readable message in an upstream error body (any common shape), shortened."""
    try:
        parsed: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace").strip()
        if text.lstrip().startswith("<"):
            return "upstream returned an HTML error page"
        return text[:limit] or "upstream returned an empty error body"
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:limit]
        if isinstance(error, str):
            return error[:limit]
        for key in ("message", "detail"):
            if parsed.get(key):
                return str(parsed[key])[:limit]
    return body.decode("utf-8", "replace")[:limit]


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> bytes:
    """The JSON body OpenAI returns for an error."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}})


def error_headers(status: int, request_id: str) -> list[tuple[bytes, bytes]]:
    """The headers of an error answer: JSON, the request id, and whether a retry may help."""
    return json_error_headers(status, request_id, REQUEST_ID_HEADER)
