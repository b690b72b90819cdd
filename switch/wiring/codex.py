"""Codex: the `switch` provider and profile, and the per-turn `notify` summary, in its config.toml."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from switch.wiring.records import WiringError, hook_argv, load_record, proxy_url
from switch.wiring.toml_files import read_toml, toml_off, toml_on


def codex_config_path() -> Path:
    """Codex's config.toml."""
    base = os.environ.get("CODEX_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".codex") / "config.toml"


def codex_tables(
    port: int, model: str = "gpt-5.5", window_keys: dict[str, int] | None = None
) -> dict[tuple[str, ...], dict[str, Any]]:
    """The provider and profile that send `codex --profile switch` through the proxy; `window_keys` are the
    profile keys for the served model's window (`switch.wiring.windows.codex_window_keys`)."""
    return {
        ("model_providers", "switch"): {
            "name": "switch",
            "base_url": proxy_url(port) + "/v1",
            "wire_api": "responses",
            "requires_openai_auth": False,
        },
        ("profiles", "switch"): {"model_provider": "switch", "model": model, **(window_keys or {})},
    }


def codex_launch_overrides(port: int, window_keys: dict[str, int] | None = None) -> list[str]:
    """`-c` arguments giving one Codex launch exactly the model and provider of the `switch` profile.

    The profile's model matters, not only its provider: Codex picks the tools it offers by model, and its
    default model offers a JavaScript "code mode" tool that other providers' models handle badly.
    """
    tables = codex_tables(port, window_keys=window_keys)
    arguments: list[str] = []
    for path, table in tables.items():
        # The profile's keys apply at the top level: `run` launches without `--profile`.
        prefix = "" if path[0] == "profiles" else ".".join(path) + "."
        for key, value in table.items():
            # JSON strings, booleans and string arrays are valid TOML values.
            arguments += ["-c", f"{prefix}{key}={json.dumps(value)}"]
    return arguments


def codex_notify_argv(chained: list[str] | None = None) -> list[str]:
    """Codex's `notify` program: switch's per-turn summary, then the user's own program if they have one."""
    return [*hook_argv("codex-notify"), *(chained or [])]


def codex_user_notify() -> list[str] | None:
    """The `notify` program in the user's Codex config that is not switch's own, if any."""
    path = codex_config_path()
    try:
        _text, document = read_toml(path)
    except (WiringError, OSError):
        return None
    value = document.get("notify")
    record = load_record("codex")
    if value is None or (record is not None and value.unwrap() == record.get("keys", {}).get("notify")):
        return None
    unwrapped = value.unwrap()
    return [str(part) for part in unwrapped] if isinstance(unwrapped, list) else None


def codex_on(port: int, notify: bool = True, window_keys: dict[str, int] | None = None) -> tuple[Path, bool]:
    """Add the `switch` provider and profile to Codex's config.toml (idempotent) and, unless told not to or
    the user has their own, the per-turn `notify` summary; returns the file and whether a user's notify
    program was left in place."""
    path, kept = toml_on(
        "codex",
        codex_config_path(),
        codex_tables(port, window_keys=window_keys),
        {"notify": codex_notify_argv()} if notify else {},
    )
    return path, "notify" in kept


def codex_off() -> Path | None:
    """Undo `codex_on`."""
    return toml_off("codex")
