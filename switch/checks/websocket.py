"""`doctor`: does this home's proxy answer a Responses WebSocket upgrade the way its config says it should?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from switch.checks.base import Check, ProxyState, check

if TYPE_CHECKING:
    from switch.config import Settings

UPGRADE_TIMEOUT_S = 3.0
BETA_HEADER = "responses_websockets=2026-02-06"  # what Codex 0.171 sends with the upgrade


def upgrade_status(port: int, token: str | None) -> int:
    """The HTTP status the proxy answers a Codex-like upgrade of `/v1/responses` with (101: accepted)."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    headers = {"OpenAI-Beta": BETA_HEADER}
    if token:
        headers["x-switch-token"] = token
    try:
        with connect(f"ws://127.0.0.1:{port}/v1/responses", additional_headers=headers, open_timeout=UPGRADE_TIMEOUT_S):
            return 101
    except InvalidStatus as exc:
        return int(exc.response.status_code)


def websocket_check(settings: Settings, state: ProxyState) -> Check | None:
    """The upgrade's answer against `[server] websockets` (None when this home's proxy is not running)."""
    if state.health is None or not state.ours:
        return None
    wanted = settings.server.websockets
    try:
        status = upgrade_status(state.port, settings.server.access_token)
    except (OSError, TimeoutError) as exc:
        return check(
            "websocket", False, f"the WebSocket upgrade of /v1/responses failed: {exc}", "switch down, then switch up"
        )
    except Exception as exc:  # the websockets client's own errors (a bad handshake): say so, never a traceback
        detail = f"the WebSocket upgrade of /v1/responses failed: {type(exc).__name__}: {exc}"
        return check("websocket", False, detail, "switch down, then switch up")
    if wanted and status == 101:
        return check("websocket", True, "/v1/responses accepts Codex's WebSocket upgrade (Responses over WebSocket)")
    if not wanted and status == 426:
        return check(
            "websocket", True, "WebSockets off ([server] websockets = false): Codex falls back to HTTP at once"
        )
    expected = "101 Switching Protocols" if wanted else "426 Upgrade Required"
    return check(
        "websocket",
        False,
        f"the WebSocket upgrade of /v1/responses got {status}, not {expected} as [server] websockets = "
        f"{str(wanted).lower()} says",
        "switch down, then switch up (the running proxy may predate the setting)",
    )
