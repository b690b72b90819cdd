"""Turning harnesses on and off: edits to the user's own config files that can be undone exactly.

Each `on` records, in `$SWITCH_HOME/wiring/<harness>.json`, the file's original bytes and the
original value of every key it sets. `off` restores the original bytes when the file is exactly as
`on` left it; when the user changed something since, it restores only the keys switch set (and only
those still holding switch's values), leaving every other change alone. A malformed file is
reported and never written.
"""

from __future__ import annotations

from pathlib import Path

from switch.routing.classify import CLASSIFYING_MODEL
from switch.wiring.claude import (
    STATUSLINE_REFRESH_SECONDS,
    claude_env,
    claude_off,
    claude_on,
    claude_settings_path,
    claude_state,
    claude_statusline,
)
from switch.wiring.codex import (
    codex_config_path,
    codex_home,
    codex_launch_overrides,
    codex_notify_argv,
    codex_off,
    codex_on,
    codex_profile_keys,
    codex_profile_path,
    codex_state,
    codex_tables,
    codex_user_notify,
    legacy_profile,
)
from switch.wiring.gateway import chained_gateway
from switch.wiring.langchain import (
    DEEPAGENTS_MODEL,
    deepagents_config_path,
    deepagents_tables,
    langchain_child_env,
    langchain_env,
    langchain_env_notes,
    langchain_off,
    langchain_on,
)
from switch.wiring.records import ABSENT, WiringError, hook_argv, load_record, proxy_url
from switch.wiring.toml_files import toml_state

__all__ = [
    "ABSENT",
    "CLASSIFYING_MODEL",
    "DEEPAGENTS_MODEL",
    "STATUSLINE_REFRESH_SECONDS",
    "WiringError",
    "claude_env",
    "claude_off",
    "claude_on",
    "claude_settings_path",
    "claude_statusline",
    "chained_gateway",
    "codex_config_path",
    "codex_home",
    "codex_profile_keys",
    "codex_profile_path",
    "codex_state",
    "legacy_profile",
    "codex_launch_overrides",
    "codex_notify_argv",
    "codex_off",
    "codex_on",
    "codex_tables",
    "codex_user_notify",
    "deepagents_config_path",
    "deepagents_tables",
    "hook_argv",
    "langchain_child_env",
    "langchain_env",
    "langchain_env_notes",
    "langchain_off",
    "langchain_on",
    "proxy_url",
    "state",
]


def state(harness: str) -> str:
    """`on`, `off`, or `stale` (switch's record exists but the file no longer carries its values)."""
    record = load_record(harness)
    if record is None:
        return "off"
    path = Path(record["path"])
    if not path.exists():
        return "stale"
    if harness == "claude":
        return claude_state(record, path)
    return codex_state(record, path) if harness == "codex" else toml_state(record, path)
