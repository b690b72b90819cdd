"""Keys kept out of what an upstream sends back: the caller's own credential in pass-through bytes.

A hostile or careless upstream may echo the key it was called with (in an error event, an error
body, anywhere). Translated calls scrub their provider key from every message (`failures.scrub`);
a pass-through stream forwards bytes, so the caller's credential is replaced in them as they pass,
even when a read splits it: a tail that could begin the key is held back until the next read.
"""

from __future__ import annotations

MASK = b"***"
_MIN_SECRET = 8  # shorter "credentials" (a placeholder like "x") would mangle ordinary text


def credential_of(headers: dict[str, str]) -> str:
    """The credential a call carries (`x-api-key`, or the token of `authorization`); empty without one."""
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _space, token = headers.get("authorization", "").partition(" ")
    return token.strip() or scheme


def client_secret(headers: dict[str, str]) -> str | None:
    """The credential the caller sent, if one long enough to be worth hiding."""
    secret = credential_of(headers)
    return secret if len(secret) >= _MIN_SECRET else None


def secret_bytes(key: str) -> bytes | None:
    """`key` as the bytes to look for, or None when it is too short to be a secret."""
    return key.encode("utf-8", "replace") if len(key) >= _MIN_SECRET else None


def scrub_bytes(data: bytes, key: str) -> bytes:
    """`data` with `key` masked."""
    secret = secret_bytes(key)
    return data.replace(secret, MASK) if secret is not None and secret in data else data


class StreamScrubber:
    """Replaces one secret in a byte stream cut anywhere."""

    __slots__ = ("secret", "_held", "_secret_bytes")

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode("utf-8", "replace")
        self._held = b""
        self._secret_bytes = frozenset(self.secret)

    def feed(self, chunk: bytes) -> bytes:
        """The bytes of `chunk` that can go out now, the secret masked."""
        data = self._held + chunk if self._held else chunk
        secret = self.secret
        if secret in data:
            data = data.replace(secret, MASK)
        if not data or data[-1] not in self._secret_bytes:
            # The usual read (an SSE read ends in a newline): no prefix of the secret can end it.
            self._held = b""
            return data
        # Hold back a tail that is a proper prefix of the secret: the next read may complete it.
        start = max(0, len(data) - len(secret) + 1)
        cut = data.find(secret[:1], start)
        while cut >= 0 and not secret.startswith(data[cut:]):
            cut = data.find(secret[:1], cut + 1)
        if cut < 0:
            self._held = b""
            return data
        self._held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        """What was held back when the stream ends (it was not the secret)."""
        held, self._held = self._held, b""
        return held
