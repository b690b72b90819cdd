"""The headers of an error answer, alike for the three APIs but for the request-id header's name."""

from __future__ import annotations

# Statuses a retry cannot fix; SDKs honour `x-should-retry` over their own status rules.
_NO_RETRY = frozenset({400, 401, 403, 404, 413, 422, 501})


def json_error_headers(status: int, request_id: str, request_id_header: bytes) -> list[tuple[bytes, bytes]]:
    """JSON, the request id under `request_id_header`, and whether a retry may help."""
    headers = [(b"content-type", b"application/json"), (request_id_header, request_id.encode())]
    if status in _NO_RETRY:
        headers.append((b"x-should-retry", b"false"))
    return headers
