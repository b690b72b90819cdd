"""The context window and output limit of each model, read as data like the prices.

Sources, in order of precedence: the user's `[models."provider/model"]` in config.toml
(`context_window`, `max_output_tokens`), switch's bundled additions (`data/prices.json`), and
LiteLLM's bundled model table (`max_input_tokens`, `max_output_tokens`), read as a data file, never
imported. A model is looked up under its provider's own name only, as prices are (see `pricing`).
A limit found nowhere is unknown (None): nothing is enforced on it, and it is shown as unknown.

LiteLLM's table is indexed, not held (`litellm_table`): an entry's two limits are read when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from switch.ledger.litellm_table import EntryIndex, shared_index
from switch.ledger.pricing import BUNDLED_TABLE, LITELLM_ALIASES, PROVIDER_PREFIXES, litellm_table_path


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """A model's context window and output limit in tokens (None: unknown), and where each came from."""

    context_window: int | None = None
    output_limit: int | None = None
    window_source: str | None = None
    output_source: str | None = None

    def describe(self) -> dict[str, Any]:
        """The limits as `--json` outputs show them."""
        return {
            "context_window": self.context_window,
            "context_window_source": self.window_source,
            "max_output_tokens": self.output_limit,
            "max_output_tokens_source": self.output_source,
        }

    def summary(self) -> str:
        """One line for people: the window and the output limit, each with its source, or that it is unknown."""
        window = f"{self.context_window} tokens" if self.context_window else "unknown (not enforced)"
        output = f"{self.output_limit} tokens" if self.output_limit else "unknown (not enforced)"
        if self.window_source == self.output_source:
            return f"context window {window}, output limit {output}{_source(self.window_source)}"
        return (
            f"context window {window}{_source(self.window_source)}, output limit {output}{_source(self.output_source)}"
        )


def _source(source: str | None) -> str:
    if source is None:
        return ""
    kind, _sep, key = source.partition(":")
    names = {"litellm": "LiteLLM model table", "switch": "switch additions", "config": "config.toml [models]"}
    return f" ({names.get(kind, kind)}: {key})"


UNKNOWN = ModelLimits()


@dataclass(frozen=True, slots=True)
class LimitOverride:
    """What config.toml's `[models."provider/model"]` says about a model's limits."""

    context_window: int | None = None
    max_output_tokens: int | None = None


def _tokens(value: Any) -> int | None:
    """A positive whole number of tokens from a table entry, else None (the table is outside data)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


@dataclass(frozen=True, slots=True)
class _Entry:
    window: int | None
    output: int | None
    marked_provider: str
    source: str


def _read_entries(raw: bytes, prefix: str, into: dict[str, _Entry]) -> None:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    if not isinstance(parsed, dict):
        return
    for key, entry in parsed.items():
        if not isinstance(entry, dict):
            continue
        window, output = _tokens(entry.get("max_input_tokens")), _tokens(entry.get("max_output_tokens"))
        if window is None and output is None:
            continue
        into[key.lower()] = _Entry(window, output, str(entry.get("litellm_provider") or ""), f"{prefix}:{key}")


def _indexed_entry(index: EntryIndex | None, lowered: str) -> _Entry | None:
    """The limits LiteLLM's indexed table gives under a lower-cased key, or None."""
    found = index.get(lowered) if index is not None else None
    if found is None:
        return None
    entry, key = found
    window, output = _tokens(entry.get("max_input_tokens")), _tokens(entry.get("max_output_tokens"))
    if window is None and output is None:
        return None
    return _Entry(window, output, str(entry.get("litellm_provider") or ""), f"litellm:{key}")


class LimitTable:
    """Looks up the limits of `provider/model` references; the tables are read on first use."""

    def __init__(
        self,
        overrides: Mapping[str, LimitOverride] | None = None,
        litellm_names: Mapping[str, str] | None = None,
        *,
        raw_tables: tuple[bytes, ...] | None = None,
    ) -> None:
        self._overrides = {key.lower(): value for key, value in (overrides or {}).items()}
        self._litellm_names = dict(litellm_names or {})
        self._raw_tables = raw_tables
        """Table bytes to read instead of the bundled files (tests feed outside data through it)."""
        self._entries: dict[str, _Entry] | None = None
        self._litellm: EntryIndex | None = None
        self._resolved: dict[tuple[str, str], ModelLimits] = {}

    def _entry(self, lowered: str) -> _Entry | None:
        """The limits under a lower-cased table key: switch's additions, else LiteLLM's indexed table."""
        if self._entries is None:
            entries: dict[str, _Entry] = {}
            if self._raw_tables is not None:
                for raw in self._raw_tables:
                    _read_entries(raw, "litellm", entries)
            else:
                # LiteLLM's table is indexed, not loaded (see `litellm_table`); switch's own entries are few.
                path = litellm_table_path()
                self._litellm = shared_index(path) if path is not None else None
                _read_entries(BUNDLED_TABLE.read_bytes(), "switch", entries)
            self._entries = entries
        found = self._entries.get(lowered)
        return found if found is not None else _indexed_entry(self._litellm, lowered)

    def _candidates(self, provider: str, model: str) -> list[str]:
        keys: list[str] = []
        name = self._litellm_names.get(provider)
        if name is not None:
            for spelled in (name, *LITELLM_ALIASES.get(name, ())):
                keys.append(f"{spelled}/{model}")
                bare = self._entry(model.lower())
                if bare is not None and (
                    bare.marked_provider == spelled or bare.marked_provider.startswith(spelled + "-")
                ):
                    keys.append(model)
        else:
            keys += [f"{prefix}{model}" for prefix in PROVIDER_PREFIXES.get(provider, (f"{provider}/",))]
        return [key.lower() for key in keys]

    def lookup(self, provider: str, model: str) -> ModelLimits:
        """The limits of `model` served by `provider` (UNKNOWN where no source has them)."""
        key = (provider, model)
        found = self._resolved.get(key)
        if found is None:
            if len(self._resolved) > 4096:
                self._resolved.clear()
            found = self._resolved[key] = self._lookup(provider, model)
        return found

    def _lookup(self, provider: str, model: str) -> ModelLimits:
        if not model:
            return UNKNOWN
        window = output = None
        window_source = output_source = None
        for key in self._candidates(provider, model):
            entry = self._entry(key)
            if entry is not None:
                window, output = entry.window, entry.output
                window_source = entry.source if window is not None else None
                output_source = entry.source if output is not None else None
                break
        reference = f"{provider}/{model}"
        override = self._overrides.get(reference.lower())
        if override is not None:
            if override.context_window is not None:
                window, window_source = override.context_window, f"config:{reference}"
            if override.max_output_tokens is not None:
                output, output_source = override.max_output_tokens, f"config:{reference}"
        return ModelLimits(window, output, window_source, output_source)

    def of(self, reference: str) -> ModelLimits:
        """The limits of a `provider/model` reference; `native` and malformed references are UNKNOWN."""
        provider, sep, model = reference.partition("/")
        return self.lookup(provider, model) if sep and model else UNKNOWN


class ModelKnobs(Protocol):
    """The two fields of config.toml's `[models."provider/model"]` that set a model's limits."""

    @property
    def context_window(self) -> int | None: ...

    @property
    def max_output_tokens(self) -> int | None: ...


def limit_table(models: Mapping[str, ModelKnobs], litellm_names: Mapping[str, str] | None = None) -> LimitTable:
    """The limit table for config.toml's `[models]` (and its LiteLLM providers' names)."""
    overrides = {
        reference: LimitOverride(knobs.context_window, knobs.max_output_tokens)
        for reference, knobs in models.items()
        if knobs.context_window is not None or knobs.max_output_tokens is not None
    }
    return LimitTable(overrides, litellm_names)


__all__ = ["UNKNOWN", "LimitOverride", "LimitTable", "ModelKnobs", "ModelLimits", "limit_table"]
