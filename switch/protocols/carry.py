"""Reversible encodings that let state survive a round trip through a client.

* Tool-call ids: upstream ids such as Kimi's `functions.Bash:0` break Anthropic's
  `^[a-zA-Z0-9_-]+$`; they are wrapped as `swt_<base64url>` and unwrapped when the client sends
  them back. Ids that are already valid pass unchanged, so native ids stay native.
* Tool names over 64 characters (the OpenAI limit) are shortened with a hash suffix; the long name
  is recovered from the request's own tool list.
* Reasoning text rides inside the thinking `signature` (Anthropic) or `encrypted_content`
  (Responses) as `swr1.<base64url(zlib(text))>`, so it can be restored for upstreams that demand
  it back even when the client drops the text.

All functions are pure and deterministic: the same input always gives the same bytes, which keeps
upstream prompt caches hitting.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zlib

_SAFE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_WRAPPED_PREFIX = "swt_"
_REASONING_PREFIX = "swr1."
MAX_TOOL_NAME = 64


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def client_tool_id(upstream_id: str) -> str:
    """The id to show an Anthropic client for an upstream tool-call id."""
    if _SAFE_ID.match(upstream_id) and not upstream_id.startswith(_WRAPPED_PREFIX):
        return upstream_id
    return _WRAPPED_PREFIX + _b64(upstream_id.encode())


def upstream_tool_id(client_id: str) -> str:
    """The original upstream id behind an id made by `client_tool_id`."""
    if client_id.startswith(_WRAPPED_PREFIX):
        try:
            return _unb64(client_id[len(_WRAPPED_PREFIX) :]).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return client_id
    return client_id


def short_tool_name(name: str) -> str:
    """A name within the upstream's 64-character limit, stable for the same long name."""
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return name[: MAX_TOOL_NAME - 11] + "_" + digest


def encode_reasoning(text: str) -> str:
    """Pack reasoning text into an opaque token a client will hand back unchanged."""
    return _REASONING_PREFIX + _b64(zlib.compress(text.encode(), 6))


def decode_reasoning(token: str | None) -> str | None:
    """The reasoning text packed by `encode_reasoning`, or None for any other token."""
    if not token or not token.startswith(_REASONING_PREFIX):
        return None
    try:
        return zlib.decompress(_unb64(token[len(_REASONING_PREFIX) :])).decode()
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError):
        return None


def is_switch_signature(token: str | None) -> bool:
    """Whether a thinking signature was minted by switch (never valid at Anthropic)."""
    return bool(token) and token.startswith(_REASONING_PREFIX)  # type: ignore[union-attr]
