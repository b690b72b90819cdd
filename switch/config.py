"""Settings: `$SWITCH_HOME/config.toml` over built-in defaults, validated with clear errors.

The settings are plain dataclasses, checked by `switch.config_schema` (pydantic would cost the proxy ~9 MB).

[server]                      # where `switch serve` listens and its limits
port = 8742
shutdown_grace = 5            # seconds live calls get to finish when the proxy stops

[defaults]
model = "baseten/moonshotai/Kimi-K3"   # or "native"

[providers.baseten]           # a user entry overrides the built-in one field by field
api = "openai-chat"           # openai-chat | anthropic | openai-responses | litellm
base_url = "https://inference.baseten.co/v1"
api_key_env = "BASETEN_API_KEY"

[providers.gemini]            # any provider LiteLLM speaks, served through LiteLLM's SDK
api = "litellm"
litellm_provider = "gemini"   # LiteLLM's provider name: the target gemini/M is called as gemini/M
api_key_env = "GEMINI_API_KEY"
# base_url = "http://127.0.0.1:8080"   # optional; passed to LiteLLM as api_base

[models."baseten/moonshotai/Kimi-K3"]   # per-model knobs, all optional
max_output_tokens = 262144               # else LiteLLM's table; unknown: no limit enforced
context_window = 1048576                 # else LiteLLM's max_input_tokens
effort_levels = ["low", "high", "max"]
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from switch import locations
from switch.config_budgets import Budget, check_budgets
from switch.config_schema import SchemaError, dotted, rules, to_dict, validate
from switch.config_team import Team
from switch.errors import ConfigError
from switch.settings_checks import refuse_control_characters

Api = Literal["openai-chat", "anthropic", "openai-responses", "litellm"]
APIS: tuple[Api, ...] = ("openai-chat", "anthropic", "openai-responses", "litellm")
FallbackTrigger = Literal["connect", "timeout", "5xx", "429", "no_key", "context_window"]
FALLBACK_TRIGGERS: tuple[FallbackTrigger, ...] = ("connect", "timeout", "5xx", "429", "no_key", "context_window")
NATIVE = "native"
PRICE_FIELDS = ("input", "cached_input", "cache_write", "output")


@dataclass(slots=True)
class Provider:
    """One upstream provider."""

    api: Api = "openai-chat"
    """Wire API the provider speaks (`litellm`: any provider LiteLLM's SDK reaches, called through it)."""
    base_url: str = ""
    """Base URL; chat and responses paths are appended to it, Anthropic's `/v1/messages` too.

    Required, except with `api = "litellm"`, where it is optional and passed to LiteLLM as `api_base`."""
    litellm_provider: str | None = None
    """With `api = "litellm"`: LiteLLM's name for the provider (`gemini`, `bedrock`, `ollama_chat`, ...)."""
    api_key_env: str | None = None
    """Environment variable holding the key; else the key stored with `switch keys set NAME`."""
    auth: Literal["key", "none"] = "key"
    """`none`: a server that takes calls without a key (a local vLLM, llama.cpp or LM Studio server): no key is
    looked up and no Authorization header is sent."""
    reasoning_style: Literal["reasoning_effort", "chat_template_args", "thinking", "none"] = "reasoning_effort"
    """How the provider takes a reasoning request on chat completions."""
    reasoning_field: str = "reasoning_content"
    """Message field that carries reasoning back to the provider (vLLM ≥ 0.16 wants `reasoning`)."""
    cache_key_field: str | None = None
    """Body field for a stable prompt-cache key, where the provider accepts one."""
    send_user: bool = True
    """Whether to pass the caller's user id on as `user`."""

    def _check(self) -> None:
        # The fields must fit the api; raised as ValueError so the message names the provider's table, like
        # every other config error (switch.config_schema runs `_check` once the fields themselves are valid).
        if self.api == "litellm":
            if not self.litellm_provider:
                raise ValueError(
                    'api = "litellm" needs litellm_provider, LiteLLM\'s name for the provider '
                    '(e.g. litellm_provider = "gemini")'
                )
            if "/" in self.litellm_provider or self.litellm_provider != self.litellm_provider.strip():
                raise ValueError("litellm_provider is one LiteLLM provider name, without '/' or spaces")
        else:
            if self.litellm_provider is not None:
                raise ValueError(
                    f'litellm_provider applies only with api = "litellm" (this provider has api = "{self.api}")'
                )
            if not self.base_url:
                raise ValueError(f'base_url is required with api = "{self.api}"')


@dataclass(slots=True)
class ModelSettings:
    """Knobs for one `provider/model` reference."""

    max_output_tokens: int | None = field(default=None, metadata=rules(gt=0, le=1 << 40))
    """Output limit; larger requests are clamped to it (overrides LiteLLM's `max_output_tokens`)."""
    context_window: int | None = field(default=None, metadata=rules(gt=0, le=1 << 40))
    """Context window in tokens (overrides LiteLLM's `max_input_tokens`): what the harness is told, and
    what decides when a call needs a `long_context` target."""
    effort_levels: list[str] | None = None
    """Reasoning effort values the model accepts, lowest first."""
    fixed_sampling: bool | None = None
    """Drop `temperature`/`top_p` (models that reject changes to them)."""


@dataclass(slots=True)
class Server:
    """How `switch serve` listens."""

    host: str = "127.0.0.1"
    # Strict: a TOML string ("8742") or float is refused rather than coerced, like every other typo.
    port: int = field(default=8742, metadata=rules(ge=1, le=65535))
    """TCP port the proxy listens on: a whole number from 1 to 65535."""
    # Every number has a range: 0, negative, nan or inf would break each call (or spin a core) at run time.
    max_body_bytes: int = field(default=32 * 1024 * 1024, metadata=rules(ge=1024, le=1 << 30))
    """Largest request body accepted; larger ones get 413."""
    ping_interval: float = field(default=10.0, metadata=rules(ge=0.1, le=3600, finite=True))
    """Seconds of upstream silence before a keep-alive ping goes to a streaming client."""
    connect_timeout: float = field(default=10.0, metadata=rules(gt=0, le=3600, finite=True))
    read_timeout: float = field(default=300.0, metadata=rules(gt=0, le=86400, finite=True))
    """Seconds an upstream may stay silent mid-response before the call fails."""
    max_stream_seconds: float = field(default=3600.0, metadata=rules(gt=0, le=7 * 24 * 3600, finite=True))
    """Longest an upstream response may last in all, however steadily it trickles; then the call ends with an error."""
    access_token: str | None = None
    shutdown_grace: int = field(default=5, metadata=rules(ge=0, le=3600))
    """Seconds a stopping proxy lets live calls finish; then each gets an in-band error and its row."""
    # Client-side limits, as nginx and Envoy set them (see switch.proxy.connections and proxy.body_budget).
    header_timeout: float = field(default=10.0, metadata=rules(gt=0, le=3600, finite=True))
    """Seconds a client connection gets to send a request's headers (from connecting, or its first byte)."""
    body_timeout: float = field(default=120.0, metadata=rules(gt=0, le=86400, finite=True))
    """Seconds a client gets to send a whole request body once its headers arrived."""
    idle_timeout: float = field(default=75.0, metadata=rules(gt=0, le=86400, finite=True))
    """Seconds a keep-alive connection may sit idle between requests."""
    max_connections: int = field(default=1024, metadata=rules(ge=4, le=1 << 20))
    """Client connections open at once; beyond it the oldest idle one is closed, or the new one if none is idle."""
    max_buffered_body_bytes: int = field(default=128 * 1024 * 1024, metadata=rules(ge=1024, le=1 << 34))
    """Request bytes all calls may hold at once; a call beyond it gets a 503 with retry-after."""
    websockets: bool = True
    """Serve the Responses API over a WebSocket on `/v1/responses` (Codex's preferred transport); false answers
    the upgrade with 426 Upgrade Required, on which Codex falls back to HTTP at once."""
    websocket_idle_timeout: float = field(default=300.0, metadata=rules(gt=0, le=86400, finite=True))
    """Seconds a Responses WebSocket may sit with no turn running and no message before switch closes it."""
    metrics: bool = True
    """Serve Prometheus metrics at `GET /metrics` (behind the same guard as every endpoint)."""
    fail_open: bool = True
    """When the proxy starts (as the login service, or `serve --fail-open`) on a config or active preset it
    cannot use: true sends every call to its harness's native provider; false answers each with a 503."""


@dataclass(slots=True)
class Routing:
    """How calls move between a route's targets."""

    fallback_on: list[FallbackTrigger] = field(default_factory=lambda: list(FALLBACK_TRIGGERS))
    """Failures (before any byte reached the client) that move a call to the route's next target."""
    ttft_timeout: float = field(default=30.0, metadata=rules(gt=0, le=3600, finite=True))
    """Seconds to wait for an upstream's first byte before trying the next target."""
    affinity: Literal["session", "none"] = "session"
    """Keep each harness session (and agent) on the target it started with."""


@dataclass(slots=True)
class Defaults:
    """Routing defaults used until a preset says otherwise."""

    model: str = "baseten/moonshotai/Kimi-K3"


@dataclass(slots=True)
class Pricing:
    """What the native counterfactual is priced at when the requested model has no price."""

    baseline_anthropic: str = "claude-opus-5-5"
    """Model used for the counterfactual of Anthropic-API calls whose requested model is unpriced."""
    baseline_openai: str = "gpt-5.5"
    """Model used for the counterfactual of OpenAI-API calls whose requested model is unpriced."""


def _prices_are_prices(prices: dict[str, dict[str, float]]) -> None:
    # A negative or misspelt price would turn into a wrong cost on every call (or a silent $0 input).
    for model, fields in prices.items():
        for name, value in fields.items():
            if name not in PRICE_FIELDS:
                raise ValueError(
                    f'"{model}".{name} is not a price (allowed: {", ".join(PRICE_FIELDS)}); fix its spelling'
                )
            if not math.isfinite(value) or value < 0:
                raise ValueError(f'"{model}".{name} = {value}: a price is USD per million tokens, 0 or more')


@dataclass(slots=True)
class Settings:
    """The whole configuration."""

    server: Server = field(default_factory=Server)
    defaults: Defaults = field(default_factory=Defaults)
    routing: Routing = field(default_factory=Routing)
    providers: dict[str, Provider] = field(default_factory=dict)
    models: dict[str, ModelSettings] = field(default_factory=dict)
    prices: dict[str, dict[str, float]] = field(default_factory=dict, metadata=rules(check=_prices_are_prices))
    """USD per million tokens by `provider/model`: input, cached_input, cache_write, output."""
    pricing: Pricing = field(default_factory=Pricing)
    budgets: list[Budget] = field(default_factory=list)
    """`[[budgets]]`: caps in USD per period with their actions (see `switch.config_budgets`)."""
    team: Team | None = None
    """The team ledger on PostgreSQL (switch.team); None: nothing is shipped."""


BUILTIN_PROVIDERS: dict[str, dict[str, Any]] = {
    "baseten": {
        "api": "openai-chat",
        "base_url": "https://inference.baseten.co/v1",
        "api_key_env": "BASETEN_API_KEY",
    },
    "moonshot": {
        "api": "openai-chat",
        "base_url": "https://api.moonshot.ai/v1",
        "api_key_env": "MOONSHOT_API_KEY",
    },
    "openrouter": {
        "api": "openai-chat",
        "base_url": "https://openrouter.ai/api/v1",
        "api_key_env": "OPENROUTER_API_KEY",
        "reasoning_field": "reasoning",
    },
    "anthropic": {
        "api": "anthropic",
        "base_url": "https://api.anthropic.com",
        "api_key_env": "ANTHROPIC_API_KEY",
    },
    "openai": {
        "api": "openai-responses",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
    },
}

# Model families with known constraints, matched on the lower-cased model id.
BUILTIN_MODEL_FAMILIES: tuple[tuple[str, ModelSettings], ...] = (
    (
        "kimi-k3",
        ModelSettings(max_output_tokens=262144, effort_levels=["low", "high", "max"], fixed_sampling=True),
    ),
    ("kimi-k2", ModelSettings(max_output_tokens=65536, effort_levels=[], fixed_sampling=True)),
)


def _describe(error: SchemaError, path: Path) -> str:
    # Values are never quoted back: a mistyped access_token or key must not end up on the screen.
    key = dotted(error.loc)
    if error.kind == "unknown":
        known = f" (allowed: {', '.join(error.allowed)})" if error.allowed else ""
        return f"{path}: unknown key '{key}'{known}; fix its spelling or remove it"
    if error.kind == "check":
        # A check of a key or across a table's fields (see Provider): its message already says what to write.
        return f"{path}: key '{key}': {error.reason}"
    if error.kind == "missing":
        return f"{path}: key '{key}' is required; add it to that table"
    return f"{path}: invalid value at '{key}': {error.reason}; fix it or remove the key to use the default"


def load_settings(path: Path | None = None, *, check_default: bool = True) -> Settings:
    """Read config.toml (if any) over the built-in defaults; raise ConfigError naming the key and the fix.

    `check_default=False` leaves `[defaults] model` unchecked, for doctor to report it beside its other findings.
    """
    path = path or locations.config_file()
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{path}: not valid TOML: {exc}; fix that line, or move the file away to run on the defaults"
            ) from exc
        except OSError as exc:
            raise ConfigError(
                f"{path}: cannot be read ({exc.strerror}); make it a readable file, or remove it to run on the defaults"
            ) from exc
        refuse_control_characters(raw, path)
    providers: dict[str, Any] = {name: dict(fields) for name, fields in BUILTIN_PROVIDERS.items()}
    user_providers = raw.get("providers", {})
    if not isinstance(user_providers, dict):
        raise ConfigError(f"{path}: 'providers' must be a table of [providers.NAME] tables")
    for name, fields in user_providers.items():
        if not isinstance(fields, dict):
            raise ConfigError(f"{path}: 'providers.{name}' must be a table")
        if fields.get("api") == "litellm" and name in ("anthropic", "openai"):
            raise ConfigError(
                f"{path}: providers.{name}.api = 'litellm': native calls go to [providers.{name}] over its own API; "
                f"give the LiteLLM provider another name, e.g. [providers.{name}-litellm]"
            )
        base = providers.get(name, {})
        if fields.get("api", base.get("api")) == "litellm" and "api" in fields:
            # A LiteLLM provider overriding a built-in one keeps none of its HTTP endpoint.
            base = {key: value for key, value in base.items() if key not in ("base_url", "api")}
        providers[name] = {**base, **fields}
    try:
        settings = validate(Settings, {**raw, "providers": providers})
    except SchemaError as exc:
        raise ConfigError(_describe(exc, path)) from exc
    # Checked here, not per call: a default no call can reach would otherwise fail every call the same way.
    if check_default:
        check_references(settings, path)
    check_budgets(settings.budgets, set(providers), path)
    return settings


def litellm_names(settings: Settings) -> dict[str, str]:
    """Each `api = "litellm"` provider's LiteLLM name (prices are looked up under it)."""
    return {
        name: provider.litellm_provider
        for name, provider in settings.providers.items()
        if provider.api == "litellm" and provider.litellm_provider
    }


def model_settings(settings: Settings, reference: str) -> ModelSettings:
    """The knobs for `provider/model`: user entry over built-in family defaults."""
    merged: dict[str, Any] = {}
    lowered = reference.lower()
    for family, defaults in BUILTIN_MODEL_FAMILIES:
        if family in lowered:
            merged = to_dict(defaults, exclude_none=True)
            break
    user = settings.models.get(reference)
    if user is not None:
        merged.update(to_dict(user, exclude_none=True))
    # Both are checked already; to_dict copied their lists, so no caller can edit the built-in ones.
    return ModelSettings(**merged)


def reference_problem(reference: str, providers: dict[str, Provider]) -> str | None:
    """Why `reference` names no target these providers can serve (None: it does)."""
    if reference == NATIVE:
        return None
    provider, sep, model = reference.partition("/")
    if not sep or not model:
        return f"'{reference}' is not 'native' or 'provider/model'"
    if provider not in providers:
        return f"unknown provider '{provider}' in '{reference}' (known: {', '.join(sorted(providers))})"
    return None


def check_references(settings: Settings, path: Path) -> None:
    """Raise ConfigError when `[defaults] model` names no provider of this config."""
    problem = reference_problem(settings.defaults.model, settings.providers)
    if problem is not None:
        raise ConfigError(
            f"{path}: key 'defaults.model': {problem}; set it to \"native\" or a provider/model of a "
            '[providers.NAME] table, e.g. model = "baseten/moonshotai/Kimi-K3"'
        )


def file_digest(path: Path) -> str | None:
    """The SHA-256 of the file's bytes, or None when it does not exist."""
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        # Missing or unreadable: reading the settings next says which, naming the file and the fix.
        return None


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """What a cheap poll compares to notice an edit: inode, mtime and size (None: no file)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


@dataclass(frozen=True)
class LoadedConfig:
    """Settings together with the file they came from, as a running proxy reports them."""

    settings: Settings
    path: Path
    digest: str | None
    """SHA-256 of the file's bytes (None: no file, built-in defaults)."""
    signature: tuple[int, int, int] | None
    server: dict[str, Any]
    """The [server] section as the file set it, before any command-line override."""


def load_config(path: Path | None = None) -> LoadedConfig:
    """Load and check config.toml, with the digest of exactly the bytes that were read."""
    path = path or locations.config_file()
    for _attempt in range(5):
        # An editor may be writing the file meanwhile: settle on a read whose bytes did not change under it.
        signature, digest = file_signature(path), file_digest(path)
        settings = load_settings(path)
        if file_digest(path) == digest:
            break
    return LoadedConfig(settings, path, digest, signature, to_dict(settings.server))
