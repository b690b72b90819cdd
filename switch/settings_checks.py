"""Checks on a settings file's raw TOML that no field type states: no control characters anywhere.

A CR/LF or other control character in a provider, target or model name ends up in an HTTP header or
an upstream URL, where it breaks the call before a ledger row exists; refused when the file is read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from switch.errors import ConfigError

# C0 controls, DEL and C1 controls; TOML strings may hold all of them as escapes.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _found(value: Any, key: str) -> tuple[str, str] | None:
    """The dotted key and the first control character under `value`, if any."""
    if isinstance(value, str):
        match = _CONTROL.search(value)
        return (key, match.group()) if match else None
    if isinstance(value, dict):
        for name, item in value.items():
            inner = f"{key}.{name}" if key else str(name)
            match = _CONTROL.search(str(name))
            if match:
                return (inner, match.group())
            found = _found(item, inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _found(item, f"{key}[{index}]")
            if found is not None:
                return found
    return None


def refuse_control_characters(raw: dict[str, Any], path: Path, error: type[ConfigError] = ConfigError) -> None:
    """Raise `error` naming the first key whose name or text holds a control character (the text is not quoted)."""
    found = _found(raw, "")
    if found is not None:
        key, character = found
        # The key itself may hold the character: shown escaped, so the line stays one line.
        shown = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", key)
        raise error(
            f"{path}: key '{shown}' holds a control character (U+{ord(character):04X}); "
            "names and values must be plain text on one line: remove it"
        )
