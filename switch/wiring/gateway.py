"""Claude Code behind a gateway: the ANTHROPIC_BASE_URL that `claude on` takes over goes on serving native calls.

A user whose settings.json already sends Claude Code to a gateway (a corporate proxy, LiteLLM, a regional
endpoint) must keep reaching it for native calls once switch sits in between. `claude on` writes that URL
as `[providers.anthropic] base_url` in switch's config.toml (the running proxy applies it within a
second), and `claude off` takes it out again, giving back config.toml byte for byte when it is unchanged.
"""

from __future__ import annotations

from typing import Any

from switch import locations
from switch.wiring.records import WiringError, load_record
from switch.wiring.toml_files import read_toml, toml_off, toml_on

RECORD = "claude-gateway"


def chain_gateway(previous: str | None, proxy: str) -> str | None:
    """Make `previous` (Claude Code's ANTHROPIC_BASE_URL before switch) native's base URL; the URL chained, or None.

    Nothing is chained when there was none, when it is switch's own URL, or when config.toml already names
    native's base URL (the user's own choice stands; `claude on` says so)."""
    if not previous or previous.rstrip("/") == proxy.rstrip("/") or load_record(RECORD) is not None:
        return chained_gateway()
    path = locations.config_file()
    _text, document = read_toml(path)
    providers: Any = document.get("providers")
    theirs = providers.get("anthropic") if hasattr(providers, "get") else None
    if theirs is not None and not hasattr(theirs, "unwrap"):
        raise WiringError(f"{path}: 'providers.anthropic' must be a table; switch did not change it")
    table = dict(theirs.unwrap()) if theirs is not None else {}
    if table.get("base_url"):
        return None
    toml_on(RECORD, path, {("providers", "anthropic"): {**table, "base_url": previous}})
    return previous


def chained_gateway() -> str | None:
    """The gateway URL `claude on` made native's base URL, while it is wired."""
    record = load_record(RECORD)
    if record is None:
        return None
    for _dotted, values in record.get("tables", []):
        return str(values.get("base_url")) or None
    return None


def unchain_gateway() -> None:
    """Take the chained gateway out of config.toml again (nothing when none was chained)."""
    toml_off(RECORD)
