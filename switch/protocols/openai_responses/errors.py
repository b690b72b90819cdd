"""OpenAI Responses errors: bodies and headers are OpenAI's (shared with Chat Completions); a
stream's `response.failed` event carries its own error codes.
"""

from __future__ import annotations

from switch.protocols.openai_chat.errors import error_body, error_headers, message_of

__all__ = ["error_body", "error_headers", "failure_code", "message_of"]

_CODES = {
    429: "rate_limit_exceeded",
    400: "invalid_prompt",
    401: "invalid_api_key",
    413: "context_length_exceeded",
}


def failure_code(status: int, message: str) -> str:
    """The `code` of a `response.failed` error for an HTTP status and message."""
    lowered = message.lower()
    if "context" in lowered and ("length" in lowered or "window" in lowered):
        return "context_length_exceeded"
    return _CODES.get(status, "server_error")
