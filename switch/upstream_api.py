"""Where each upstream API answers and how it takes a key: one definition for the proxy and `switch doctor --probe`."""

from __future__ import annotations

ANTHROPIC_VERSION = "2023-06-01"
# Appended to a provider's base_url (OpenAI-style base URLs already end in /v1; Anthropic's do not).
PATHS = {"openai-chat": "/chat/completions", "anthropic": "/v1/messages", "openai-responses": "/responses"}


def endpoint(api: str, base_url: str) -> str:
    """The URL that `api`'s calls go to at `base_url`."""
    return base_url + PATHS[api]


def auth_headers(api: str, key: str) -> list[tuple[str, str]]:
    """The headers that carry `key` to `api` (Anthropic's own scheme, else a bearer token); none for no key."""
    if api == "anthropic":
        return (
            [("x-api-key", key), ("anthropic-version", ANTHROPIC_VERSION)]
            if key
            else [("anthropic-version", ANTHROPIC_VERSION)]
        )
    return [("authorization", "Bearer " + key)] if key else []
