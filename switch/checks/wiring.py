"""Checks of each harness's wiring against the running proxy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switch.config import Settings
    from switch.routing.presets import Preset

from switch.checks.base import Check, ProxyState, check


def wired_url(harness: str) -> tuple[Path, str, str | None]:
    """(file, setting, URL) of where switch's wiring sends `harness` (URL None: not found in the file)."""
    from switch import wiring

    if harness == "claude":
        path = wiring.claude_settings_path()
        env = json_object(path).get("env")
        url = env.get("ANTHROPIC_BASE_URL") if isinstance(env, dict) else None
        return path, "env.ANTHROPIC_BASE_URL", url if isinstance(url, str) else None
    keys: tuple[str, ...]
    if harness == "codex":
        path, keys = wiring.codex_config_path(), ("model_providers", "switch", "base_url")
    else:
        path, keys = wiring.deepagents_config_path(), ("models", "providers", "switch", "base_url")
    value: Any = toml_table(path)
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return path, "[" + ".".join(keys[:-1]) + "] " + keys[-1], value if isinstance(value, str) else None


# What each harness does when nothing answers on the port it is wired to.
WHEN_NOTHING_ANSWERS = {
    "claude": "Claude Code hangs on every call, printing nothing, until it gives up minutes later",
    "codex": "Codex stalls on every turn, reconnecting, before it fails",
    "langchain": "deepagents-code fails every call with a connection error",
}
START_FIX = "switch up (this session), or switch service install (from every login on)"


def nothing_answers(harness: str, port: int) -> str:
    """The warning for a harness wired to a port where nothing answers."""
    return f"{harness} is wired to 127.0.0.1:{port}, where nothing answers: {WHEN_NOTHING_ANSWERS[harness]}"


def wiring_checks(state: ProxyState) -> list[Check]:
    """Each harness switch wired: still wired, and to the port this home's proxy runs on."""
    from urllib.parse import urlsplit

    from switch import wiring

    results: list[Check] = []
    for harness in ("claude", "codex", "langchain"):
        wired = wiring.state(harness)
        name = f"wiring:{harness}"
        if wired == "stale":
            fix = f"switch {harness} off && switch {harness} on"
            results.append(check(name, False, f"{harness} wiring is stale", fix))
            continue
        if wired == "on":
            path, setting, url = wired_url(harness)
            try:
                port = urlsplit(url).port if url else None
            except ValueError:
                port = None
            if port != state.port:
                runs = "runs" if state.health is not None else "is configured to run"
                results.append(
                    check(
                        name,
                        False,
                        f"{path} sets {setting} = {url}, but this home's proxy {runs} on port {state.port}: "
                        f"{harness} calls miss the proxy",
                        f"switch {harness} on",
                    )
                )
                continue
            if state.health is None:
                fix = f"{START_FIX}; or `switch {harness} off` to unwire it"
                results.append(check(name, False, nothing_answers(harness, state.port), fix))
                continue
        results.append(check(name, True, f"{harness} wiring is {wired}"))
    results.append(codex_profile_check())
    return results


def codex_profile_check() -> Check:
    """Codex 0.171 refuses `codex --profile switch` while config.toml holds a legacy profile for it."""
    from switch import wiring
    from switch.wiring.toml_files import read_toml

    path = wiring.codex_config_path()
    try:
        _text, document = read_toml(path)
    except (wiring.WiringError, OSError, UnicodeDecodeError):
        return check("codex:profile", True, f"{path} cannot be read; nothing to check")
    found = wiring.legacy_profile(document)
    if not found:
        return check("codex:profile", True, "no legacy `switch` profile in Codex's config.toml")
    return check(
        "codex:profile",
        False,
        f"{path} holds {' and '.join(found)}: Codex 0.171 refuses to start `codex --profile switch` with it",
        f"switch codex on (moves it into {wiring.codex_profile_path()}; `switch codex off` restores the file)",
    )


def window_checks(preset: Preset, settings: Settings) -> list[Check]:
    """Whether what `claude on` told Claude Code about its model's window still matches the active preset."""
    from switch import wiring
    from switch.config import litellm_names
    from switch.ledger.limits import limit_table
    from switch.wiring import windows
    from switch.wiring.records import load_record

    record = load_record("claude")
    if record is None or wiring.state("claude") != "on":
        return []
    served = windows.served_window(preset, "claude-code", limit_table(settings.models, litellm_names(settings)))
    wanted = windows.claude_window_env(served)
    values = record.get("values", {})
    wired = {key: values[key] for key in windows.CLAUDE_WINDOW_VARIABLES if key in values}
    path = record.get("path", "settings.json")
    if wired == wanted:
        if served is None:
            return [check("window:claude", True, "Claude Code sizes its context itself (native orchestrator)")]
        window = served.context_window
        said = f"knows its window: {window} tokens" if window else "has no window to be told (unknown)"
        return [check("window:claude", True, f"Claude Code {said} ({served.reference})")]
    told = wired.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW")
    now = (
        "a native orchestrator (Claude Code knows its window)"
        if served is None
        else f"{served.reference}, whose window is {served.context_window or 'unknown'} tokens"
    )
    detail = (
        f"{path} sets CLAUDE_CODE_AUTO_COMPACT_WINDOW = {told}" if told else f"{path} sets no context window"
    ) + f", but preset '{preset.name}' now serves Claude Code's orchestrator with {now}"
    return [check("window:claude", False, detail, "switch claude on")]


def wired_models() -> list[tuple[str, str, Path, str, str]]:
    """(harness, preset section, file, setting, model) for each model name a harness config file sets."""
    from switch import wiring

    found: list[tuple[str, str, Path, str, str]] = []
    path = wiring.deepagents_config_path()
    models = toml_table(path).get("models")
    if isinstance(models, dict):
        for key in ("default", "recent"):
            if isinstance(models.get(key), str):
                found.append(("langchain", "langchain", path, f"[models] {key}", models[key]))
    path = wiring.codex_config_path()
    codex = toml_table(path)
    if isinstance(codex.get("model"), str):
        found.append(("codex", "codex", path, "model", codex["model"]))
    profiles = codex.get("profiles")
    for name, profile in profiles.items() if isinstance(profiles, dict) else []:
        if isinstance(profile, dict) and isinstance(profile.get("model"), str):
            found.append(("codex", "codex", path, f"[profiles.{name}] model", profile["model"]))
    path = wiring.codex_profile_path()
    profile = toml_table(path)
    if isinstance(profile.get("model"), str):
        found.append(("codex", "codex", path, "model", profile["model"]))
    path = wiring.claude_settings_path()
    claude = json_object(path)
    env = claude.get("env")
    for key, value in (("model", claude.get("model")), ("env.ANTHROPIC_MODEL", (env or {}).get("ANTHROPIC_MODEL"))):
        if isinstance(value, str):
            found.append(("claude", "claude-code", path, key, value))
    return found


def toml_table(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}  # missing or broken: the wiring check speaks for a broken file switch wrote


def json_object(path: Path) -> dict[str, Any]:
    try:
        parsed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def codex_login_check(routes_native: bool) -> Check | None:
    """Codex's login kind, when the active preset sends Codex calls to the native OpenAI route (None otherwise).

    Reads only `auth_mode` from Codex's auth.json, never a token.
    """
    if not routes_native:
        return None
    from switch import wiring

    path = wiring.codex_home() / "auth.json"
    mode = json_object(path).get("auth_mode")
    if mode == "chatgpt":
        return check(
            "codex:login",
            False,
            "Codex is logged in with ChatGPT, and the active preset sends Codex calls to the native OpenAI route: "
            "OpenAI's public API does not accept a ChatGPT login's token, so those calls fail with a 401",
            "codex login --with-api-key (an OpenAI API key), or a preset without native Codex routes: "
            "switch use kimi-k3",
        )
    if not path.exists():
        return check(
            "codex:login",
            False,
            "the active preset sends Codex calls to the native OpenAI route, but Codex is not logged in "
            f"({path} is missing), so it sends no credentials",
            "codex login --with-api-key",
        )
    return check("codex:login", True, f"Codex is logged in ({mode or 'unknown kind'}) for the native route")
