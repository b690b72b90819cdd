"""What switch tells each harness about the model serving its main thread: its context window and output limit.

A harness sizes its context from the model id it sends: Claude Code assumes about 1M tokens for its own
default and for any id it does not know, so behind switch it compacts too late for a smaller model. When the
target of the orchestrator in the active preset is not native and its window is known, `claude on` /
`run claude` set `CLAUDE_CODE_AUTO_COMPACT_WINDOW` and `CLAUDE_CODE_MAX_OUTPUT_TOKENS`, and Codex's profile gets
`model_context_window` and `model_auto_compact_token_limit`. A native orchestrator, or an unknown window,
sets nothing: the harness knows its own model, and an unknown window stays unknown.

The pure functions take the preset and the limit table; `active_window` reads both from this home.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from switch.ledger.limits import LimitTable
    from switch.routing.presets import Preset

CLAUDE_WINDOW_VARIABLES = ("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CLAUDE_CODE_MAX_OUTPUT_TOKENS")
"""The Claude Code settings whose values switch derives from the orchestrator's model."""
CLAUDE_DEFAULT_OUTPUT = 128000
"""What Claude Code asks for by default for its own model ids: switch never raises it."""
CODEX_COMPACT_SHARE = 0.9
"""Codex compacts at this share of the window (what it does by default for the models it knows)."""


@dataclass(frozen=True, slots=True)
class ServedWindow:
    """The orchestrator's target for one harness in a preset, and its model's limits (None: unknown)."""

    reference: str
    context_window: int | None
    output_limit: int | None


def served_window(preset: Preset, section: str, limits: LimitTable) -> ServedWindow | None:
    """The first orchestrator target of `section` ("claude-code", "codex") and its limits; None when native."""
    reference = preset.chain(section, "orchestrator")[0]
    if reference == "native":
        return None
    found = limits.of(reference)
    return ServedWindow(reference, found.context_window, found.output_limit)


def claude_window_env(served: ServedWindow | None) -> dict[str, str]:
    """The Claude Code environment settings for the served model's window (empty: native or unknown)."""
    if served is None or served.context_window is None:
        return {}
    window = served.context_window
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(window)}
    # A reply cannot take the whole window: the prompt needs room too, so a quarter of it at most.
    output = min(served.output_limit or CLAUDE_DEFAULT_OUTPUT, CLAUDE_DEFAULT_OUTPUT, max(1, window // 4))
    env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(output)
    return env


def codex_window_keys(served: ServedWindow | None) -> dict[str, int]:
    """The Codex profile keys for the served model's window (empty: native or unknown)."""
    if served is None or served.context_window is None:
        return {}
    window = served.context_window
    return {"model_context_window": window, "model_auto_compact_token_limit": int(window * CODEX_COMPACT_SHARE)}


def active_window(section: str) -> ServedWindow | None:
    """`served_window` for this home's config.toml and active preset (no preset: `[defaults] model`)."""
    from switch.config import litellm_names, load_settings
    from switch.ledger.limits import limit_table
    from switch.routing.presets import active_name, defaults_preset, load_preset

    settings = load_settings()
    name = active_name()
    # A broken preset raises PresetError, naming its file: `on` and `run` report it like `serve` does.
    preset = (
        load_preset(name, set(settings.providers), settings.defaults.model)
        if name is not None
        else defaults_preset(settings.defaults.model)
    )
    return served_window(preset, section, limit_table(settings.models, litellm_names(settings)))


__all__ = [
    "CLAUDE_WINDOW_VARIABLES",
    "ServedWindow",
    "active_window",
    "claude_window_env",
    "codex_window_keys",
    "served_window",
]
