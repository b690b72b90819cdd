"""Model references (`provider/model` or `native`) → concrete upstream targets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from switch.config import NATIVE, Api, Settings, model_settings
from switch.errors import RoutingError


@dataclass(frozen=True, slots=True)
class ChatTarget:
    """How to talk to one chat upstream model: what differs between chat providers and models."""

    model: str
    reasoning_style: Literal["reasoning_effort", "chat_template_args", "thinking", "none"] = "reasoning_effort"
    reasoning_field: str = "reasoning_content"
    effort_levels: tuple[str, ...] = ("low", "medium", "high")
    max_output_tokens: int | None = None
    default_output_tokens: int = 32768
    fixed_sampling: bool = False
    send_user: bool = True
    cache_key_field: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """One upstream to try: which provider, which API, which model."""

    reference: str
    provider: str
    api: Api
    base_url: str
    model: str
    native: bool
    api_key_env: str | None
    chat: ChatTarget | None
    litellm_provider: str | None = None
    """With api `litellm`: LiteLLM's provider name, the prefix of the model LiteLLM is asked for."""
    context_window: int | None = None
    """The model's context window in tokens (None: unknown, nothing enforced; see `switch.ledger.limits`)."""
    output_limit: int | None = None
    """The most output tokens the model gives; `max_tokens` sent upstream never exceeds it (None: unknown)."""
    keyless: bool = False
    """The provider takes calls without a key (`auth = "none"`): none is looked up or sent."""


def resolve_target(settings: Settings, reference: str, native_api: Api = "anthropic") -> Target:
    """Resolve `reference`; `native` means the caller's own provider for `native_api`."""
    if reference == NATIVE:
        provider_name = "anthropic" if native_api == "anthropic" else "openai"
        provider = settings.providers[provider_name]
        return Target(reference, provider_name, native_api, provider.base_url.rstrip("/"), "", True, None, None)
    provider_name, sep, model = reference.partition("/")
    if not sep or not model:
        raise RoutingError(f"model reference '{reference}' must look like 'provider/model' or 'native'")
    configured = settings.providers.get(provider_name)
    if configured is None:
        known = ", ".join(sorted(settings.providers))
        raise RoutingError(f"unknown provider '{provider_name}' in '{reference}' (known: {known})")
    provider = configured
    knobs = model_settings(settings, reference)
    chat = None
    # A LiteLLM call is built as a chat body too (LiteLLM takes OpenAI chat's shape).
    if provider.api in ("openai-chat", "litellm"):
        chat = ChatTarget(
            model=model,
            reasoning_style=provider.reasoning_style,
            reasoning_field=provider.reasoning_field,
            effort_levels=tuple(knobs.effort_levels) if knobs.effort_levels is not None else ("low", "medium", "high"),
            max_output_tokens=knobs.max_output_tokens,
            fixed_sampling=bool(knobs.fixed_sampling),
            send_user=provider.send_user,
            cache_key_field=provider.cache_key_field,
        )
    # By name: Target grows fields (windows, auth), and a positional list silently shifts onto the wrong one.
    return Target(
        reference=reference,
        provider=provider_name,
        api=provider.api,
        base_url=provider.base_url.rstrip("/"),
        model=model,
        native=False,
        api_key_env=provider.api_key_env,
        chat=chat,
        litellm_provider=provider.litellm_provider,
        keyless=provider.auth == "none",
    )
