"""Prices per model, and exact costs in integer micro-USD.

Sources, in order of precedence: the user's `[prices."provider/model"]` in config.toml (USD per
million tokens), switch's bundled additions (`data/prices.json`), and litellm's bundled price table
read as a data file (never imported, never fetched). A model found in none is *unpriced*: its cost
is None, never 0.

A model is looked up under its provider's own name only (LiteLLM's name for an `api = "litellm"`
provider: `gemini/...`, `bedrock/...`): the same model sold by another provider may cost something
else, so such a price is only ever offered as a suggestion (`suggestions`), never applied.

Token buckets are disjoint (uncached input, cache reads, cache writes, output), so each API's usage
convention has already been normalised before a price is applied.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import orjson

from switch.ledger.litellm_table import shared_index

BUNDLED_TABLE = Path(__file__).resolve().parent / "data" / "prices.json"
_MILLION = Decimal(1_000_000)
PROVIDER_PREFIXES: dict[str, tuple[str, ...]] = {
    "baseten": ("baseten/",),
    "moonshot": ("moonshot/",),
    "openrouter": ("openrouter/",),
    "anthropic": ("", "anthropic/"),
    "openai": ("", "openai/"),
}
"""Our provider names → how LiteLLM's table spells them as key prefixes ("": unprefixed keys)."""
LITELLM_ALIASES: dict[str, tuple[str, ...]] = {"ollama_chat": ("ollama",), "hosted_vllm": ("vllm",)}
"""LiteLLM provider names whose models LiteLLM's table keeps under another of its names (same service)."""
SOURCE_NAMES = {"litellm": "LiteLLM cost map", "switch": "switch additions", "config": "config.toml [prices]"}
"""What each price source prefix (`litellm:`, `switch:`, `config:`) stands for, as `switch prices` says it."""


@dataclass(frozen=True, slots=True)
class Tokens:
    """The token counts a price applies to, in disjoint buckets (reasoning is part of output)."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Price:
    """USD per token for each bucket, and where the figures came from."""

    input: Decimal
    cache_read: Decimal
    cache_write: Decimal
    output: Decimal
    source: str

    def cost_micros(self, usage: Tokens) -> int:
        """The exact cost of `usage` in micro-USD, rounded half up."""
        total = (
            self.input * usage.input_tokens
            + self.cache_read * usage.cache_read_tokens
            + self.cache_write * usage.cache_write_tokens
            + self.output * usage.output_tokens
        ) * _MILLION
        return int(total.quantize(Decimal(1), rounding=ROUND_HALF_UP))

    def cache_savings_micros(self, usage: Tokens) -> int:
        """What cached reads saved against paying full input price for them."""
        saved = (self.input - self.cache_read) * usage.cache_read_tokens * _MILLION
        return int(saved.quantize(Decimal(1), rounding=ROUND_HALF_UP))

    def per_million(self) -> dict[str, float]:
        """The prices in USD per million tokens (as people quote them)."""
        return {
            "input": float(self.input * _MILLION),
            "cached_input": float(self.cache_read * _MILLION),
            "cache_write": float(self.cache_write * _MILLION),
            "output": float(self.output * _MILLION),
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A priced `provider/model` reference a model name may mean."""

    reference: str
    price: Price


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return None


def _price_from_entry(entry: dict[str, Any], source: str) -> Price | None:
    input_price = _decimal(entry.get("input_cost_per_token"))
    output_price = _decimal(entry.get("output_cost_per_token"))
    if input_price is None or output_price is None:
        return None
    cache_read = _decimal(entry.get("cache_read_input_token_cost"))
    cache_write = _decimal(entry.get("cache_creation_input_token_cost"))
    return Price(
        input_price,
        cache_read if cache_read is not None else input_price,
        cache_write if cache_write is not None else input_price,
        output_price,
        source,
    )


def litellm_table_path() -> Path | None:
    """Where litellm's bundled price table is, without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    return path if path.exists() else None


class PriceTable:
    """Looks up prices for `provider/model` references and plain model names."""

    def __init__(
        self, overrides: dict[str, dict[str, float]] | None = None, litellm_names: dict[str, str] | None = None
    ) -> None:
        self._overrides = {key.lower(): value for key, value in (overrides or {}).items()}
        self._override_names = tuple(overrides or {})
        self._litellm_names = dict(litellm_names or {})
        """Each `api = "litellm"` provider's LiteLLM name, under which its models are priced."""
        self._resolved: dict[tuple[str | None, str], Price | None] = {}
        table = litellm_table_path()
        # LiteLLM's table is indexed, not loaded: see `litellm_table`. switch's own few entries come first.
        self._litellm = shared_index(table) if table is not None else None
        self._additions: dict[str, tuple[dict[str, Any], str]] = {}
        for key, entry in orjson.loads(BUNDLED_TABLE.read_bytes()).items():
            if isinstance(entry, dict):
                self._additions[key.lower()] = (entry, f"switch:{key}")

    def _entry(self, lowered: str) -> tuple[dict[str, Any], str] | None:
        """(entry, source) under a lower-cased table key: switch's additions, else LiteLLM's table."""
        found = self._additions.get(lowered)
        if found is None and self._litellm is not None:
            entry = self._litellm.get(lowered)
            found = (entry[0], f"litellm:{entry[1]}") if entry is not None else None
        return found

    def _all_entries(self) -> list[tuple[str, tuple[dict[str, Any], str]]]:
        """Every (lower-cased key, (entry, source)) of both tables (for the CLI's searches; reads the whole table)."""
        everything: dict[str, tuple[dict[str, Any], str]] = {}
        if self._litellm is not None:
            for lowered, (entry, key) in self._litellm.entries():
                everything[lowered] = (entry, f"litellm:{key}")
        everything.update(self._additions)
        return list(everything.items())

    def _candidates(self, provider: str | None, model: str) -> list[str]:
        keys: list[str] = []
        if provider in self._litellm_names:
            name = self._litellm_names[provider]
            for spelled in (name, *LITELLM_ALIASES.get(name, ())):
                keys.append(f"{spelled}/{model}")
                # LiteLLM keeps some providers' models unprefixed, marked with the provider's name.
                # (Vertex's are marked `vertex_ai-language-models` and the like.)
                bare = self._entry(model.lower())
                marked = str(bare[0].get("litellm_provider")) if bare is not None else ""
                if marked == spelled or marked.startswith(spelled + "-"):
                    keys.append(model)
        elif provider:
            for prefix in PROVIDER_PREFIXES.get(provider, (f"{provider}/",)):
                keys.append(f"{prefix}{model}")
        else:
            keys.append(model)
        return [key.lower() for key in keys]

    def suggestions(self, model: str, limit: int = 5) -> list[str]:
        """Other providers' entries for the same model name: what a user might copy into `[prices]`."""
        name = model.rsplit("/", 1)[-1].lower()
        found = [
            source.split(":", 1)[1]
            for key, (entry, source) in self._all_entries()
            if (key == name or key.endswith("/" + name)) and _price_from_entry(entry, source) is not None
        ]
        return sorted(found)[:limit]

    def highest_price(self) -> tuple[float, float]:
        """The highest input and output prices (USD per million) of switch's own additions.

        (Not of LiteLLM's whole table: its dearest entries would make every unknown model a $2 call.)"""
        top_input = top_output = 0.0
        for entry, source in self._additions.values():
            price = _price_from_entry(entry, source)
            if price is not None:
                listed = price.per_million()
                top_input, top_output = max(top_input, listed["input"]), max(top_output, listed["output"])
        return top_input, top_output

    def lookup(self, provider: str | None, model: str) -> Price | None:
        """The price for `model` served by `provider` (or a plain model name), or None."""
        key = (provider, model)
        if key not in self._resolved:
            if len(self._resolved) > 4096:
                self._resolved.clear()
            self._resolved[key] = self._lookup(provider, model)
        return self._resolved[key]

    def _lookup(self, provider: str | None, model: str) -> Price | None:
        if not model:
            return None
        reference = f"{provider}/{model}" if provider else model
        override = self._overrides.get(reference.lower()) or self._overrides.get(model.lower())
        if override is not None:
            return self._override_price(override, reference)
        for key in self._candidates(provider, model):
            found = self._entry(key)
            if found is not None:
                price = _price_from_entry(*found)
                if price is not None:
                    return price
        return None

    @staticmethod
    def _override_price(override: dict[str, float], reference: str) -> Price:
        def per_token(name: str, default: Decimal) -> Decimal:
            value = _decimal(override.get(name))
            return value / _MILLION if value is not None else default

        input_price = per_token("input", Decimal(0))
        return Price(
            input_price,
            per_token("cached_input", input_price),
            per_token("cache_write", input_price),
            per_token("output", Decimal(0)),
            f"config:{reference}",
        )

    def resolve(self, name: str, providers: Iterable[str]) -> list[Candidate]:
        """The priced references `name` may mean: a `provider/model`, a served model name as `switch calls` and the
        dashboard show it (`moonshotai/Kimi-K3`), or its last part (`Kimi-K3`); one per configured provider that
        has a price for it, none when unpriced. Several mean several providers serve that name."""
        configured = sorted(set(providers))
        provider, sep, model = name.partition("/")
        if sep and model and provider in configured:
            price = self.lookup(provider, model)
            return [Candidate(name, price)] if price else []
        plain = self._overrides.get(name.lower())
        if plain is not None:
            # The ledger prices every provider's calls of this name at the user's figure: so does this.
            return [Candidate(name, self._override_price(plain, name))]
        found = self._served_by(configured, [name, *self._full_names(name, configured)])
        if not found:
            price = self.lookup(None, name)
            found = [Candidate(name, price)] if price else []
        return found

    def _served_by(self, providers: list[str], models: list[str]) -> list[Candidate]:
        found: list[Candidate] = []
        for provider in providers:
            for model in models:
                price = self._provider_price(provider, model)
                if price is not None:
                    found.append(Candidate(f"{provider}/{model}", price))
                    break
        return found

    def _provider_price(self, provider: str, model: str) -> Price | None:
        """The price a provider's own entry gives `model` (a user override, or a table key under its prefix)."""
        if provider in self._litellm_names:
            # Priced under its LiteLLM name only (and the user's own [prices]), as the ledger prices its calls.
            return self.lookup(provider, model)
        reference = f"{provider}/{model}"
        override = self._overrides.get(reference.lower())
        if override is not None:
            return self._override_price(override, reference)
        for prefix in PROVIDER_PREFIXES.get(provider, (f"{provider}/",)):
            found = self._entry(f"{prefix}{model}".lower())
            # An unprefixed key is anyone's name: it is this provider's only when the table says so.
            if found is not None and (prefix or found[0].get("litellm_provider") == provider):
                price = _price_from_entry(*found)
                if price is not None:
                    return price
        return None

    def _prefixes(self, provider: str) -> tuple[str, ...]:
        """How the price tables spell `provider`'s models: its LiteLLM name for a LiteLLM provider."""
        name = self._litellm_names.get(provider)
        if name is not None:
            return tuple(f"{spelled}/" for spelled in (name, *LITELLM_ALIASES.get(name, ())))
        return PROVIDER_PREFIXES.get(provider, (f"{provider}/",))

    def _full_names(self, short: str, providers: list[str]) -> list[str]:
        """Models of the configured providers whose name ends in `/short` (the dashboard's short name)."""
        suffix = "/" + short.lower()
        keys = [*self._override_names, *(source.split(":", 1)[1] for _key, (_entry, source) in self._all_entries())]
        names: list[str] = []
        for key in keys:
            if not key.lower().endswith(suffix):
                continue
            for provider in providers:
                for prefix in self._prefixes(provider):
                    if prefix and key.lower().startswith(prefix) and key[len(prefix) :] not in names:
                        names.append(key[len(prefix) :])
        return names
