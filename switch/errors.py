"""The exception tree of switch.

    SwitchError                 anything switch reports on purpose
    ├── ConfigError             config.toml or a preset is invalid (names the file and key)
    │   └── PresetError
    ├── KeyMissingError         no API key for a provider (names the command that sets one)
    ├── LedgerError             ledger.db cannot be read as a switch ledger (names the file, the cause, the fix)
    ├── RoutingError            no route can serve the call
    ├── ClientRequestError      the caller's request is malformed (400-class, in the caller's format)
    │   └── TranslationError    the request uses a feature the upstream cannot represent
    └── UpstreamError           the upstream failed: HTTP status, transport, or protocol
        └── UpstreamTimeout     no answer in time

Each carries a message that is safe to show: never a key, never a prompt.
"""

from __future__ import annotations


class SwitchError(Exception):
    """Base of every error switch raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(SwitchError):
    """Invalid configuration."""


class PresetError(ConfigError):
    """Invalid preset."""


class KeyMissingError(SwitchError):
    """No key is configured for a provider."""

    def __init__(self, provider: str, env_var: str | None) -> None:
        where = (
            f"set {env_var} or run `switch keys set {provider}`" if env_var else (f"run `switch keys set {provider}`")
        )
        super().__init__(f"no API key for provider '{provider}': {where}")
        self.provider = provider


class LedgerError(SwitchError):
    """The ledger file is damaged, foreign, from a newer switch, or cannot be opened."""


class RoutingError(SwitchError):
    """No route can serve the call."""


class ClientRequestError(SwitchError):
    """The caller sent something invalid; `status` is the HTTP status to answer with."""

    def __init__(
        self, message: str, status: int = 400, param: str | None = None, retry_after: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.retry_after = retry_after


class TranslationError(ClientRequestError):
    """The request uses a feature the chosen upstream cannot represent."""


class UpstreamError(SwitchError):
    """The upstream failed mid-call; `kind` says how (connect, broken, protocol, in_band, timeout, and for
    a transport without HTTP: failed, a provider error without a status; empty, a stream that ended before
    its first chunk; local, switch could not make the call)."""

    def __init__(self, message: str, *, kind: str = "http") -> None:
        super().__init__(message)
        self.kind = kind


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer in time."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="timeout")
