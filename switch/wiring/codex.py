"""Codex: the `switch` provider in its config.toml, the `switch` profile in its own file, and the profile's
per-turn `notify` summary.

Codex 0.171 reads a named profile from `$CODEX_HOME/<name>.config.toml` (top-level keys, applied over
config.toml only for `codex --profile <name>`) and refuses to start with `--profile <name>` while
config.toml still holds a `[profiles.<name>]` table or `profile = "<name>"`. So the provider table goes
into config.toml, and everything the profile sets (model, provider, notify) into `switch.config.toml`,
where no other profile sees it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from switch.wiring.records import WiringError, hook_argv, load_record, proxy_url
from switch.wiring.toml_files import dotted_get, read_toml, toml_off, toml_on, toml_state

PROFILE = "switch"
# The record of the profile file, beside the "codex" record of config.toml.
PROFILE_RECORD = "codex-profile"
DEFAULT_MODEL = "gpt-5.5"
# Extra top-level keys every `switch` profile sets (and `switch run codex` passes as `-c`), e.g. context
# window settings; switch's own keys (model_provider, model, notify) are added by `codex_profile_keys`.
PROFILE_EXTRA_KEYS: dict[str, Any] = {}
# What an earlier switch (and Codex before 0.171) used, which Codex 0.171 refuses.
LEGACY_PATHS: tuple[tuple[str, ...], ...] = (("profiles", PROFILE),)


def codex_home() -> Path:
    """Codex's home directory (`$CODEX_HOME`, else ~/.codex)."""
    base = os.environ.get("CODEX_HOME")
    return Path(base).expanduser() if base else Path.home() / ".codex"


def codex_config_path() -> Path:
    """Codex's config.toml."""
    return codex_home() / "config.toml"


def codex_profile_path() -> Path:
    """The file Codex reads for `codex --profile switch`."""
    return codex_home() / f"{PROFILE}.config.toml"


def codex_tables(port: int, websockets: bool = False) -> dict[tuple[str, ...], dict[str, Any]]:
    """The provider table in config.toml that sends the `switch` profile's calls through the proxy.

    `requires_openai_auth` makes Codex send its own login's bearer token (without it, and without an
    `env_key`, Codex sends no Authorization at all); switch forwards it only on the native OpenAI route.
    With `websockets` (the proxy's `[server] websockets`), `supports_websockets` makes Codex 0.171 open one
    Responses WebSocket per session (its `responses_websockets` features are on by default); without it
    Codex posts each turn over HTTP.
    """
    table: dict[str, Any] = {
        "name": "switch",
        "base_url": proxy_url(port) + "/v1",
        "wire_api": "responses",
        "requires_openai_auth": True,
    }
    if websockets:
        table["supports_websockets"] = True
    return {("model_providers", PROFILE): table}


def codex_profile_keys(
    model: str = DEFAULT_MODEL, notify: list[str] | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The top-level keys of the `switch` profile: provider, model, `extra` (default PROFILE_EXTRA_KEYS),
    and the `notify` program when given."""
    keys: dict[str, Any] = {"model_provider": PROFILE, "model": model}
    keys.update(PROFILE_EXTRA_KEYS if extra is None else extra)
    if notify is not None:
        keys["notify"] = notify
    return keys


def codex_launch_overrides(port: int, window_keys: dict[str, int] | None = None, websockets: bool = False) -> list[str]:
    """`-c` arguments giving one Codex launch exactly the provider and profile keys of the `switch` profile
    (with `window_keys`, the served model's window: `switch.wiring.windows.codex_window_keys`; `websockets`:
    as in `codex_tables`).

    The profile's model matters, not only its provider: Codex picks the tools it offers by model, and its
    default model offers a JavaScript "code mode" tool that other providers' models handle badly.
    """
    arguments: list[str] = []
    for path, table in codex_tables(port, websockets).items():
        for key, value in table.items():
            # JSON strings, booleans and string arrays are valid TOML values.
            arguments += ["-c", f"{'.'.join(path)}.{key}={json.dumps(value)}"]
    # The profile's keys apply at the top level: `run` launches without `--profile`.
    for key, value in codex_profile_keys(extra={**PROFILE_EXTRA_KEYS, **(window_keys or {})}).items():
        arguments += ["-c", f"{key}={json.dumps(value)}"]
    return arguments


def codex_notify_argv(chained: list[str] | None = None) -> list[str]:
    """Codex's `notify` program: switch's per-turn summary, then the user's own program if they have one."""
    return [*hook_argv("codex-notify"), *(chained or [])]


def _switch_notify(value: Any) -> bool:
    return isinstance(value, list) and value[: len(hook_argv("codex-notify"))] == hook_argv("codex-notify")


def codex_user_notify() -> list[str] | None:
    """The user's own top-level `notify` program in Codex's config.toml (not one an earlier switch wrote)."""
    try:
        _text, document = read_toml(codex_config_path())
    except (WiringError, OSError):
        return None
    value = document.get("notify")
    if value is None:
        return None
    unwrapped = value.unwrap()
    record = load_record("codex")
    if (record is not None and unwrapped == record.get("keys", {}).get("notify")) or _switch_notify(unwrapped):
        return None
    return [str(part) for part in unwrapped] if isinstance(unwrapped, list) else None


def legacy_profile(document: Any) -> list[str]:
    """What in a parsed config.toml makes Codex 0.171 refuse `--profile switch` (empty when nothing)."""
    found = [f"[{'.'.join(path)}]" for path in LEGACY_PATHS if dotted_get(document, path) is not None]
    selector = document.get("profile")
    if selector is not None and selector.unwrap() == PROFILE:
        found.append(f'profile = "{PROFILE}"')
    return found


def codex_on(
    port: int, notify: bool = True, window_keys: dict[str, int] | None = None, websockets: bool = False
) -> tuple[Path, Path, list[str]]:
    """Write the `switch` provider into config.toml and the profile (with switch's per-turn summary unless
    told not to) into switch.config.toml, migrating what Codex refuses; idempotent. Returns both files and
    what was migrated out of config.toml; `window_keys` tell Codex the served model's window.
    The user's own `notify` stays in config.toml untouched and runs
    after switch's summary under the `switch` profile."""
    config = codex_config_path()
    _text, document = read_toml(config)
    migrated = legacy_profile(document)
    summary = codex_notify_argv(codex_user_notify()) if notify else None
    legacy_table = dotted_get(document, ("profiles", PROFILE))
    carried: dict[str, Any] = {}
    if legacy_table is not None and hasattr(legacy_table, "unwrap"):
        # The user's own settings in an old profile table (their model too) move with it; the provider and
        # notify are switch's own and rewritten.
        carried = {k: v for k, v in legacy_table.unwrap().items() if k not in ("model_provider", "notify")}
    remove = LEGACY_PATHS + ((("profile",),) if any(m.startswith("profile =") for m in migrated) else ())
    profile_file = codex_profile_path()
    _profile_text, profile_document = read_toml(profile_file)
    theirs = profile_document.get("model_provider")
    if theirs is not None and theirs.unwrap() != PROFILE and load_record(PROFILE_RECORD) is None:
        raise WiringError(
            f"{profile_file} sets model_provider = {theirs.as_string()}, so `codex --profile switch` would not reach "
            "switch; remove that line (or the file) and run `switch codex on` again; switch did not change it"
        )
    # The profile file first: a failure there leaves config.toml as it was.
    keys = codex_profile_keys(notify=summary, extra={**carried, **PROFILE_EXTRA_KEYS, **(window_keys or {})})
    profile_path, _kept = toml_on(PROFILE_RECORD, profile_file, {}, keys)
    path, _ = toml_on("codex", config, codex_tables(port, websockets), {}, remove)
    return path, profile_path, migrated


def codex_off() -> Path | None:
    """Undo `codex_on`: config.toml restored (byte for byte when untouched since) and the profile file
    removed or restored."""
    toml_off(PROFILE_RECORD)
    return toml_off("codex")


def codex_state(record: dict[str, Any], path: Path) -> str:
    """`on` when config.toml and the profile file still hold what switch wrote, else `stale`."""
    if toml_state(record, path) != "on":
        return "stale"
    profile = load_record(PROFILE_RECORD)
    if profile is None:
        return "stale"  # an earlier switch's wiring: `switch codex on` moves the profile into its file
    profile_path = Path(profile["path"])
    return toml_state(profile, profile_path) if profile_path.exists() else "stale"
